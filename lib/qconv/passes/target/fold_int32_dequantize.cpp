// fold-int32-dequantize (--target tensorrt): a bias dequantized from int32 becomes the float
// constant it stands for, since the target dequantizes 8-bit (and narrower) tensors only.
//
// Before:  b_q (int32 constant) -> DequantizeLinear(s, zp[, axis]) -> b -> Conv / Gemm / Add ...
// After:   b (float constant, b[i] = float(b_q[i] - zp[c]) * s[c], in float32 as the op computes)
// Exact: the constant holds the very floats the DequantizeLinear computes.
//
// A DequantizeLinear is folded when:
//   1. the target's profile rules out int32 DequantizeLinear (int32_dequantize);
//   2. its input is a constant int32 initializer and its scale (float) and zero point constants;
//   3. its output is not a graph output (its readers take the constant instead).
#include <fmt/format.h>

#include "qconv/ir/tensor.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

struct FoldInt32Dequantize {
  struct Group {
    ir::Node* dq;
    ConstQuant params;
    std::vector<int64_t> q;
    std::vector<int64_t> dims;
  };

  bool root(const ir::Node& n) const {
    return isDequantize(n) && n.input(0) && n.input(0)->isConstant() &&
           n.input(0)->initializer()->data_type() == onnx::TensorProto::INT32;
  }
  std::string declined(const ir::Node&) const { return "int32 DequantizeLinear not folded"; }

  Match<Group> select(ir::Node& dq) {
    std::string why;
    auto p = readConstQuant(dq, &why);  // (2)
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
    ctx.count("int32 biases given in float");
  }
};

}  // namespace

void foldInt32Dequantize(ir::Model& model, PassContext& ctx) {
  if (ctx.target().int32_dequantize.allowed) return;  // (1)
  FoldInt32Dequantize rule;
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
