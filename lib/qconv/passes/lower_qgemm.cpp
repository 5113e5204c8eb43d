// lower-qgemm: com.microsoft QGemm becomes DequantizeLinear -> Gemm [-> QuantizeLinear].
//
// Before (onnxruntime's QOperator format, Aidge's exporter):
//   QGemm(A, a_s, a_zp, B, b_s, b_zp, [C], [y_s], [y_zp]; alpha, transA, transB) -> Y
//   acc = (A' - a_zp) x (B' - b_zp) + C          (int32; C has scale alpha * a_s * b_s, zero point 0)
//   Y   = quantize(alpha * a_s * b_s * acc, y_s, y_zp), or that float when y_s is absent
// After:
//   A -> DQ(a_s, a_zp) ----------------------------+
//   B -> DQ(b_s, b_zp[, axis: the column axis of B]) -> Gemm(alpha, transA, transB) [-> Q(y_s, y_zp)] -> Y
//   C -> DQ(alpha * a_s * b_s[, axis: C last]) -----+
// The QDQ form is standard ONNX for the same math (onnxruntime fuses it back into QGemm), and
// QOp output keeps it: standard ONNX has no quantized Gemm.
//
// A QGemm is lowered when:
//   1. its only attributes are alpha, transA and transB;
//   2. b_s is a constant positive scalar, or 1-D of size N (per column of B'), and a_s is a
//      constant positive scalar (C's scale is computed from both);
//   3. C, when present, is int32 of known rank 1 or 2 (so its column axis is known);
//   4. y_s comes with y_zp (the zero point tells the output type);
//   5. the default opset is >= 13 (per-axis Q/DQ; Gemm with an optional C).
// Otherwise it stays com.microsoft (onnxruntime runs it), with the reason.
#include <fmt/format.h>

#include <cmath>

#include "qconv/ir/tensor.h"
#include "qconv/passes/action_util.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

struct QGemmGroup {
  ir::Node* qgemm = nullptr;
  float alpha = 1.0f, a_scale = 0.0f;
  std::vector<float> b_scale;
  bool trans_b = false;
};

std::optional<std::vector<float>> positiveScales(const ir::Value* v) {
  std::string why;
  auto s = v && v->isConstant() ? ir::readFloats(*v, &why) : std::nullopt;
  if (!s || s->empty()) return std::nullopt;
  for (float f : *s)
    if (!(std::isfinite(f) && f > 0)) return std::nullopt;
  return s;
}

std::optional<QGemmGroup> selectQGemm(ir::Node& n, int64_t opset, std::string* why) {
  QGemmGroup g;
  g.qgemm = &n;
  for (const auto& a : n.proto().attribute())  // (1)
    if (a.name() != "alpha" && a.name() != "transA" && a.name() != "transB") {
      *why = fmt::format("attribute '{}' has no Gemm counterpart", a.name());
      return std::nullopt;
    }
  if (const auto* a = n.attribute("alpha")) g.alpha = a->f();
  g.trans_b = n.attrInt("transB", 0) != 0;
  auto a_s = positiveScales(n.input(1));
  auto b_s = positiveScales(n.input(4));
  if (!a_s || a_s->size() != 1 || !b_s) {  // (2)
    *why = "a_scale is not a constant positive scalar, or b_scale not constant positive";
    return std::nullopt;
  }
  if (!std::isfinite(g.alpha) || g.alpha == 0.0f) {
    *why = "alpha is 0 or not finite";
    return std::nullopt;
  }
  g.a_scale = (*a_s)[0];
  g.b_scale = *b_s;
  if (g.b_scale.size() > 1 && ir::dimsOf(*n.input(4)->initializer()).size() != 1) {
    *why = "b_scale is neither a scalar nor 1-D";
    return std::nullopt;
  }
  if (const ir::Value* c = n.input(6)) {  // (3)
    const int64_t rank = knownRank(c);
    if (c->elemType() != onnx::TensorProto::INT32 || rank < 1 || rank > 2) {
      *why = "C is not int32 of known rank 1 or 2";
      return std::nullopt;
    }
  }
  if (n.input(7) && !n.input(8)) {  // (4)
    *why = "y_scale without y_zero_point (the output type is not stated)";
    return std::nullopt;
  }
  if (opset < 13) {  // (5)
    *why = fmt::format("needs opset 13, the model has {}", opset);
    return std::nullopt;
  }
  return g;
}

