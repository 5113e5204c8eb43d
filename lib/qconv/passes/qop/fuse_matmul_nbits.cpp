// fuse-matmul-nbits (--format qop --contrib): the standard weight-only form, a blocked
// DequantizeLinear of a constant 2-, 4- or 8-bit weight feeding a MatMul, becomes onnxruntime's
// MatMulNBits, its fastest kernel for it (common/nbits_layout.h; lower-matmul-nbits is the
// other direction).
//
// Before:
//   W = DequantizeLinear(x, scale[, zero]; axis 0, block_size)     x: [K, N] constant
//   y = MatMul(A, W)
// After:
//   y = com.microsoft::MatMulNBits(A, B, scales[, zero_points]; K, N, bits, block_size)
// No accuracy_level is written: onnxruntime's kernel then computes in A's float type, the
// same numbers as the DequantizeLinear and MatMul to float rounding (its accuracy_level 4
// would quantize A to int8). A group is fused when:
//   1. x is a constant (u)int2, (u)int4 or (u)int8 tensor of rank 2 (the bits onnxruntime's
//      CPU kernel takes);
//   2. the DequantizeLinear is blocked along axis 0 with a power-of-two block_size of 16 or
//      more (the kernel's rule), its scale a constant float or float16 [k_blocks, N] and its
//      zero point absent or a constant of x's type and the scale's shape;
//   3. W's only readers are MatMuls reading it as B, and W is not a graph output;
//   4. A's element type, when known, is the scale's (the kernel's T1 for both);
//   5. the storage of x, scale and zero point is one the repacking reads (ir::storageProblem):
//      raw_data, a file, or the typed field, int32_data packing two 4-bit or four 2-bit values
//      an entry.
#include <fmt/format.h>

#include <map>
#include <tuple>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/common/nbits_layout.h"
#include "qconv/passes/driver.h"

namespace qconv {

namespace {

using onnx::TensorProto;

struct FuseMatMulNBits {
  ir::ByteKeeper* keeper;  // where the repacked weights go (nbits::addMadeTensor)
  // The operands each (x, scale, zero point, shape) became: MatMuls reading one weight (tied
  // embedding and output weights) share one B, so the output is no bigger than the input.
  using Key = std::tuple<const ir::Value*, const ir::Value*, const ir::Value*, int64_t, int64_t>;
  std::map<Key, std::vector<ir::Value*>> repacked;
  struct Group {
    ir::Node* dq;
    ir::Node* matmul;
    int64_t bits, block, K, N;
    bool is_signed;
  };

  bool root(const ir::Node& n) const { return n.is("MatMul") && n.input(1) && dequantizeFeeding(n.input(1)); }
  std::string declined(const ir::Node&) const { return "not fused to MatMulNBits"; }

