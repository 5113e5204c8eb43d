// fuse-contrib (--format qop --contrib): the QDQ groups standard ONNX has no quantized op for
// become onnxruntime's com.microsoft ones. Off unless --contrib: the default output stays
// standard-only.
//
// Before (one float op between DequantizeLinears and a QuantizeLinear):
//   A_q -> DQ(A_s, A_zp) --+
//   B_q -> DQ(B_s, B_zp) ----> Add -> Q(C_s, C_zp) -> C_q
// After:
//   com.microsoft QLinearAdd(A_q, A_s, A_zp, B_q, B_s, B_zp, C_s, C_zp) -> C_q
// and so for Mul (QLinearMul), Sigmoid, LeakyRelu, Softmax, GlobalAveragePool, AveragePool,
// Concat, Where and Gemm (QGemm): the operand layouts are qop_forms.h's table, the one
// unfuse-qop reads the other way, so the two directions cannot disagree. Gemm reaches here only
// where gemm-as-conv left it (a C per row, a B that is not constant, ...).
//
// A group is fused when all of these hold (select_contrib.cpp); otherwise it stays in QDQ form
// and the refusal says which failed:
//   1. the op has a com.microsoft form onnxruntime's CPU provider runs (ConvTranspose and
//      ReduceMean have forms but no such kernel: refused, named);
//   2. each attribute is one the contrib op takes (Gemm's beta goes into C); Softmax's axis is
//      written out, with `opset` the model's, so it means what the model's Softmax means;
//   3. each quantized input comes through a DequantizeLinear with constant int8/uint8
//      parameters, per tensor (QGemm's B: or one scale per column); Where's condition as it is;
//   4. they and the output share one 8-bit type (QGemm: B int8 with a uint8 A too);
//   5. the op's output has one reader, a QuantizeLinear with constant per-tensor parameters, or
//      a Relu/Clip the Q makes redundant (its bounds quantize to the type's ends), absorbed;
//   6. QGemm: C is kept or requantized to int32 at alpha * a_s * b_s (select_contrib_gemm.cpp);
//   7. an int8 Softmax's output cannot wrap in onnxruntime's kernel, which writes
//      nearbyint(p * floor(1 / y_scale)) + y_zero_point unclamped: that is at most 127 for p = 1.
// float16 scales are written as float, widened exactly (contrib ops take float scales).
// Under the reference the contrib op computes quantize(op(dequantize)): the QDQ group's math,
// apart from float rounding on near ties (and a requantized QGemm C): within one output step.
#include <fmt/format.h>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/driver.h"
#include "qconv/passes/qop/select_contrib.h"

namespace qconv {

namespace {

struct FuseContrib {
  using Group = ContribGroup;
  int64_t opset;

  bool root(const ir::Node& n) const { return n.domain().empty() && contribFormFor(n.opType()); }
  std::string declined(const ir::Node&) const { return "not fused"; }
  Match<Group> select(ir::Node& n) {
    bool dequantized = false;  // not between DQ and Q at all (a Concat already on int8): not ours
    for (const ir::Value* v : n.inputs()) dequantized = dequantized || (v && dequantizeFeeding(v));
    if (!dequantized) return Match<Group>::none();
    std::string why;
    auto g = selectContrib(n, *contribFormFor(n.opType()), opset, &why);
    if (!g) return Match<Group>::refuse(why);
    return std::move(*g);
  }

  /// The contrib op's inputs by the table's slots:
  ///   operand row (x, s, zp) <- the operand's DQ inputs 0, 1, 2 (a plain operand: x only;
  ///                             QGemm's C: the int32 C, kept or requantized)
  ///   Concat                  <- (input i's DQ 0, 1, 2) from slot variadic_from on
  ///   y_scale, y_zero_point   <- the Q's inputs 1, 2
  /// A zero point the Q/DQ omits becomes a 0 of its type. The output is the Q's.
  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    const QOpForm& f = *g.form;
    ir::Node& n = *g.node;
    ir::Node* q = g.y.q;
    std::vector<ir::Value*> in;
    std::vector<std::pair<size_t, const ConstQuant*>> scales;  // float16 ones become float (floatScales)
    auto put = [&](int slot, ir::Value* v) {
      if (slot < 0) return;
      if (in.size() <= static_cast<size_t>(slot)) in.resize(static_cast<size_t>(slot) + 1, nullptr);
      in[static_cast<size_t>(slot)] = v;
    };
    auto putQuantized = [&](int x, int s, int zp, const ContribOperand& op) {
      const DequantizedInput& d = *op.dq;
      put(x, d.quantized());
      put(s, d.dq->input(1));
      scales.emplace_back(static_cast<size_t>(s), &d.params);
      put(zp, zeroPointOr(graph, d.dq->inputs().size() > 2 ? d.dq->input(2) : nullptr, d.params.elem_type,
                          op.name + "_zero_point"));
    };
    put(f.y_scale, q->input(1));
    scales.emplace_back(static_cast<size_t>(f.y_scale), &g.y.params);
    put(f.y_zero_point,
        zeroPointOr(graph, q->inputs().size() > 2 ? q->input(2) : nullptr, g.y.params.elem_type, "y_zero_point"));
    for (size_t i = 0; i < g.operands.size(); ++i) {
      const ContribOperand& op = g.operands[i];
      if (f.variadic_from >= 0) {
        const int base = f.variadic_from + 3 * static_cast<int>(i);
        putQuantized(base, base + 1, base + 2, op);
        continue;
      }
      const QOperand& row = f.operands[i];
      if (op.dq) putQuantized(row.x, row.s, row.zp, op);
      else if (row.kind == QOperand::kBias && g.bias)
        put(row.x, graph.addInitializer(op.value->name() + "_int32",
                                        ir::makeIntTensor(onnx::TensorProto::INT32, g.bias->dims, g.bias->values)));
      else put(row.x, op.value);
    }
    ir::Node* fused = graph.createNode(f.op_type, "com.microsoft", in, 1, q);
    floatScales(graph, *fused, scales);
    for (const auto& a : g.attributes) *fused->mutableProto().add_attribute() = a;
    fused->mutableProto().set_name(n.name());
    if (!n.proto().doc_string().empty()) fused->mutableProto().set_doc_string(n.proto().doc_string());
    graph.takeOutput(fused, 0, q->output(0));
    graph.destroyNode(q);
    if (g.y.activation) graph.destroyNode(g.y.activation);
    std::vector<ir::Value*> inputs = n.inputs();
    graph.destroyNode(&n);
    for (ir::Value* v : inputs) graph.pruneIfDead(v);
    ctx.count(std::string("com.microsoft ") + f.op_type);
    if (g.bias && g.bias->requantized)
      ctx.report(Report::Detail, *fused, "C requantized to int32 at alpha * a_scale * b_scale");
  }
};

}  // namespace

void fuseContrib(ir::Model& model, PassContext& ctx) {
  if (!ctx.options().contrib) return;
  FuseContrib rule{ir::defaultOpset(model)};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
