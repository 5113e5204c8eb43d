// fold-dequantized-constants (--target tensorrt): a constant the target cannot dequantize (an
// int32 bias; an 8-bit constant at a zero point other than 0, such as a bias an Add reads)
// becomes the float constant it stands for.
//
// Before:  c_q (int32, or int8/uint8 at zero point z != 0) -> DequantizeLinear(s, z[, axis]) -> c -> op
// After:   c (float constant, c[i] = float(c_q[i] - z[k]) * s[k], in float32 as the op computes)
// Exact: the constant holds the very floats the DequantizeLinear computes. The op then reads a
// float constant, which the target takes (it quantizes float weights itself, or runs the op in
// float): the numbers are the model's either way.
//
// A DequantizeLinear is folded when:
//   1. its input is a constant initializer the target's profile rules out dequantizing:
//      int32 (int32_dequantize), or a zero point other than 0 (nonzero_zero_point);
//   2. its scale (float) and zero point are constants;
//   3. its output is not a graph output (its readers take the constant instead).
#include <fmt/format.h>

#include <algorithm>

#include "qconv/ir/tensor.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

struct FoldDequantizedConstants {
  struct Group {
    ir::Node* dq;
    ConstQuant params;
    std::vector<int64_t> q;
    std::vector<int64_t> dims;
  };

  const TargetProfile& target;

  bool root(const ir::Node& n) const { return isDequantize(n) && n.input(0) && n.input(0)->isConstant(); }
  std::string declined(const ir::Node&) const { return "its constant not folded to float"; }

  Match<Group> select(ir::Node& dq) {
    std::string why;
    auto p = readConstQuant(dq, &why);  // (2)
    const bool int32 = dq.input(0)->initializer()->data_type() == onnx::TensorProto::INT32;
    const bool nonzero = p && std::any_of(p->zero_point.begin(), p->zero_point.end(), [](int64_t z) { return z != 0; });
    if (!(int32 && !target.int32_dequantize.allowed) && !(nonzero && !target.nonzero_zero_point.allowed))
      return Match<Group>::none();  // (1)
    if (!p) return Match<Group>::refuse(why);
    if (p->scale_type != onnx::TensorProto::FLOAT) return Match<Group>::refuse("its scale is not float");
    if (dq.output(0)->isGraphOutput()) return Match<Group>::refuse("its output is a graph output");  // (3)
    auto q = ir::readInts(*dq.input(0), &why);
    if (!q) return Match<Group>::refuse(why);
    std::vector<int64_t> dims = ir::dimsOf(*dq.input(0)->initializer());
    if (p->per_axis) {
      const int64_t rank = static_cast<int64_t>(dims.size());
      const int64_t axis = p->axis < 0 ? p->axis + rank : p->axis;
      if (axis < 0 || axis >= rank || dims[static_cast<size_t>(axis)] != static_cast<int64_t>(p->size()))
        return Match<Group>::refuse("its scale does not match its axis");
      p->axis = axis;
    }
    return Group{&dq, std::move(*p), std::move(*q), std::move(dims)};
  }

  /// The DQ's readers <- a float initializer of b_q's dims: (b_q - zp[c]) * s[c].
  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    int64_t inner = 1;
    if (g.params.per_axis)
      for (size_t d = static_cast<size_t>(g.params.axis) + 1; d < g.dims.size(); ++d) inner *= g.dims[d];
    std::vector<float> b(g.q.size());
    for (size_t i = 0; i < b.size(); ++i) {
      const size_t c = g.params.per_axis ? static_cast<size_t>((static_cast<int64_t>(i) / inner) % static_cast<int64_t>(g.params.size())) : 0;
      b[i] = static_cast<float>(g.q[i] - g.params.zero_point[c]) * g.params.scale[c];
    }
    ir::Value* out = g.dq->output(0);
    ir::Value* folded = graph.addInitializer(out->name(), ir::makeFloatTensor(g.dims, b));
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
  if (t.int32_dequantize.allowed && t.nonzero_zero_point.allowed) return;  // (1)
  FoldDequantizedConstants rule{t};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