  Match<Group> select(ir::Node& n) {
    using M = Match<Group>;
    ir::Node* dq = dequantizeFeeding(n.input(1));
    const int64_t block = dq->attrInt("block_size", 0);
    if (block == 0) return M::none();  // per tensor or per axis: fuse-qlinear-matmul's business
    const ir::Value *x = dq->input(0), *scale = dq->input(1), *zero = dq->input(2);
    if (!x || !x->isConstant() || x->initializer()->dims_size() != 2) return M::refuse("its weight is not a constant of rank 2");  // (1)
    const int32_t t = x->initializer()->data_type();
    const int64_t bits = t == TensorProto::INT8 || t == TensorProto::UINT8 ? 8 : ir::packedBits(t);
    if (!bits)
      return M::refuse(fmt::format("its weight is {}: MatMulNBits takes 2-, 4- and 8-bit integers", ir::typeName(t)));
    const int64_t K = x->initializer()->dims(0), N = x->initializer()->dims(1);
    const int64_t axis = dq->attrInt("axis", 1);
    if (axis != 0 && axis != -2) return M::refuse(fmt::format("its weight is blocked along axis {}, not K (0)", axis));  // (2)
    if (block < 16 || (block & (block - 1)) != 0)
      return M::refuse(fmt::format("block_size {} is not a power of two of 16 or more, as MatMulNBits needs", block));
    const int64_t blocks = (K + block - 1) / block;
    const int32_t st = scale && scale->isConstant() ? scale->initializer()->data_type() : 0;
    if (st != TensorProto::FLOAT && st != TensorProto::FLOAT16) return M::refuse("its scale is not a constant float or float16");
    if (ir::dimsOf(*scale->initializer()) != std::vector<int64_t>{blocks, N})
      return M::refuse(fmt::format("its scale's shape is not [k_blocks, N] = [{}, {}]", blocks, N));
    if (zero && (!zero->isConstant() || zero->initializer()->data_type() != t ||
                 ir::dimsOf(*zero->initializer()) != std::vector<int64_t>{blocks, N}))
      return M::refuse("its zero point is not a constant of the weight's type and the scale's shape");
    for (const ir::Value* c : {x, scale, zero})  // (5)
      if (c)
        if (std::string why = ir::storageProblem(*c); !why.empty()) return M::refuse(fmt::format("'{}' cannot be read: {}", c->name(), why));
    const ir::Value* w = dq->output(0);
    if (w->isGraphOutput()) return M::refuse("the dequantized weight is a graph output");  // (3)
    for (const auto& use : w->uses())
      if (!use.node->is("MatMul") || use.index != 1) return M::refuse("the dequantized weight is also read by another op");
    if (const int32_t a = n.input(0)->elemType(); a && a != st)  // (4)
      return M::refuse(fmt::format("A is {}, its scale {}: MatMulNBits takes one type for both", ir::typeName(a), ir::typeName(st)));
    return Group{dq, &n, bits, block, K, N, t == TensorProto::INT2 || t == TensorProto::INT4 || t == TensorProto::INT8};
  }

  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    std::vector<ir::Value*>& made = repacked[Key{g.dq->input(0), g.dq->input(1), g.dq->input(2), g.bits, g.block}];
    if (made.empty()) made = repack(graph, g);
    std::vector<ir::Value*> in{g.matmul->input(0)};
    in.insert(in.end(), made.begin(), made.end());
    ir::Node* fused = graph.createNode("MatMulNBits", "com.microsoft", in, 1, g.matmul);
    setIntAttribute(*fused, "K", g.K);
    setIntAttribute(*fused, "N", g.N);
    setIntAttribute(*fused, "bits", g.bits);
    setIntAttribute(*fused, "block_size", g.block);
    ctx.count("MatMul fused to MatMulNBits");
    replaceNode(graph, *g.matmul, fused);
  }

