// fuse-gather-block-quantized (--format qop --contrib): a 4-bit embedding table in the standard
// form becomes onnxruntime's GatherBlockQuantized (lower-gather-block-quantized is the other way).
//
// Before:
//   W = DequantizeLinear(data, scales[, zero_points]; axis, block_size)
//   y = Gather(W, indices; axis 0)
// After:
//   y = com.microsoft::GatherBlockQuantized(data, indices, scales[, zero_points];
//                                           gather_axis 0, quantize_axis = axis, block_size)
// The tensors are taken as they are (the layouts are one). A group is fused when:
//   1. data is a constant int4 or uint4 tensor, scales a constant float or float16 tensor, and
//      zero points absent (int4 only: onnxruntime's default for uint4 is 8, not 0) or constant;
//   2. the DequantizeLinear is blocked along data's last axis with a power-of-two block_size of
//      16 or more, and the Gather gathers along axis 0 (what onnxruntime's kernel takes);
//   3. W's only readers are such Gathers reading it as their data, and W is no graph output.
#include <fmt/format.h>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/driver.h"

namespace qconv {

namespace {

using onnx::TensorProto;

struct FuseGatherBlockQuantized {
  struct Group {
    ir::Node* dq;
    ir::Node* gather;
  };

  bool root(const ir::Node& n) const { return n.is("Gather") && n.input(0) && dequantizeFeeding(n.input(0)); }
  std::string declined(const ir::Node&) const { return "not fused to GatherBlockQuantized"; }

  Match<Group> select(ir::Node& n) {
    using M = Match<Group>;
    ir::Node* dq = dequantizeFeeding(n.input(0));
    const int64_t block = dq->attrInt("block_size", 0);
    if (block == 0) return M::none();  // not blocked: not a weight-only table
    const ir::Value *data = dq->input(0), *scales = dq->input(1), *zp = dq->input(2);
    const int32_t t = data && data->isConstant() ? data->initializer()->data_type() : 0;
    if (t != TensorProto::INT4 && t != TensorProto::UINT4) return M::refuse("its table is not a constant int4 or uint4 tensor");  // (1)
    const int32_t st = scales && scales->isConstant() ? scales->initializer()->data_type() : 0;
    if (st != TensorProto::FLOAT && st != TensorProto::FLOAT16) return M::refuse("its scales are not a constant float or float16 tensor");
    if (zp && !zp->isConstant()) return M::refuse("its zero points are not constant");
    if (!zp && t == TensorProto::UINT4)
      return M::refuse("a uint4 table without zero points: GatherBlockQuantized's default zero point for uint4 is 8, not 0");
    const int64_t rank = data->initializer()->dims_size();
    int64_t axis = dq->attrInt("axis", 1);
    if (axis < 0) axis += rank;
    if (axis != rank - 1) return M::refuse(fmt::format("its table is blocked along axis {}, not its last", axis));  // (2)
    if (block < 16 || (block & (block - 1)) != 0)
      return M::refuse(fmt::format("block_size {} is not a power of two of 16 or more", block));
    const ir::Value* w = dq->output(0);
    if (w->isGraphOutput()) return M::refuse("the dequantized table is a graph output");  // (3)
    for (const auto& use : w->uses())
      if (!use.node->is("Gather") || use.index != 0 || use.node->attrInt("axis", 0) != 0)
        return M::refuse("the dequantized table is read by another op than a Gather along axis 0");
    return Group{dq, &n};
  }

  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    std::vector<ir::Value*> in{g.dq->input(0), g.gather->input(1), g.dq->input(1)};
    if (g.dq->input(2)) in.push_back(g.dq->input(2));
    ir::Node* fused = graph.createNode("GatherBlockQuantized", "com.microsoft", in, 1, g.gather);
    int64_t axis = g.dq->attrInt("axis", 1);
    if (axis < 0) axis += g.dq->input(0)->initializer()->dims_size();
    setIntAttribute(*fused, "gather_axis", 0);
    setIntAttribute(*fused, "quantize_axis", axis);
    setIntAttribute(*fused, "block_size", g.dq->attrInt("block_size", 0));
    ctx.count("Gather fused to GatherBlockQuantized");
    replaceNode(graph, *g.gather, fused);
  }
};

}  // namespace

void fuseGatherBlockQuantized(ir::Model& model, PassContext& ctx) {
  if (!ctx.options().contrib) return;
  FuseGatherBlockQuantized rule;
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
