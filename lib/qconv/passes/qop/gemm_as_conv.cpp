// gemm-as-conv (--format qop): a quantized Gemm becomes a 1x1 Conv between int8 Unsqueeze and
// Squeeze, in QDQ form, so that fuse-qlinear-conv makes it a QLinearConv with its int32 bias:
// standard ONNX has no quantized Gemm, and QLinearConv takes the bias QLinearMatMul lacks.
//
// Before:
//   a_q -> DQ(a_s, a_zp) ---------------------------+
//   B_q -> DQ(b_s, b_zp[, per column]) --------------> Gemm(alpha, beta, transA, transB) [-> Relu|Clip] -> Q(y_s, y_zp) -> y_q
//   C (float [N], or DQ(int32 [N], c_s)) ----------/
// After:
//   a_q -> [Transpose] -> Unsqueeze(2, 3) -> DQ(a_s, a_zp) ----------------+
//   W_q [N, K, 1, 1] (B or B^T) -> DQ(alpha * b_s, b_zp[, axis 0]) -----------> Conv -> Q(y_s, y_zp) -> Squeeze(2, 3) -> y_q
//   beta * C (float), or DQ(C_int32, beta * c_s) ---------------------------/
// Every reshaping op moves 8-bit values (exact). alpha and beta go into the weight's and the
// bias's scales (float32 products): where either is not 1, the fused op may round a near tie the
// other way, within the one step a QOp output promises. A redundant Relu/Clip is dropped, as
// fuse-qlinear-conv would absorb it.
//
// A Gemm is rewritten when (otherwise it stays, named with the reason):
//   1. A comes from a DequantizeLinear with constant per-tensor parameters;
//   2. B from a DequantizeLinear of a constant 2-D int8/uint8 initializer, per tensor or per
//      column (the axis of B's N), and int8 A has int8 B (onnxruntime's QLinearConv kernels);
//   3. C is absent, or a constant float of N values ([N] or [1, N]), or a DequantizeLinear of a
//      constant int32 of N values with zero point 0, per tensor or one scale per column (a C of
//      another shape is not a per-channel bias);
//   4. alpha and beta are finite and not 0;
//   5. the output's one reader is a QuantizeLinear, per tensor, of A's type (through a redundant
//      Relu/Clip);
//   6. the opset is 13 or more (Unsqueeze/Squeeze with axes as an input; per-axis DQ);
//   7. the target (--target) runs the QLinearConv it becomes and data movement on A's type
//      (common/target_fit.h).
#include <fmt/format.h>

#include <cmath>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/driver.h"
#include "qconv/passes/common/qdq_select.h"
#include "qconv/passes/common/target_fit.h"