ir::Node* dequantize(ir::Graph& graph, ir::Node& before, ir::Value* x, ir::Value* s, ir::Value* zp,
                     std::optional<int64_t> axis) {
  std::vector<ir::Value*> in{x, s};
  if (zp) in.push_back(zp);
  ir::Node* dq = graph.createNode("DequantizeLinear", "", in, 1, &before);
  dq->output(0)->setElemType(onnx::TensorProto::FLOAT);
  if (axis) setIntAttribute(*dq, "axis", *axis);
  return dq;
}

/// Operands, one line per input:
///   DQ(A)  0 A <- QGemm 0; 1 a_s <- QGemm 1; 2 a_zp <- QGemm 2
///   DQ(B)  0 B <- QGemm 3; 1 b_s <- QGemm 4; 2 b_zp <- QGemm 5; axis 1 (0 when transB) if per column
///   DQ(C)  0 C <- QGemm 6; 1 new alpha*a_s*b_s (float32 products); axis rank(C)-1 if per column
///   Gemm   0 DQ(A); 1 DQ(B); 2 DQ(C) if any; alpha, transA, transB <- QGemm
///   Q      0 Gemm; 1 y_s <- QGemm 7; 2 y_zp <- QGemm 8; output <- QGemm output (else Gemm's)
void rewriteQGemm(ir::Graph& graph, ir::Node& n, const QGemmGroup& g) {
  const bool per_column = g.b_scale.size() > 1;
  ir::Node* a = dequantize(graph, n, n.input(0), n.input(1), n.input(2), std::nullopt);
  ir::Node* b = dequantize(graph, n, n.input(3), n.input(4), n.input(5),
                           per_column ? std::optional<int64_t>(g.trans_b ? 0 : 1) : std::nullopt);
  std::vector<ir::Value*> gemm_in{a->output(0), b->output(0)};
  if (ir::Value* c = n.input(6)) {
    std::vector<float> cs;
    for (float bs : g.b_scale) cs.push_back(g.alpha * g.a_scale * bs);
    const std::vector<int64_t> dims = per_column ? std::vector<int64_t>{static_cast<int64_t>(cs.size())} : std::vector<int64_t>{};
    ir::Value* c_scale = graph.addInitializer("qgemm_c_scale", ir::makeFloatTensor(dims, cs));
    gemm_in.push_back(dequantize(graph, n, c, c_scale, nullptr,
                                 per_column ? std::optional<int64_t>(knownRank(c) - 1) : std::nullopt)->output(0));
  }
  ir::Node* gemm = graph.createNode("Gemm", "", gemm_in, 1, &n);
  inheritAttributes(*gemm, n);
  gemm->output(0)->setElemType(onnx::TensorProto::FLOAT);
  if (!n.input(7)) {
    replaceNode(graph, n, gemm);
    return;
  }
  gemm->mutableProto().set_name(n.name().empty() ? "" : n.name() + "_gemm");
  ir::Node* q = graph.createNode("QuantizeLinear", "", {gemm->output(0), n.input(7), n.input(8)}, 1, &n);
  q->output(0)->setElemType(n.input(8)->elemType());
  replaceNode(graph, n, q);
}

struct LowerQGemm {
  using Group = QGemmGroup;
  int64_t opset;
  bool root(const ir::Node& n) const { return n.domain() == "com.microsoft" && n.opType() == "QGemm"; }
  std::string declined(const ir::Node&) const { return "stays com.microsoft QGemm"; }
  Match<Group> select(ir::Node& n) {
    std::string why;
    auto g = selectQGemm(n, opset, &why);
    if (!g) return Match<Group>::refuse(why);
    return *g;
  }
  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Node& n = *g.qgemm;
    ctx.report(Report::Detail, n, "QGemm lowered to DequantizeLinear -> Gemm -> QuantizeLinear (standard ONNX has no quantized Gemm)");
    rewriteQGemm(graph, n, g);
    ctx.count("com.microsoft QGemm lowered");
  }
};

}  // namespace

void lowerQGemm(ir::Model& model, PassContext& ctx) {
  LowerQGemm rule{ir::defaultOpset(model)};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
