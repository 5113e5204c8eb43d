// lower-matmul-nbits (--format qdq): onnxruntime's weight-only MatMulNBits becomes its standard
// form, the blocked DequantizeLinear of opset 21 feeding a MatMul (common/nbits_layout.h).
//
// Before:
//   y = com.microsoft::MatMulNBits(A, B, scales[, zero_points][, g_idx][, bias]; K, N, bits, block_size)
// After:
//   W = DequantizeLinear(x, scale[, zero]; axis 0, block_size)      x: [K, N] of (u)int<bits>
//   y = MatMul(A, W) [-> Add(bias)]
// Both compute A x W with W[k, n] = (q - zero) * scale: agreement to float rounding.
// A node is lowered when:
//   1. the node is what MatMulNBits' definition demands (common/contrib_defs.h: bits 2, 4 or 8,
//      block_size a power of two of 16 or more, every input of the shape K and N give): else it
//      stays, with a warning;
//   2. B, scales and zero points are constants of the shapes the attributes give; zero points
//      are packed uint8 (float zero points have no DequantizeLinear form);
//   3. g_idx is absent or the identity order (k / block_size): act-order reorders K;
//   4. the model's default opset can be raised to the standard op's (21; 2-bit: 25): every
//      ai.onnx node keeps its meaning (common/opset_history.h);
//   5. B, scales and zero points are stored in a form the repacking reads (ir::storageProblem).
// accuracy_level (onnxruntime's: 4 computes with A quantized to int8) is not kept: the standard
// form computes in float, as the operator's definition does; each one is named.
#include <fmt/format.h>

#include <map>
#include <tuple>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/common/contrib_defs.h"
#include "qconv/passes/common/nbits_layout.h"
#include "qconv/passes/common/opset_history.h"
#include "qconv/passes/driver.h"

namespace qconv {

namespace {

using onnx::TensorProto;

struct Shape {
  int64_t K, N, bits, block, blocks;
};

bool isFloatScale(int32_t t) { return t == TensorProto::FLOAT || t == TensorProto::FLOAT16 || t == TensorProto::BFLOAT16; }

int64_t count(const ir::Value* v) { return ir::numElements(*v->initializer()).value_or(-1); }

struct LowerMatMulNBits {
  struct Group {
    ir::Node* node;
    Shape shape;
  };
  ir::Model& model;
  int64_t opset;
  std::map<int64_t, std::string> blockers;  // opset needed -> the first node in the way ("" none)
  int64_t raise_to = 0;
  // The weight each (B, scales, zero points, shape) became: nodes reading one weight (tied
  // embedding and output weights) share one DequantizeLinear, so the output is no bigger than
  // the input however many read it.
  using Key = std::tuple<const ir::Value*, const ir::Value*, const ir::Value*, int64_t, int64_t, int64_t, int64_t>;
  std::map<Key, ir::Value*> lowered;

  const std::string& blockerFor(int64_t needed) {
    auto [it, fresh] = blockers.emplace(needed, "");
    if (fresh) it->second = opsetRaiseBlocker(model, opset, needed);
    return it->second;
  }

  bool root(const ir::Node& n) const { return n.domain() == "com.microsoft" && n.opIs("MatMulNBits"); }
  std::string declined(const ir::Node&) const { return "stays com.microsoft::MatMulNBits"; }

