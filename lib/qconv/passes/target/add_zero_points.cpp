// add-zero-points (--target whose runtime needs them: rknn): every QuantizeLinear and
// DequantizeLinear gets its zero point input.
//
// Before:  x -> QuantizeLinear(x, s) -> q           b_q -> DequantizeLinear(b_q, s) -> b
// After:   x -> QuantizeLinear(x, s, 0:T) -> q      b_q -> DequantizeLinear(b_q, s, 0:T) -> b
// Exact: an absent zero point is 0 by the operators' definition. T is the quantized type: a
// QuantizeLinear's output_dtype, else uint8 (its default); a DequantizeLinear's input's.
//
// A node gets one when:
//   1. the target's profile asks for explicit zero points;
//   2. it has no input 2, and its quantized type is known and an integer type (float8 and float4
//      zero points are left as they are: they have no other value than 0 and need no input; a
//      packed 4- or 2-bit one is refused, said, and left).
#include <fmt/format.h>

#include "qconv/ir/tensor.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

struct AddZeroPoints {
  struct Group {
    ir::Node* n;
    int32_t type;
    std::vector<int64_t> dims;  // a scalar, or the scale's shape (per axis, in blocks)
  };

  bool root(const ir::Node& n) const { return isQuantize(n) || isDequantize(n); }
  std::string declined(const ir::Node&) const { return "no zero point added"; }

  Match<Group> select(ir::Node& n) {
    using M = Match<Group>;
    if (n.input(2) || !n.input(1)) return M::none();
    const int32_t type = quantizedTypeOf(n);  // (2)
    if (!type || ir::isFloatQuantType(type)) return M::none();
    if (ir::packedBits(type)) return M::refuse(fmt::format("it is {}: qconv writes no packed zero point", ir::typeName(type)));
    std::vector<int64_t> dims;
    if (const ir::Value* s = n.input(1); s->isConstant()) dims = ir::dimsOf(*s->initializer());
    else if (n.attrInt("block_size", 0) || n.attribute("axis")) return M::refuse("its scale is not a constant");
    return Group{&n, type, dims};
  }

  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    size_t count = 1;
    for (int64_t d : g.dims) count *= static_cast<size_t>(d);
    ir::Value* zp = graph.addInitializer(g.n->input(1)->name() + "_zero_point",
                                         ir::makeIntTensor(g.type, g.dims, std::vector<int64_t>(count, 0)));
    graph.setInput(g.n, 2, zp);
    ctx.count("zero points made explicit");
  }
};

}  // namespace

void addZeroPoints(ir::Model& model, PassContext& ctx) {
  if (!ctx.options().target || ctx.target().explicit_zero_points.empty()) return;  // (1)
  AddZeroPoints rule;
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
