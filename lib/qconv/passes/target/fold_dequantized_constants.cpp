// fold-dequantized-constants (--target tensorrt, openvino, aidge, qnn): a constant the target
// cannot dequantize (an int32 bias; an 8-bit constant at a zero point other than 0, such as a bias
// an Add reads; one an op of the profile's float_readers reads: OpenVINO's Add, Aidge's and QNN's
// LayerNormalization) becomes the float constant it stands for.
//
// Before:  c_q (int32, or int8/uint8 at zero point z != 0) -> DequantizeLinear(s, z[, axis]) -> c -> op
// After:   c (float constant, c[i] = float(c_q[i] - z[k]) * s[k], in float32 as the op computes)
// Exact: the constant holds the very floats the DequantizeLinear computes. The op then reads a
// float constant, which the target takes (it quantizes float weights itself, or runs the op in
// float): the numbers are the model's either way.
//
// A DequantizeLinear is folded when:
//   1. its input is a constant initializer the target's profile rules out dequantizing:
//      int32 (int32_dequantize), a zero point other than 0 (nonzero_zero_point), or one an op of
//      float_readers reads;
//   2. its scale (float) and zero point are constants;
//   3. its output is not a graph output (its readers take the constant instead).
#include <fmt/format.h>

#include <algorithm>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/dequantized_constant.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

struct FoldDequantizedConstants {
  struct Group {
    ir::Node* dq;
    DequantizedConstant k;
  };

  const TargetProfile& target;

  bool root(const ir::Node& n) const { return isDequantize(n) && n.input(0) && n.input(0)->isConstant(); }
  std::string declined(const ir::Node&) const { return "its constant not folded to float"; }

  Match<Group> select(ir::Node& dq) {
    std::string why;
    auto p = readConstQuant(dq, &why);  // (2)
    const bool int32 = dq.input(0)->initializer()->data_type() == onnx::TensorProto::INT32;
    const bool nonzero = p && std::any_of(p->zero_point.begin(), p->zero_point.end(), [](int64_t z) { return z != 0; });
    const bool read_in_float = std::any_of(dq.output(0)->uses().begin(), dq.output(0)->uses().end(), [&](const ir::Use& u) {
      return std::any_of(target.float_readers.begin(), target.float_readers.end(),
                         [&](const FloatReader& r) { return u.node->opType() == r.op; });
    });
    if (!(int32 && !target.int32_dequantize.allowed) && !(nonzero && !target.nonzero_zero_point.allowed) && !read_in_float)
      return Match<Group>::none();  // (1)
    if (!p) return Match<Group>::refuse(why);
    if (dq.output(0)->isGraphOutput()) return Match<Group>::refuse("its output is a graph output");  // (3)
    auto k = readDequantizedConstant(dq, &why);
    if (!k) return Match<Group>::refuse(why);
    return Group{&dq, std::move(*k)};
  }

  /// The DQ's readers <- a float initializer of b_q's dims: (b_q - zp[c]) * s[c].
  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    const ConstQuant& p = g.k.params;
    std::vector<float> b(g.k.q.size());
    forEachElement(g.k, [&](size_t i, size_t c) { b[i] = static_cast<float>(g.k.q[i] - p.zero_point[c]) * p.scale[c]; });
    ir::Value* out = g.dq->output(0);
    ir::Value* folded = graph.addInitializer(out->name(), ir::makeFloatTensor(g.k.dims, b));
    graph.replaceAllUsesWith(out, folded);
    std::vector<ir::Value*> inputs = g.dq->inputs();
    graph.destroyNode(g.dq);
    for (ir::Value* v : inputs)
      if (v) graph.pruneIfDead(v);
    ctx.count("dequantized constants given in float");
  }
};

}  // namespace

void foldDequantizedConstants(ir::Model& model, PassContext& ctx) {
  const TargetProfile& t = ctx.target();
  if (t.int32_dequantize.allowed && t.nonzero_zero_point.allowed && t.float_readers.empty()) return;  // (1)
  FoldDequantizedConstants rule{t};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
