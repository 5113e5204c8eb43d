// lower-gather-block-quantized (--format qdq): onnxruntime's GatherBlockQuantized (a 4-bit
// embedding table, written by its weight-only quantizer for Gather) becomes its standard form.
//
// Before:
//   y = com.microsoft::GatherBlockQuantized(data, indices, scales[, zero_points];
//                                           gather_axis, quantize_axis, block_size)
// After:
//   W = DequantizeLinear(data, scales[, zero_points]; axis = quantize_axis, block_size)
//   y = Gather(W, indices; axis = gather_axis)
// data, scales and zero points are already in the standard layout (int4/uint4 data of the
// table's shape, scales of its shape with ceil(D / block_size) along quantize_axis): they are
// taken as they are, and the numbers are the same (dequantizing then gathering equals gathering
// then dequantizing). A node is lowered when:
//   0. it is what GatherBlockQuantized's definition demands (common/contrib_defs.h: block_size,
//      the axes onnxruntime's kernel runs, scales and zero points of the shape the table and
//      block_size give): else it stays, with a warning;
//   1. data is a constant int4 or uint4 tensor (its `bits` 4); scales a constant float tensor;
//      zero points absent (int4: 0; uint4: 8, onnxruntime's defaults, written out) or of data's type;
//   2. the model's default opset can be raised to 21 (common/opset_history.h).
#include <fmt/format.h>

#include <optional>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/common/contrib_defs.h"
#include "qconv/passes/common/opset_history.h"
#include "qconv/passes/driver.h"

namespace qconv {

namespace {

using onnx::TensorProto;

struct LowerGatherBlockQuantized {
  struct Group {
    ir::Node* node;
  };
  ir::Model& model;
  int64_t opset;
  std::optional<std::string> blocker;  // why the opset cannot be raised to 21 ("" when it can), once asked
  bool raised = false;

  bool root(const ir::Node& n) const { return n.domain() == "com.microsoft" && n.opIs("GatherBlockQuantized"); }
  std::string declined(const ir::Node&) const { return "stays com.microsoft::GatherBlockQuantized"; }

  Match<Group> select(ir::Node& n) {
    using M = Match<Group>;
    // (0) what the op's definition demands (common/contrib_defs.h): a malformed node stays, said at
    // the default level, never lowered into standard ops that would be invalid in their turn
    if (std::string why = gatherBlockQuantizedProblem(n); !why.empty()) return M::refuse(why, Report::Warning);
    const ir::Value *data = n.input(0), *scales = n.input(2), *zp = n.input(3);
    const int32_t t = data && data->isConstant() ? data->initializer()->data_type() : 0;
    if (t != TensorProto::INT4 && t != TensorProto::UINT4)  // (1)
      return M::refuse("its data is not a constant int4 or uint4 tensor (packed uint8 data has no standard layout)");
    if (n.attrInt("bits", 4) != 4) return M::refuse(fmt::format("bits {} where its data is 4-bit", n.attrInt("bits", 4)));
    if (!scales || !scales->isConstant()) return M::refuse("its scales are not constant");
    if (zp && (!zp->isConstant() || zp->initializer()->data_type() != t))
      return M::refuse("its zero points are not a constant of its data's type");
    if (n.attrInt("block_size", 0) <= 0) return M::refuse("block_size is not positive");
    if (!blocker) blocker = opsetRaiseBlocker(model, opset, 21);  // (2): a walk of the graph, only where there is a node
    if (!blocker->empty()) return M::refuse(fmt::format("its standard form needs opset 21, and {}", *blocker));
    return Group{&n};
  }

  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Node& n = *g.node;
    const ir::Value* data = n.input(0);
    std::vector<ir::Value*> dq_in{n.input(0), n.input(2)};
    if (n.input(3)) {
      dq_in.push_back(n.input(3));
    } else if (data->initializer()->data_type() == TensorProto::UINT4) {  // onnxruntime's default: 8
      const std::vector<int64_t> dims = ir::dimsOf(*n.input(2)->initializer());
      const int64_t count = ir::numElements(*n.input(2)->initializer()).value_or(0);
      dq_in.push_back(graph.addInitializer(data->name() + "_zero_points",
                                           ir::makeIntTensor(TensorProto::UINT4, dims, std::vector<int64_t>(static_cast<size_t>(count), 8))));
    }
    ir::Node* dq = graph.createNode("DequantizeLinear", "", dq_in, 1, &n);
    setIntAttribute(*dq, "axis", n.attrInt("quantize_axis", 1));
    setIntAttribute(*dq, "block_size", n.attrInt("block_size", 0));
    dq->output(0)->setElemType(n.input(2)->initializer()->data_type());
    ir::Node* gather = graph.createNode("Gather", "", {dq->output(0), n.input(1)}, 1, &n);
    setIntAttribute(*gather, "axis", n.attrInt("gather_axis", 0));
    ctx.count("GatherBlockQuantized lowered to DequantizeLinear(block_size) -> Gather");
    raised = true;
    replaceNode(graph, n, gather);
  }
};

}  // namespace

void lowerGatherBlockQuantized(ir::Model& model, PassContext& ctx) {
  const int64_t opset = ir::defaultOpset(model);
  LowerGatherBlockQuantized rule{model, opset, std::nullopt};
  applyRule(model.graph, ctx, rule);
  if (rule.raised && opset < 21) {
    declareOpset(model, 21);
    ctx.report(Report::Done, model.path, fmt::format("default opset raised from {} to 21 for the blocked DequantizeLinear", opset));
  }
}

}  // namespace qconv
