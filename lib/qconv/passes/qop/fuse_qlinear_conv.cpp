// fuse-qlinear-conv: a quantized Conv in QDQ form becomes one QLinearConv with its int32 bias.
//
// Before:
//   x_q -> DQ(s_x, z_x) --+
//   w_q -> DQ(s_w, z_w) ----> Conv -> [Relu | Clip] -> Q(s_y, z_y) -> y_q
//   bias (float, or DQ(int32)) -/
// After:
//   QLinearConv(x_q, s_x, z_x, w_q, s_w, z_w, s_y, z_y, B') -> y_q
//   B' int32 [M] at scale s_x * s_w[c], zero point 0 (conv_bias.h): valid the moment it exists.
//
// The group is fused when all of these hold (select_conv.cpp, conv_bias.cpp); otherwise it
// stays in QDQ form, still correct, and the refusal names the node and the failed requirement:
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
//      reverse, though the spec allows it), or every reader of y is a per-tensor
//      DequantizeLinear: then y is stored in x's type, its zero point and its readers' moved by
//      128 (the same tensor: q - z is unchanged), and fuses; or, preferred, x comes from a
//      QuantizeLinear that only per-tensor DequantizeLinears read, and x moves to y's type
//      instead (the op after this conv then keeps the type it reads);
//  10. the target (--target) runs a QLinearConv with per-channel weights, if they are
//      (common/target_fit.h);
//  11. the bias is finite and fits int32 at s_x * s_w[c] (with --raise-weight-scale: the weight
//      scales of the channels where it does not are raised, each listed as an approximation).
// Group, dilations, pads, strides, auto_pad and kernel_shape carry over with the name.
// float16 scales (and a bias DQ's) are read widened to float, exactly, and written as float:
// QLinearConv takes float scales only. The QDQ form computes in float16, so a value may round
// the other way where float16's precision (2^-11) cannot tell it from a tie: inside the one
// step a QOp output promises. bfloat16 scales are refused: 8 bits round off near ties too.
// DequantizeLinear nodes that others still read stay (a shared DQ is handled per consumer).
#include <fmt/format.h>

#include "qconv/diag.h"
#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/qop/conv_bias.h"
#include "qconv/passes/common/conv_group.h"
#include "qconv/passes/common/target_fit.h"
#include "qconv/passes/driver.h"

namespace qconv {

namespace {

enum { kX, kW, kY };  // the sources: DQ(x), DQ(w), Q(y)
const OperandRow kOperands[] = {
    {"x", kX, 0, false},           {"x_scale", kX, 1, false}, {"x_zero_point", kX, 2, true},
    {"w", kW, 0, false},           {"w_scale", kW, 1, false}, {"w_zero_point", kW, 2, true},
    {"y_scale", kY, 1, false},     {"y_zero_point", kY, 2, true},
};

struct FuseConv {
  struct Group {
    ConvGroup conv;
    std::optional<BiasPlan> bias;
  };
  const PassContext& ctx;

  bool root(const ir::Node& n) const { return n.is("Conv"); }
  std::string declined(const ir::Node&) const { return "not fused"; }

  Match<Group> select(ir::Node& conv) {
    std::string why;
    auto g = selectConvGroup(conv, &why);  // (1)-(9)
    if (!g) return Match<Group>::refuse(why);
    if (auto no = convFits(ctx, g->w.params.per_axis); !no.empty()) return Match<Group>::refuse(no);  // (10)
    Group group{std::move(*g), std::nullopt};
    if (group.conv.bias) {  // (11)
      group.bias = planBias(group.conv, ctx.options().raise_weight_scale, &why);
      if (!group.bias) return Match<Group>::refuse(why);
    }
    return group;
  }