namespace qconv {

namespace {

struct GemmGroup {
  ir::Node* gemm = nullptr;
  DequantizedInput a, b;
  QuantizedOutput y;
  float alpha = 1.0f, beta = 1.0f;
  bool trans_a = false, trans_b = false;
  int64_t n = 0, k = 0;
  ir::Node* bias_dq = nullptr;  // C through a DQ of int32; else C float (or none)
  bool bias_per_axis = false;   // that DQ's scale has one value per column
};

Match<GemmGroup> selectGemm(ir::Node& gemm, int64_t opset) {
  using M = Match<GemmGroup>;
  GemmGroup g;
  g.gemm = &gemm;
  std::string why;
  if (opset < 13) return M::refuse(fmt::format("needs opset 13 (Unsqueeze's axes input), the model has {}", opset));  // (6)
  auto a = dequantizedInput(gemm, 0, "A", &why);  // (1)
  if (!a) return M::refuse(why);
  if (a->params.per_axis) return M::refuse("A is quantized per axis");
  g.a = std::move(*a);
  auto b = dequantizedInput(gemm, 1, "B", &why);  // (2)
  if (!b) return M::refuse(why);
  g.b = std::move(*b);
  g.trans_a = gemm.attrInt("transA", 0) != 0;
  g.trans_b = gemm.attrInt("transB", 0) != 0;
  const ir::Value* bq = g.b.quantized();
  if (!bq->isConstant() || bq->initializer()->dims_size() != 2) return M::refuse("B is not a constant 2-D initializer");
  const auto dims = ir::dimsOf(*bq->initializer());
  g.n = g.trans_b ? dims[0] : dims[1];
  g.k = g.trans_b ? dims[1] : dims[0];
  if (g.b.params.per_axis) {
    const int64_t axis = g.b.params.axis < 0 ? g.b.params.axis + 2 : g.b.params.axis;
    if (axis != (g.trans_b ? 0 : 1) || static_cast<int64_t>(g.b.params.size()) != g.n)
      return M::refuse("B is quantized per axis, but not one scale per output column");
  }
  if (g.a.params.elem_type == onnx::TensorProto::INT8 && g.b.params.elem_type != onnx::TensorProto::INT8)
    return M::refuse("A is int8 but B is uint8 (QLinearConv kernels take int8 x only with int8 weights)");
  g.alpha = gemm.attrFloat("alpha", 1.0f);
  g.beta = gemm.attrFloat("beta", 1.0f);
  if (!std::isfinite(g.alpha) || g.alpha == 0.0f || !std::isfinite(g.beta) || g.beta == 0.0f)  // (4)
    return M::refuse("alpha or beta is 0 or not finite");
  if (ir::Value* c = gemm.input(2)) {  // (3)
    g.bias_dq = dequantizeFeeding(c);
    const ir::Value* cv = g.bias_dq ? g.bias_dq->input(0) : c;
    const int32_t want = g.bias_dq ? onnx::TensorProto::INT32 : onnx::TensorProto::FLOAT;
    if (!cv->isConstant() || cv->initializer()->data_type() != want)
      return M::refuse("C is neither a constant float nor a DequantizeLinear of a constant int32");
    const auto cd = ir::dimsOf(*cv->initializer());
    if (!(cd.size() == 1 && cd[0] == g.n) && !(cd.size() == 2 && cd[0] == 1 && cd[1] == g.n))
      return M::refuse(fmt::format("C is not one value per output column ([{}] or [1, {}])", g.n, g.n));
    if (g.bias_dq) {
      auto cq = readConstQuant(*g.bias_dq, &why);
      if (!cq) return M::refuse("C " + why);
      for (int64_t z : cq->zero_point)
        if (z != 0) return M::refuse("C's zero point is not 0");
      if (cq->per_axis && static_cast<int64_t>(cq->size()) != g.n)
        return M::refuse("C is quantized per axis, but not one scale per output column");
      g.bias_per_axis = cq->per_axis;
    }
  }
  auto y = quantizedOutput(gemm, true, &why);  // (5)
  if (!y) return M::refuse(why);
  g.y = std::move(*y);
  if (g.y.params.elem_type != g.a.params.elem_type)
    return M::refuse(fmt::format("A is {} but the output is {}", ir::typeName(g.a.params.elem_type),
                                 ir::typeName(g.y.params.elem_type)));
  return g;
}

ir::Value* int64s(ir::Graph& graph, const char* hint, const std::vector<int64_t>& v) {
  return graph.addInitializer(hint, ir::makeIntTensor(onnx::TensorProto::INT64, {static_cast<int64_t>(v.size())}, v));
}

struct GemmAsConv {
  using Group = GemmGroup;
  int64_t opset;
  const PassContext& ctx;

  bool root(const ir::Node& n) const { return n.is("Gemm"); }
  std::string declined(const ir::Node&) const { return "not fused"; }
  Match<Group> select(ir::Node& n) {
    auto m = selectGemm(n, opset);
    if (!m.selected()) return m;
    const GemmGroup& g = m.group();  // (7)
    std::string no = convFits(ctx, g.b.params.per_axis);
    if (no.empty()) no = movementFits(ctx, g.a.params.elem_type);
    if (!no.empty()) return Match<Group>::refuse(no);
    return m;
  }

  /// Unsqueeze 0 <- A's DQ input 0 (through Transpose when transA); DQ(x) 1, 2 <- A's DQ 1, 2;
  /// DQ(W) 0 <- B_q as [N, K, 1, 1] (transposed unless transB), 1 <- alpha * b_s, 2 <- B's DQ 2;
  /// Conv 2 <- beta * C, or DQ(C's int32, beta * c_s); Q 1, 2 <- the Gemm's Q; Squeeze -> y_q.
  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Node& gemm = *g.gemm;
    ir::Node* q = g.y.q;
    const std::string base = gemm.name().empty() ? "Gemm" : gemm.name();
    auto named = [&](ir::Node* n, const char* what) {
      graph.setNameHint(n, base + "_" + what);
      return n;
    };
    ir::Value* a = g.a.quantized();
    if (g.trans_a) {
      ir::Node* t = named(graph.createNode("Transpose", "", {a}, 1, q), "transpose_a");
      setIntsAttribute(*t, "perm", {1, 0});
      t->output(0)->setElemType(g.a.params.elem_type);
      a = t->output(0);
    }
    ir::Node* un = named(graph.createNode("Unsqueeze", "", {a, int64s(graph, "axes", {2, 3})}, 1, q), "unsqueeze");
    un->output(0)->setElemType(g.a.params.elem_type);
    ir::Node* dqx = named(graph.createNode("DequantizeLinear", "", {un->output(0), g.a.dq->input(1), g.a.dq->input(2)}, 1, q), "dq_x");
    dqx->output(0)->setElemType(onnx::TensorProto::FLOAT);

