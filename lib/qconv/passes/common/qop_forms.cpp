// The table of qop_forms.h. Slots are the node's inputs as the specification numbers them.
#include "qconv/passes/common/qop_forms.h"

namespace qconv {

namespace {

using K = QOperand;
using A = ScaleAxis;

const std::vector<const char*> kConvAttributes = {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"};

const std::vector<QOpForm>& forms() {
  static const std::vector<QOpForm> table = {
      // QLinearConv(x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp, B): B int32 at x_s * w_s
      {"QLinearConv", false, "Conv",
       {{"x", K::kDequantized, 0, 1, 2, A::kNone, false},
        {"w", K::kDequantized, 3, 4, 5, A::kFirst, false},
        {"B", K::kBias, 8, 1, 4, A::kFirst, true}},
       -1, 6, 7, kConvAttributes, QOpAttributes::kCopy},
      {"QLinearConv", true, "Conv",
       {{"x", K::kDequantized, 0, 1, 2, A::kNone, false},
        {"w", K::kDequantized, 3, 4, 5, A::kFirst, false},
        {"B", K::kBias, 8, 1, 4, A::kFirst, true}},
       -1, 6, 7, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides", "channels_last"},
       QOpAttributes::kChannelsLast},
      // QLinearConvTranspose: QLinearConv's layout; w is [C, M/group, k...]
      {"QLinearConvTranspose", true, "ConvTranspose",
       {{"x", K::kDequantized, 0, 1, 2, A::kNone, false},
        {"w", K::kDequantized, 3, 4, 5, A::kSecond, false},
        {"B", K::kBias, 8, 1, 4, A::kFirst, true}},
       -1, 6, 7,
       {"auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads", "strides"},
       QOpAttributes::kCopy},
      // QLinearMatMul(a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp): a per row, b per column
      {"QLinearMatMul", false, "MatMul",
       {{"a", K::kDequantized, 0, 1, 2, A::kRow, false}, {"b", K::kDequantized, 3, 4, 5, A::kColumn, false}},
       -1, 6, 7, {}, QOpAttributes::kCopy},
      // QGemm(A, a_s, a_zp, B, b_s, b_zp, C, y_s, y_zp): C int32 at alpha * a_s * b_s; no y_s: float Y
      {"QGemm", true, "Gemm",
       {{"A", K::kDequantized, 0, 1, 2, A::kNone, false},
        {"B", K::kDequantized, 3, 4, 5, A::kGemmB, false},
        {"C", K::kBias, 6, 1, 4, A::kColumn, true}},
       -1, 7, 8, {"alpha", "transA", "transB"}, QOpAttributes::kCopy},
      // QLinearAdd / QLinearMul(A, A_s, A_zp, B, B_s, B_zp, C_s, C_zp)
      {"QLinearAdd", true, "Add",
       {{"A", K::kDequantized, 0, 1, 2, A::kNone, false}, {"B", K::kDequantized, 3, 4, 5, A::kNone, false}},
       -1, 6, 7, {}, QOpAttributes::kCopy},
      {"QLinearMul", true, "Mul",
       {{"A", K::kDequantized, 0, 1, 2, A::kNone, false}, {"B", K::kDequantized, 3, 4, 5, A::kNone, false}},
       -1, 6, 7, {}, QOpAttributes::kCopy},
      // one quantized input: (X, X_s, X_zp, Y_s, Y_zp)
      {"QLinearSigmoid", true, "Sigmoid", {{"X", K::kDequantized, 0, 1, 2, A::kNone, false}}, -1, 3, 4, {},
       QOpAttributes::kCopy},
      {"QLinearLeakyRelu", true, "LeakyRelu", {{"X", K::kDequantized, 0, 1, 2, A::kNone, false}}, -1, 3, 4,
       {"alpha"}, QOpAttributes::kCopy},
      {"QLinearSoftmax", true, "Softmax", {{"X", K::kDequantized, 0, 1, 2, A::kNone, false}}, -1, 3, 4,
       {"axis", "opset"}, QOpAttributes::kSoftmax},
      {"QLinearGlobalAveragePool", true, "GlobalAveragePool", {{"X", K::kDequantized, 0, 1, 2, A::kNone, false}},
       -1, 3, 4, {"channels_last"}, QOpAttributes::kChannelsLast},
      {"QLinearAveragePool", true, "AveragePool", {{"X", K::kDequantized, 0, 1, 2, A::kNone, false}}, -1, 3, 4,
       {"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides", "channels_last"},
       QOpAttributes::kChannelsLast},
      {"QLinearReduceMean", true, "ReduceMean", {{"data", K::kDequantized, 0, 1, 2, A::kNone, false}}, -1, 3, 4,
       {"axes", "keepdims"}, QOpAttributes::kReduceMean},
      // QLinearWhere(condition, X, x_s, x_zp, Y, y_s, y_zp, z_s, z_zp)
      {"QLinearWhere", true, "Where",
       {{"condition", K::kPlain, 0, -1, -1, A::kNone, false},
        {"X", K::kDequantized, 1, 2, 3, A::kNone, false},
        {"Y", K::kDequantized, 4, 5, 6, A::kNone, false}},
       -1, 7, 8, {}, QOpAttributes::kCopy},
      // QLinearConcat(Y_s, Y_zp, X0, X0_s, X0_zp, X1, ...)
      {"QLinearConcat", true, "Concat", {}, 2, 0, 1, {"axis"}, QOpAttributes::kCopy},
  };
  return table;
}

struct NoForm {
  const char* op_type;
  const char* why;
};

const NoForm kNoForm[] = {
    {"DynamicQuantizeLSTM", "it quantizes its input at every step, inside the recurrence: DequantizeLinear -> LSTM "
                            "would compute on unquantized inputs"},
    {"DynamicQuantizeMatMul", "qconv does not write its standard form (DynamicQuantizeLinear, DequantizeLinear -> "
                              "MatMul) yet"},
    {"MatMulIntegerToFloat", "qconv does not write its standard form (DequantizeLinear -> MatMul) yet"},
    {"QAttention", "no standard op computes a quantized attention"},
    {"QEmbedLayerNormalization", "no standard op computes a quantized embedding with layer normalization"},
    {"QOrderedAttention", "its tensors are in a hardware layout (order attributes) no standard op reads"},
    {"QOrderedMatMul", "its tensors are in a hardware layout (order attributes) no standard op reads"},
    {"QOrderedLayerNormalization", "its tensors are in a hardware layout (order attributes) no standard op reads"},
    {"QOrderedGelu", "its tensors are in a hardware layout (order attributes) no standard op reads"},
    {"QOrderedLongformerAttention", "its tensors are in a hardware layout (order attributes) no standard op reads"},
    {"QMoE", "no standard op computes a quantized mixture of experts"},
};

}  // namespace

std::string withoutQdqForm(const ir::Node& n) {
  if (n.domain() != "com.microsoft") return {};
  for (const NoForm& f : kNoForm)
    if (n.opType() == f.op_type) return f.why;
  return {};
}

const QOpForm* qopFormOf(const ir::Node& n) {
  const bool contrib = n.domain() == "com.microsoft";
  if (!contrib && !n.domain().empty()) return nullptr;
  for (const QOpForm& f : forms())
    if (f.contrib == contrib && n.opType() == f.op_type) return &f;
  return nullptr;
}

const QOpForm* qopFormNamed(const std::string& op_type, const std::string& domain) {
  const bool contrib = domain == "com.microsoft";
  if (!contrib && !domain.empty() && domain != "ai.onnx") return nullptr;
  for (const QOpForm& f : forms())
    if (f.contrib == contrib && op_type == f.op_type) return &f;
  return nullptr;
}

const QOpForm* contribFormFor(const std::string& float_op) {
  for (const QOpForm& f : forms())
    if (f.contrib && float_op == f.float_op && float_op != "Conv") return &f;
  return nullptr;
}

}  // namespace qconv