  /// MatMulNBits' B, scales and (when it needs them) zero points for the group's weight.
  std::vector<ir::Value*> repack(ir::Graph& graph, const Group& g) {
    const uint64_t K = static_cast<uint64_t>(g.K), N = static_cast<uint64_t>(g.N), block = static_cast<uint64_t>(g.block);
    const uint64_t blocks = (K + block - 1) / block, bits = static_cast<uint64_t>(g.bits);
    const unsigned offset = g.is_signed ? 1u << (g.bits - 1) : 0u;  // signed: stored as q + 2^(bits-1)
    const ir::Value *x = g.dq->input(0), *scale = g.dq->input(1), *zero = g.dq->input(2);
    std::string why;
    // B[n, b, j]: row n holds column n of x, K elements padded with zeros to k_blocks *
    // block_size (the kernel reads K of them; onnxruntime's quantizer pads so)
    const uint64_t padded = blocks * block;
    const bool whole_bytes = g.bits == 4 && K % 2 == 0 && N % 2 == 0;  // the fast path: whole bytes, in tiles
    auto bt = std::make_unique<TensorProto>();
    bt->set_data_type(TensorProto::UINT8);
    for (int64_t d : {g.N, static_cast<int64_t>(blocks), g.block * g.bits / 8}) bt->add_dims(d);
    std::vector<ir::Value*> in;
    if (whole_bytes) {  // it writes every byte of a row but the padding; in pieces past nbits::kWholeBytes
      in.push_back(nbits::transposedTensor(graph, keeper, x->name() + "_nbits", std::move(bt), *x, N / 2, K, N, padded / 2, 4,
                                           offset, &why));
      QCONV_ASSERT(in.back(), "fuse-matmul-nbits: {}", why);
    } else {
      std::string b = nbits::buffer(keeper, (N * padded * bits + 7) / 8, true);
      std::string xb = nbits::rawBytes(*x, &why, keeper);
      QCONV_ASSERT(why.empty(), "fuse-matmul-nbits: {}", why);
      for (uint64_t col = 0; col < N; ++col)
        for (uint64_t k = 0; k < K; ++k)  // a signed q is stored as q + 2^(bits-1): its bits plus the offset, mod 2^bits
          nbits::pack(b, col * padded + k, g.bits, (nbits::unpack(xb, k * N + col, g.bits) + offset) & ((1u << g.bits) - 1));
      nbits::recycle(keeper, std::move(xb));
      in.push_back(nbits::addMadeTensor(graph, keeper, x->name() + "_nbits", std::move(bt), std::move(b)));
    }
    // scales[n, b] = scale[b, n]
    const size_t w = ir::byteWidth(scale->initializer()->data_type());
    auto scales = std::make_unique<TensorProto>();
    scales->set_data_type(scale->initializer()->data_type());
    scales->add_dims(g.N);
    scales->add_dims(static_cast<int64_t>(blocks));
    in.push_back(nbits::transposedTensor(graph, keeper, scale->name() + "_nbits", std::move(scales), *scale, N * w, blocks, N,
                                         blocks * w, static_cast<int>(8 * w), 0, &why));
    QCONV_ASSERT(in.back(), "fuse-matmul-nbits: {}", why);
    if (zero || !g.is_signed) {  // the default zero point is 2^(bits-1): a signed weight at 0
      const uint64_t row = (blocks * bits + 7) / 8, slots = row * (8 / bits);
      auto zt = std::make_unique<TensorProto>();
      zt->set_data_type(TensorProto::UINT8);
      zt->add_dims(g.N);
      zt->add_dims(static_cast<int64_t>(row));
      const std::string hint = x->name() + "_nbits_zero_points";
      if (zero && g.bits == 4 && blocks % 2 == 0 && N % 2 == 0) {  // no slot past k_blocks: in tiles, in pieces past kWholeBytes
        in.push_back(nbits::transposedTensor(graph, keeper, hint, std::move(zt), *zero, N / 2, blocks, N, row, 4, offset, &why));
        QCONV_ASSERT(in.back(), "fuse-matmul-nbits: {}", why);
      } else {
        // zero[b, n] as stored in MatMulNBits (unsigned): x's type's bits plus the offset
        const std::string zb = zero ? nbits::rawBytes(*zero, &why) : std::string();
        QCONV_ASSERT(why.empty(), "fuse-matmul-nbits: {}", why);
        auto zeroAt = [&](uint64_t blk, uint64_t col) -> unsigned {
          return ((zero ? nbits::unpack(zb, blk * N + col, g.bits) : 0u) + offset) & ((1u << g.bits) - 1);
        };
        // a row's slots past k_blocks hold the default, 2^(bits-1), as onnxruntime's quantizer writes them
        std::string zp(N * row, '\0');
        for (uint64_t col = 0; col < N; ++col)
          for (uint64_t slot = 0; slot < slots; ++slot)
            nbits::pack(zp, col * slots + slot, g.bits, slot < blocks ? zeroAt(slot, col) : 1u << (g.bits - 1));
        in.push_back(nbits::addMadeTensor(graph, keeper, hint, std::move(zt), std::move(zp)));
      }
    }
    return in;
  }
};

}  // namespace

void fuseMatMulNBits(ir::Model& model, PassContext& ctx) {
  if (!ctx.options().contrib) return;
  FuseMatMulNBits rule{model.byte_keeper.get(), {}};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