    const onnx::TensorProto& bt = *g.b.quantized()->initializer();
    std::string why;
    auto bv = ir::readInts(*g.b.quantized(), &why);
    QCONV_ASSERT(bv, "{}: B was checked readable: {}", gemm.label(), why);
    std::vector<int64_t> w(static_cast<size_t>(g.n * g.k));
    for (int64_t r = 0; r < g.n; ++r)
      for (int64_t c = 0; c < g.k; ++c) w[r * g.k + c] = (*bv)[g.trans_b ? r * g.k + c : c * g.n + r];
    ir::Value* wq = graph.addInitializer(g.b.quantized()->name() + "_nk11", ir::makeIntTensor(bt.data_type(), {g.n, g.k, 1, 1}, w));
    std::vector<float> ws;
    for (float s : g.b.params.scale) ws.push_back(g.alpha * s);
    ir::Value* wscale = g.alpha == 1.0f ? g.b.dq->input(1)
                                        : graph.addInitializer("w_scale", ir::makeFloatTensor(g.b.params.per_axis ? std::vector<int64_t>{g.n} : std::vector<int64_t>{}, ws));
    std::vector<ir::Value*> wins{wq, wscale};
    if (g.b.dq->input(2)) wins.push_back(g.b.dq->input(2));
    ir::Node* dqw = named(graph.createNode("DequantizeLinear", "", wins, 1, q), "dq_w");
    if (g.b.params.per_axis) setIntAttribute(*dqw, "axis", 0);
    dqw->output(0)->setElemType(onnx::TensorProto::FLOAT);

    std::vector<ir::Value*> conv_in{dqx->output(0), dqw->output(0)};
    if (ir::Value* c = gemm.input(2)) conv_in.push_back(bias(graph, g, c, q, base));
    ir::Node* conv = graph.createNode("Conv", "", conv_in, 1, q);
    conv->output(0)->setElemType(onnx::TensorProto::FLOAT);
    graph.setName(conv, gemm.name());
    ir::Node* q2 = graph.createNode("QuantizeLinear", "", {conv->output(0), q->input(1), q->input(2)}, 1, q);
    inheritAttributes(*q2, *q);
    q2->output(0)->setElemType(g.y.params.elem_type);
    ir::Node* sq = named(graph.createNode("Squeeze", "", {q2->output(0), int64s(graph, "axes", {2, 3})}, 1, q), "squeeze");
    graph.takeOutput(sq, 0, q->output(0));
    std::vector<ir::Value*> in = q->inputs();
    graph.destroyNode(q);
    for (ir::Value* v : in) graph.pruneIfDead(v);  // the Relu/Clip, the Gemm and the DQs only it read
    ctx.report(Report::Detail, conv->label(), "Gemm rewritten as a 1x1 Conv between Unsqueeze and Squeeze, for QLinearConv");
  }

  /// The Conv's bias: beta * C (float), or DQ(C's int32, beta * c_s).
  static ir::Value* bias(ir::Graph& graph, const GemmGroup& g, ir::Value* c, ir::Node* before, const std::string& base) {
    std::string why;
    if (!g.bias_dq) {
      auto f = ir::readFloats(*c, &why);
      QCONV_ASSERT(f, "C was checked readable: {}", why);
      for (float& v : *f) v *= g.beta;
      return graph.addInitializer(c->name(), ir::makeFloatTensor({g.n}, *f));
    }
    ir::Value* ints = g.bias_dq->input(0);
    if (ints->initializer()->dims_size() != 1) {
      auto v = ir::readInts(*ints, &why);
      QCONV_ASSERT(v, "C was checked readable: {}", why);
      ints = graph.addInitializer(ints->name(), ir::makeIntTensor(onnx::TensorProto::INT32, {g.n}, *v));
    }
    ir::Value* scale = g.bias_dq->input(1);
    if (g.beta != 1.0f || (g.bias_per_axis && scale->initializer()->dims_size() != 1)) {
      auto s = ir::readFloats(*scale, &why);
      QCONV_ASSERT(s, "C's scale was checked: {}", why);
      for (float& v : *s) v *= g.beta;
      scale = graph.addInitializer("c_scale", ir::makeFloatTensor(g.bias_per_axis ? std::vector<int64_t>{g.n} : std::vector<int64_t>{}, *s));
    }
    ir::Node* dq = graph.createNode("DequantizeLinear", "", {ints, scale}, 1, before);
    if (g.bias_per_axis) setIntAttribute(*dq, "axis", 0);
    graph.setNameHint(dq, base + "_dq_c");
    dq->output(0)->setElemType(onnx::TensorProto::FLOAT);
    return dq->output(0);
  }
};

}  // namespace

void gemmAsConv(ir::Model& model, PassContext& ctx) {
  GemmAsConv rule{ir::defaultOpset(model), ctx};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
