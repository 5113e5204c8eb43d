// fuse-qlinear-conv: a quantized Conv in QDQ form becomes one QLinearConv.
//
// Before:
//   x_q -> DQ(s_x, z_x) --+
//   w_q -> DQ(s_w, z_w) ----> Conv -> [Relu | Clip] -> Q(s_y, z_y) -> y_q
//   bias (float, or DQ(int32)) -/
// After:
//   QLinearConv(x_q, s_x, z_x, w_q, s_w, z_w, s_y, z_y, bias) -> y_q
//   (bias is still float here; fix-bias-scale makes it int32 at s_x * s_w[c] right after)
//
// The group is fused when all of these hold (select_conv.cpp); otherwise it stays in QDQ
// form, still correct, and the refusal names the node and the failed requirement:
//   1. the target is a default-domain Conv with x, w and an optional bias;
//   2. x comes from a DequantizeLinear with constant per-tensor int8/uint8 parameters;
//   3. w comes from a DequantizeLinear of a constant int8/uint8 initializer, per tensor or
//      per output channel (axis 0, one scale per channel);
//   4. x int8 needs w int8 (onnxruntime's kernels: u8*u8, u8*s8, s8*s8);
//   5. the bias, if any, is a constant float [M], or a DequantizeLinear of a constant int32 [M]
//      with zero point 0;
//   6. the Conv output has one reader and is not a graph output or read by a subgraph;
//   7. that reader is a QuantizeLinear with constant per-tensor int8/uint8 parameters, or a
//      Relu/Clip (constant bounds, one reader that is such a Q);
//   8. a Relu/Clip is absorbed only when the Q makes it redundant: Q(lo) == qmin and
//      Q(hi) == qmax, so the fused op computes exactly what the unfused one did;
//   9. y has x's type (onnxruntime has no QLinearConv kernel for int8 x with uint8 y, or the
//      reverse, though the spec allows it).
// Group, dilations, pads, strides, auto_pad and kernel_shape carry over with the name.
// DequantizeLinear nodes that others still read stay (a shared DQ is handled per consumer).
#include "qconv/passes/action_util.h"
#include "qconv/passes/conv_group.h"
#include "qconv/pipeline/pass.h"

namespace qconv {

namespace {

/// The rewrite. Operand layout of the new node, one line per input:
///   0 x             <- DQ(x).input 0
///   1 x_scale       <- DQ(x).input 1
///   2 x_zero_point  <- DQ(x).input 2, or a new 0 of x's type
///   3 w             <- DQ(w).input 0
///   4 w_scale       <- DQ(w).input 1
///   5 w_zero_point  <- DQ(w).input 2, or a new 0 of w's type
///   6 y_scale       <- Q.input 1
///   7 y_zero_point  <- Q.input 2, or a new 0 of y's type
///   8 B             <- Conv.input 2 (optional)
///   output 0        <- Q.output 0 (keeps its name and readers)
void fuseConv(ir::Graph& graph, const ConvGroup& g) {
  ir::Node* dqx = g.x.dq;
  ir::Node* dqw = g.w.dq;
  ir::Node* q = g.y.q;
  std::vector<ir::Value*> in = {
      dqx->input(0),
      dqx->input(1),
      zeroPointOr(graph, dqx->input(2), g.x.params.elem_type, "x_zero_point"),
      dqw->input(0),
      dqw->input(1),
      zeroPointOr(graph, dqw->input(2), g.w.params.elem_type, "w_zero_point"),
      q->input(1),
      zeroPointOr(graph, q->input(2), g.y.params.elem_type, "y_zero_point"),
  };
  if (g.bias) in.push_back(g.bias);
  ir::Node* fused = graph.createNode("QLinearConv", "", in, 1, q);
  inheritAttributes(*fused, *g.conv);

  ir::Value* y = q->output(0);
  graph.takeOutput(fused, 0, y);
  graph.destroyNode(q);
  if (g.y.activation) graph.destroyNode(g.y.activation);
  ir::Value* xd = dqx->output(0);
  ir::Value* wd = dqw->output(0);
  graph.destroyNode(g.conv);
  graph.pruneIfDead(xd);
  graph.pruneIfDead(wd);
}

}  // namespace

void fuseQLinearConv(ir::Model& model, PassContext& ctx) {
  selectAndRewrite(model.graph, ctx, "Conv", "QLinearConv", selectConvGroup, fuseConv);
}

}  // namespace qconv