  Match<Group> select(ir::Node& n) {
    using M = Match<Group>;
    // (1) what the op's definition demands (common/contrib_defs.h): a malformed node stays, said at
    // the default level, never lowered into standard ops that would be invalid in their turn
    if (std::string why = matMulNBitsProblem(n); !why.empty()) return M::refuse(why, Report::Warning);
    Shape s{n.attrInt("K", 0), n.attrInt("N", 0), n.attrInt("bits", 4), n.attrInt("block_size", 0), 0};
    s.blocks = (s.K + s.block - 1) / s.block;
    const ir::Value *b = n.input(1), *scales = n.input(2), *zp = n.input(3), *g_idx = n.input(4);
    if (!b || !b->isConstant() || b->initializer()->data_type() != TensorProto::UINT8)  // (2)
      return M::refuse("B is not a constant uint8 tensor");
    if (ir::dimsOf(*b->initializer()) != std::vector<int64_t>{s.N, s.blocks, s.block * s.bits / 8})
      return M::refuse(fmt::format("B's shape is not [N, k_blocks, blob] = [{}, {}, {}]", s.N, s.blocks, s.block * s.bits / 8));
    if (!scales || !scales->isConstant() || !isFloatScale(scales->initializer()->data_type()) || count(scales) != s.N * s.blocks)
      return M::refuse(fmt::format("scales are not a constant float tensor of N * k_blocks = {} values", s.N * s.blocks));
    if (zp) {
      if (!zp->isConstant()) return M::refuse("zero points are not constant");
      if (zp->initializer()->data_type() != TensorProto::UINT8)
        return M::refuse(fmt::format("zero points are {}: a DequantizeLinear's zero point has the weight's integer type",
                                     ir::typeName(zp->initializer()->data_type())));
      if (count(zp) != s.N * ((s.blocks * s.bits + 7) / 8))
        return M::refuse(fmt::format("zero points hold {} bytes, N * ceil(k_blocks * bits / 8) is {}", count(zp),
                                     s.N * ((s.blocks * s.bits + 7) / 8)));
    }
    if (g_idx) {  // (3)
      std::string why;
      auto order = g_idx->isConstant() ? ir::readInts(*g_idx, &why) : std::nullopt;
      bool identity = order && static_cast<int64_t>(order->size()) == s.K;
      for (int64_t k = 0; identity && k < s.K; ++k) identity = (*order)[static_cast<size_t>(k)] == k / s.block;
      if (!identity)
        return M::refuse("g_idx reorders K by group (act-order): a blocked DequantizeLinear takes consecutive blocks only");
    }
    for (const ir::Value* c : {b, scales, zp})  // (5)
      if (c)
        if (std::string why = ir::storageProblem(*c); !why.empty()) return M::refuse(fmt::format("'{}' cannot be read: {}", c->name(), why));
    const int64_t needed = s.bits == 2 ? 25 : 21;  // (4)
    if (const std::string& why = blockerFor(needed); !why.empty())
      return M::refuse(fmt::format("its standard form needs opset {}, and {}", needed, why));
    return Group{&n, s};
  }

  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Node& n = *g.node;
    const Shape& s = g.shape;
    const Key key{n.input(1), n.input(2), n.input(3), s.K, s.N, s.bits, s.block};
    ir::Value*& weight = lowered[key];
    if (!weight) weight = dequantized(graph, n, s);
    ir::Node* mm = graph.createNode("MatMul", "", {n.input(0), weight}, 1, &n);
    ir::Node* last = mm;
    if (ir::Value* bias = n.input(5)) {
      mm->output(0)->setElemType(n.input(2)->initializer()->data_type());
      last = graph.createNode("Add", "", {mm->output(0), bias}, 1, &n);
      graph.setNameHint(mm, n.name() + "_matmul");
    }
    if (n.input(3) && n.input(4))
      ctx.report(Report::Warning, n, "g_idx and zero points: qconv takes the operator's definition, W = (q - zero) * scale "
                                     "(g_idx the identity order); onnxruntime's CPU kernel ignores the zero points when g_idx "
                                     "is given, so it computes this node differently from its standard form");
    if (const int64_t level = n.attrInt("accuracy_level", 0))
      ctx.report(Report::Done, n, fmt::format("accuracy_level {} not kept: onnxruntime's hint to compute with A at lower "
                                              "precision (4: int8); the standard form computes in float",
                                              level));
    ctx.count("MatMulNBits lowered to DequantizeLinear(block_size) -> MatMul");
    raise_to = std::max(raise_to, s.bits == 2 ? int64_t{25} : int64_t{21});
    replaceNode(graph, n, last);
  }

