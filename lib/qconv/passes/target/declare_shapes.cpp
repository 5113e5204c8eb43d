// declare-shapes (--target whose importer needs them: iree): a Reshape's output to a computed
// shape, its shape undeclared, that a QuantizeLinear or DequantizeLinear reads is declared with
// the shape of the other side.
//
// Before:  Reshape(x, computed shape) -> t (undeclared) -> QuantizeLinear -> t_q -> DequantizeLinear -> y [16, 1, 8210]
//          Reshape(x_q, computed shape) -> t_q (undeclared) -> DequantizeLinear -> y [16, 1, 8210]
// After:   the same nodes; value_info declares t: float [16, 1, 8210] (t_q: its 8-bit type)
// Exact: QuantizeLinear and DequantizeLinear keep their input's shape, so t has y's shape; a
// declaration computes nothing. (IREE's importer takes a Reshape to a computed shape, left
// undeclared where quantize_static renamed the tensor, as rank 0, and its compiler fails at the
// DequantizeLinear after it: "operand and result must have the same size and dtype".)
//
// A value is declared when:
//   1. the target's profile asks for it (declare_shapes);
//   2. a Reshape computes it from a shape that is not a constant, and the model declares no
//      shape for it (an entry with its type alone is given the shape);
//   3. its element type is known (declared or inferred: ElementTypes), and a QuantizeLinear
//      reading it has its output, or a DequantizeLinear of that, declared with a shape, or a
//      DequantizeLinear reading it has its output so declared (the first such).
#include <memory>

#include "qconv/passes/common/undeclared_shape.h"

#include "qconv/passes/common/element_types.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

struct DeclareShapes {
  struct Group {
    ir::Value* x;
    int32_t type;
    const onnx::TensorShapeProto* shape;
  };

  const ElementTypes& types;

  bool root(const ir::Node& n) const { return n.is("Reshape"); }
  std::string declined(const ir::Node&) const { return "its input's shape not declared"; }

  Match<Group> select(ir::Node& reshape) {
    const onnx::TensorShapeProto* shape = shapeToDeclare(reshape);
    const int32_t type = shape ? types.of(reshape.output(0)) : 0;
    if (!type) return Match<Group>::none();  // (3)
    return Group{reshape.output(0), type, shape};
  }

  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    auto info = std::make_unique<onnx::ValueInfoProto>();
    auto* tensor = info->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(g.type);
    *tensor->mutable_shape() = *g.shape;
    graph.declareInfo(g.x, std::move(info));  // an entry without a shape: replaced
    ctx.count("shapes declared");
  }
};

}  // namespace

void declareShapes(ir::Model& model, PassContext& ctx) {
  if (!ctx.options().target || ctx.target().declare_shapes.empty()) return;  // (1)
  const ElementTypes types(model.graph, ir::defaultOpset(model));
  DeclareShapes rule{types};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