  /// (9) `v` moved into the other 8-bit type `to`, the same tensor: the zero point (input 2) of
  /// each of `nodes` (per-tensor Q/DQ the selector checked) moved by 128, and `v` retyped.
  static void moveZeroPoints(ir::Graph& graph, const std::vector<ir::Node*>& nodes, ir::Value* v, int32_t to, const ConvGroup& g) {
    for (ir::Node* n : nodes) {
      std::string why;
      const auto p = readConstQuant(*n, &why);
      QCONV_ASSERT(p, "{}: its quantizers were checked: {}", g.conv->label(), why);
      ir::Value* old = n->input(2);
      graph.setInput(n, 2, graph.addInitializer("x_zero_point", ir::makeIntTensor(to, {}, {movedBy128(p->zero_point[0], to)})));
      if (old) graph.pruneIfDead(old);
    }
    v->setElemType(to);
  }

  static int64_t movedBy128(int64_t zero_point, int32_t to) { return zero_point + (to == onnx::TensorProto::UINT8 ? 128 : -128); }

  /// x in y's type: its QuantizeLinear and every reader move.
  static void moveX(ir::Graph& graph, const ConvGroup& g) {
    ir::Value* x = g.x.dq->input(0);
    std::vector<ir::Node*> nodes{x->producer()};
    for (const ir::Use& u : x->uses()) nodes.push_back(u.node);
    moveZeroPoints(graph, nodes, x, g.y.params.elem_type, g);
  }

  /// y in x's type: the fused op's y zero point (the Q's, moved) and every reader move.
  static void moveY(ir::Graph& graph, ir::Node& fused, const ConvGroup& g) {
    const int32_t to = g.x.params.elem_type;
    graph.setInput(&fused, 7, graph.addInitializer("y_zero_point", ir::makeIntTensor(to, {}, {movedBy128(g.y.params.zero_point[0], to)})));
    ir::Value* y = g.y.q->output(0);
    std::vector<ir::Node*> readers;
    for (const ir::Use& u : y->uses()) readers.push_back(u.node);
    moveZeroPoints(graph, readers, y, to, g);
  }

  /// The rewrite: kOperands, then input 8 B <- the bias plan (int32 at x_scale * w_scale);
  /// output 0 <- Q.output 0 (keeps its name and readers). With raised weight scales, inputs 3-5
  /// become the requantized weight, its scales and zero points 0 (conv_bias.h).
  void rewrite(ir::Graph& graph, Group& group, PassContext& ctx) {
    ConvGroup& g = group.conv;
    ir::Node* q = g.y.q;
    if (g.x_moved) {  // before the operands are gathered: the fused op reads the moved zero point
      moveX(graph, g);
      g.x.params.elem_type = g.y.params.elem_type;
    }
    std::vector<ir::Value*> in = gatherOperands(graph, kOperands, {g.x.dq, g.w.dq, q},
                                                {g.x.params.elem_type, g.w.params.elem_type, g.y.params.elem_type});
    ir::Node* fused = graph.createNode("QLinearConv", "", in, 1, q);
    inheritAttributes(*fused, *g.conv);
    floatScales(graph, *fused, {{1, &g.x.params}, {4, &g.w.params}, {6, &g.y.params}});
    if (group.bias) graph.setInput(fused, 8, writeBias(graph, *fused, *group.bias, ctx));

    ir::Value* y = q->output(0);
    if (g.y_moved) moveY(graph, *fused, g);
    graph.takeOutput(fused, 0, y);
    graph.destroyNode(q);
    if (g.y.activation) graph.destroyNode(g.y.activation);
    std::vector<ir::Value*> inputs = g.conv->inputs();
    graph.destroyNode(g.conv);
    for (ir::Value* v : inputs) graph.pruneIfDead(v);
    ctx.count("QLinearConv");
    if (g.y_moved || g.x_moved)
      ctx.report(Report::Done, *fused, fmt::format("{} stored as {} (its zero points moved by 128): the same tensor, in the type "
                                                   "QLinearConv kernels take with {}'s", g.y_moved ? "y" : "x",
                                                   ir::typeName(g.y_moved ? g.x.params.elem_type : g.y.params.elem_type),
                                                   g.y_moved ? "x" : "y"));
  }
};

}  // namespace

void fuseQLinearConv(ir::Model& model, PassContext& ctx) {
  FuseConv rule{ctx};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