  /// The blocked DequantizeLinear of n's weight, made before n: x, scale and zero point repacked.
  ir::Value* dequantized(ir::Graph& graph, ir::Node& n, const Shape& s) {
    const uint64_t K = static_cast<uint64_t>(s.K), N = static_cast<uint64_t>(s.N), blocks = static_cast<uint64_t>(s.blocks);
    const uint64_t padded = blocks * static_cast<uint64_t>(s.block);
    const bool has_zp = n.input(3) != nullptr;
    const unsigned offset = has_zp ? 0u : 1u << (s.bits - 1);  // no zero points: signed, at 0
    std::string why;
    ir::ByteKeeper* keeper = model.byte_keeper.get();

    // x[k, n] = B's element k of row n
    auto x = std::make_unique<TensorProto>();
    x->set_data_type(nbits::standardType(s.bits, !has_zp));
    x->add_dims(s.K);
    x->add_dims(s.N);
    const bool whole_bytes = s.bits == 4 && K % 2 == 0 && N % 2 == 0;  // the fast path: whole bytes, in tiles
    ir::Value* xv = nullptr;
    if (whole_bytes) {  // in pieces past nbits::kWholeBytes
      xv = nbits::transposedTensor(graph, keeper, n.input(1)->name() + "_x", std::move(x), *n.input(1), padded / 2, N, K,
                                   N / 2, 4, offset, &why);
      QCONV_ASSERT(xv, "lower-matmul-nbits: {}", why);
    } else {
      std::string packed = nbits::buffer(keeper, (K * N * static_cast<uint64_t>(s.bits) + 7) / 8, true);
      std::string b = nbits::rawBytes(*n.input(1), &why, keeper);
      QCONV_ASSERT(why.empty(), "lower-matmul-nbits: {}", why);
      for (uint64_t col = 0; col < N; ++col)
        for (uint64_t k = 0; k < K; ++k)
          nbits::pack(packed, k * N + col, s.bits, (nbits::unpack(b, col * padded + k, s.bits) - offset) & ((1u << s.bits) - 1));
      nbits::recycle(keeper, std::move(b));
      xv = nbits::addMadeTensor(graph, keeper, n.input(1)->name() + "_x", std::move(x), std::move(packed));
    }

    // scale[b, n] = scales[n * k_blocks + b], in the scales' own type
    const ir::Value* scales = n.input(2);
    const size_t w = ir::byteWidth(scales->initializer()->data_type());
    auto scale = std::make_unique<TensorProto>();
    scale->set_data_type(scales->initializer()->data_type());
    scale->add_dims(s.blocks);
    scale->add_dims(s.N);
    ir::Value* sv = nbits::transposedTensor(graph, keeper, scales->name() + "_blocked", std::move(scale), *scales, blocks * w,
                                            N, blocks, N * w, static_cast<int>(8 * w), 0, &why);
    QCONV_ASSERT(sv, "lower-matmul-nbits: {}", why);
    std::vector<ir::Value*> dq_in{xv, sv};
    if (has_zp) {  // zero[b, n] = zero_points' element b of row n
      const uint64_t row = (blocks * static_cast<uint64_t>(s.bits) + 7) / 8 * (8 / static_cast<uint64_t>(s.bits));
      auto zero = std::make_unique<TensorProto>();
      zero->set_data_type(nbits::standardType(s.bits, false));
      zero->add_dims(s.blocks);
      zero->add_dims(s.N);
      const std::string hint = n.input(3)->name() + "_blocked";
      if (s.bits == 4 && blocks % 2 == 0 && N % 2 == 0) {  // whole bytes: in tiles, and in pieces past kWholeBytes
        dq_in.push_back(nbits::transposedTensor(graph, keeper, hint, std::move(zero), *n.input(3), blocks / 2, N, blocks, N / 2,
                                                4, 0, &why));
        QCONV_ASSERT(dq_in.back(), "lower-matmul-nbits: {}", why);
      } else {
        const std::string zb = nbits::rawBytes(*n.input(3), &why);
        QCONV_ASSERT(why.empty(), "lower-matmul-nbits: {}", why);
        std::string zt((blocks * N * static_cast<uint64_t>(s.bits) + 7) / 8, '\0');
        for (uint64_t col = 0; col < N; ++col)
          for (uint64_t blk = 0; blk < blocks; ++blk)
            nbits::pack(zt, blk * N + col, s.bits, nbits::unpack(zb, col * row + blk, s.bits));
        dq_in.push_back(nbits::addMadeTensor(graph, keeper, hint, std::move(zero), std::move(zt)));
      }
    }
    ir::Node* dq = graph.createNode("DequantizeLinear", "", dq_in, 1, &n);
    setIntAttribute(*dq, "axis", 0);
    setIntAttribute(*dq, "block_size", s.block);
    dq->output(0)->setElemType(scales->initializer()->data_type());
    return dq->output(0);
  }
};

}  // namespace

void lowerMatMulNBits(ir::Model& model, PassContext& ctx) {
  LowerMatMulNBits rule{model, ir::defaultOpset(model), {}, 0, {}};
  applyRule(model.graph, ctx, rule);
  if (rule.raise_to > rule.opset) {
    declareOpset(model, rule.raise_to);
    ctx.report(Report::Done, model.path, fmt::format("default opset raised from {} to {} for the blocked DequantizeLinear",
                                                     rule.opset, rule.raise_to));
  }
}

}  // namespace qconv
