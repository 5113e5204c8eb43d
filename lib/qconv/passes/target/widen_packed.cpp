// widen-packed (for a target without 4- or 2-bit tensors: rknn): a constant weight stored in
// int4/uint4 (or int2/uint2) behind a DequantizeLinear is stored in int8/uint8, value for value.
//
// Before:  w (int4 [N, K]) -> DequantizeLinear(w, s, [z: int4]) -> wd
// After:   w (int8 [N, K]) -> DequantizeLinear(w, s, z: int8) -> wd
// Exact: every 4-bit (2-bit) integer is an 8-bit one of the same signedness, and the zero point
// moves with it (0 where it was absent), so the DequantizeLinear computes the same floats.
//
// A node is widened when:
//   1. a target is given that takes the 8-bit type but not the packed one (TargetProfile::
//      quant_types);
//   2. it is a DequantizeLinear, not in blocks (requantize-blocked's), of a constant of a packed
//      integer type, with a constant scale and zero point.
// A packed tensor computed at run time (a QuantizeLinear to int4) is not widened: its range is
// its type's, and int8 would clip elsewhere. check-target refuses it, with the target's reason.
#include <fmt/format.h>

#include "qconv/ir/tensor.h"
#include "qconv/passes/driver.h"
#include "qconv/passes/target/qdq_values.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

/// The 8-bit type a packed integer type widens to, or 0.
int32_t wider(int32_t type) {
  switch (type) {
    case onnx::TensorProto::INT4:
    case onnx::TensorProto::INT2:
      return onnx::TensorProto::INT8;
    case onnx::TensorProto::UINT4:
    case onnx::TensorProto::UINT2:
      return onnx::TensorProto::UINT8;
    default:
      return 0;
  }
}

struct Packed {
  ir::Node* n;
  QdqValues v;
};

struct WidenPacked {
  using Group = Packed;
  const TargetProfile& t;

  bool root(const ir::Node& n) const { return isDequantize(n); }
  std::string declined(const ir::Node&) const { return "not widened to 8 bits"; }

  Match<Group> select(ir::Node& n) {
    using M = Match<Group>;
    const int32_t type = quantizedTypeOf(n);
    if (!wider(type) || takesType(t, type) || !takesType(t, wider(type))) return M::none();  // (1)
    if (n.attrInt("block_size", 0)) return M::none();  // (2) requantize-blocked's
    if (!n.input(0) || !n.input(0)->isConstant()) return M::refuse("its input is computed at run time, not a constant");
    std::string why;
    auto v = readQdqValues(n, &why);
    if (!v) return M::refuse(why);
    return Packed{&n, std::move(*v)};
  }

  /// Input 0 <- the same integers in the 8-bit type; 2 <- the zero point in it.
  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Node& n = *g.n;
    const int32_t from = quantizedTypeOf(n), to = wider(from);
    std::vector<ir::Value*> old = n.inputs();
    graph.setInput(&n, 0, graph.addInitializer(old[0]->name() + "_8bit", ir::makeIntTensor(to, g.v.dims, g.v.q)));
    graph.setInput(&n, 2, graph.addInitializer(old[1]->name() + "_8bit_zero_point",
                                               ir::makeIntTensor(to, g.v.scale_dims, g.v.zero_point)));
    for (ir::Value* v : old)
      if (v) graph.pruneIfDead(v);
    ctx.report(Report::Done, n,
               fmt::format("{} weight stored as {}, value for value, for --target {}", ir::typeName(from), ir::typeName(to),
                           t.name));
    ctx.count(fmt::format("{} weights stored as {}", ir::typeName(from), ir::typeName(to)));
  }
};

}  // namespace

void widenPacked(ir::Model& model, PassContext& ctx) {
  if (!ctx.options().target) return;  // (1)
  WidenPacked rule{ctx.target()};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
