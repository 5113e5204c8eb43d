// unfuse-qop (--format qdq): a QOperator op becomes DequantizeLinear -> float op -> QuantizeLinear
// with the same parameters: canonical QDQ, which TensorRT, QNN and every QDQ reader take.
//
// Before (onnxruntime's QOperator format; qop_forms.h lists every op and its layout):
//   QLinearConv(x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp, B)                    -> y
//   com.microsoft QLinearAdd(A, A_s, A_zp, B, B_s, B_zp, C_s, C_zp)          -> C
//   com.microsoft QGemm(A, a_s, a_zp, B, b_s, b_zp, C, [y_s, y_zp]; alpha, transA, transB) -> Y
//   ... QLinearMatMul, QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax,
//   QLinearConcat, QLinearGlobalAveragePool, QLinearAveragePool, QLinearConvTranspose,
//   QLinearReduceMean, QLinearWhere
// After:
//   x -> DQ(x_s, x_zp) --------------------+
//   w -> DQ(w_s, w_zp[, axis 0]) ------------> Conv (the node's attributes and name) -> Q(y_s, y_zp) -> y
//   B -> DQ(x_s * w_s[c][, axis 0], int32) -+
// A bias is DequantizeLinear of the int32 values at the product of the input's and the weight's
// scales (times QGemm's alpha), the scale QLinearConv gives it. A channels_last op is wrapped in
// Transposes to channels first and back. The node's name goes to the float op; the new Q and
// DQ are named after it ("<name>_dq_x", "<name>_q"), or after the float op when it has none,
// made unique at emit. In the specification's arithmetic the QDQ form computes the same
// numbers up to float rounding: within one output step, on near ties only.
//
// A node is unfused when (select_qop.cpp):
//   1. it carries only the attributes its float op has (channels_last and QLinearSoftmax's
//      opset aside);
//   2. every input the form needs is present;
//   3. each scale is a constant, or a value known to be a scalar;
//   4. a scale of more than one element is 1-D, and its operand has an axis it runs along
//      (a conv weight's output channels; QLinearMatMul's rows of a or columns of b, of known
//      rank; QGemm's columns of B; a ConvTranspose weight with one group);
//   5. a bias is int32, with the two scales it is at constant and positive;
//   6. the output has one scale and an int8/uint8 type (its zero point's, else its own); QGemm
//      without y_scale has a float output, taken as it is;
//   7. the model's opset is 10 or more, and 13 or more for a per-axis scale;
//   8. channels_last comes with an input of known rank; a QLinearSoftmax's opset gives its axis
//      the meaning the model's opset gives Softmax's (or the axis is the last).
// Otherwise it stays a QOp node, which onnxruntime runs, and the refusal says why.
// DynamicQuantizeLSTM and the other com.microsoft quantized ops without a float op of the same
// math (qop_forms.cpp, kNoForm) stay too, each refused with its reason.
#include <fmt/format.h>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/driver.h"
#include "qconv/passes/read/select_qop.h"

namespace qconv {

namespace {

/// Transpose(v, perm) before `before`.
ir::Value* transpose(ir::Graph& graph, ir::Value* v, const std::vector<int64_t>& perm, ir::Node* before,
                     const std::string& hint) {
  ir::Node* t = graph.createNode("Transpose", "", {v}, 1, before);
  setIntsAttribute(*t, "perm", perm);
  graph.setNameHint(t, hint);
  graph.setNameHint(t->output(0), v->name() + "_transposed");
  t->output(0)->setElemType(onnx::TensorProto::FLOAT);
  return t->output(0);
}

/// The float op's input for one operand: DQ(x, scale, zero point[, axis]), or x itself.
ir::Value* operandInput(ir::Graph& graph, ir::Node& n, const OperandPlan& op, const std::string& base) {
  if (!op.x || op.kind == QOperand::kPlain) return op.x;
  ir::Value* scale = op.scale;
  if (op.kind == QOperand::kBias) {
    const std::vector<int64_t> dims = op.axis ? std::vector<int64_t>{static_cast<int64_t>(op.bias_scale.size())}
                                              : std::vector<int64_t>{};
    scale = graph.addInitializer(op.x->name() + "_scale", ir::makeFloatTensor(dims, op.bias_scale));
  }
  std::vector<ir::Value*> in{op.x, scale};
  if (op.zero_point) in.push_back(op.zero_point);
  ir::Node* dq = graph.createNode("DequantizeLinear", "", in, 1, &n);
  if (op.axis) setIntAttribute(*dq, "axis", *op.axis);
  dq->output(0)->setElemType(onnx::TensorProto::FLOAT);
  graph.setNameHint(dq, base + "_dq_" + op.name);
  graph.setNameHint(dq->output(0), op.x->name() + "_dequantized");
  return dq->output(0);
}

struct UnfuseQop {
  using Group = UnfusePlan;
  int64_t opset;

  bool root(const ir::Node& n) const { return qopFormOf(n) || !withoutQdqForm(n).empty(); }
  std::string declined(const ir::Node& n) const {
    return fmt::format("stays {}{}", n.domain().empty() ? "" : n.domain() + " ", n.opType());
  }
  Match<Group> select(ir::Node& n) {
    if (!qopFormOf(n)) return Match<Group>::refuse(withoutQdqForm(n));  // onnxruntime runs it: the model converts
    std::string why;
    auto plan = selectUnfuse(n, *qopFormOf(n), opset, &why);
    if (!plan) return Match<Group>::refuse(why);
    return std::move(*plan);
  }

  /// Operands as the plan lists them (qop_forms.h: one row per float-op input), then the
  /// float op with the plan's attributes, then Q(y_s, y_zp) taking over the node's output.
  void rewrite(ir::Graph& graph, Group& plan, PassContext& ctx) {
    ir::Node& n = *plan.node;
    const QOpForm& f = *plan.form;
    const std::string base = n.name().empty() ? std::string(f.float_op) : n.name();
    std::vector<ir::Value*> in;
    for (const OperandPlan& op : plan.operands) in.push_back(operandInput(graph, n, op, base));
    while (!in.empty() && !in.back()) in.pop_back();
    const int64_t r = plan.channels_last_rank;
    std::vector<int64_t> to_first{0, r - 1}, to_last{0};
    for (int64_t k = 1; k + 1 < r; ++k) to_first.push_back(k);
    for (int64_t k = 2; k < r; ++k) to_last.push_back(k);
    to_last.push_back(1);
    if (r > 0) in[0] = transpose(graph, in[0], to_first, &n, base + "_to_channels_first");
    if (!plan.axes_input.empty())
      in.push_back(graph.addInitializer("axes", ir::makeIntTensor(onnx::TensorProto::INT64,
                                                                  {static_cast<int64_t>(plan.axes_input.size())},
                                                                  plan.axes_input)));
    ir::Node* op = graph.createNode(f.float_op, "", in, 1, &n);
    for (const auto& a : plan.attributes) *op->mutableProto().add_attribute() = a;
    if (!n.proto().doc_string().empty()) op->mutableProto().set_doc_string(n.proto().doc_string());
    op->output(0)->setElemType(onnx::TensorProto::FLOAT);
    graph.setNameHint(op->output(0), n.output(0)->name() + "_float");
    ir::Value* out = r > 0 ? transpose(graph, op->output(0), to_last, &n, base + "_to_channels_last") : op->output(0);
    ir::Node* last = out->producer();
    if (plan.y_scale) {
      ir::Value* zp = zeroPointOr(graph, plan.y_zero_point, plan.y_type, "y_zero_point");
      last = graph.createNode("QuantizeLinear", "", {out, plan.y_scale, zp}, 1, &n);
      last->output(0)->setElemType(plan.y_type);
      graph.setNameHint(last, base + "_q");
    }
    if (n.name().empty()) graph.setNameHint(op, base);
    else graph.setName(op, n.name());
    graph.takeOutput(last, 0, n.output(0));
    std::vector<ir::Value*> inputs = n.inputs();
    graph.destroyNode(&n);
    for (ir::Value* v : inputs) graph.pruneIfDead(v);
    ctx.count(fmt::format("{} -> QDQ {}", f.op_type, f.float_op));
  }
};

}  // namespace

void unfuseQop(ir::Model& model, PassContext& ctx) {
  UnfuseQop rule{ir::defaultOpset(model)};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
