// QGemm's C, for fuse-contrib (select_contrib.h, condition 6 of fuse_contrib.cpp).
//
// QGemm(A, a_s, a_zp, B, b_s, b_zp, C, y_s, y_zp; alpha, transA, transB) takes C as int32 at
// scale alpha * a_s * b_s[j] (column j), zero point 0, and has no beta. So the Gemm's beta * C is
//   kept:         C = DQ(int32 c, s_c, 0) with beta = 1 and s_c[j] the same float32 bits as
//                 alpha * a_s * b_s[j] (what qconv's own unfuse-qop writes): c as it is;
//   requantized:  otherwise, c' = round_half_even(beta * C[.., j] / (alpha * a_s * b_s[j])), C a
//                 constant float or a DQ of a constant int32 (its values as the DQ gives them):
//                 moved by at most half a step of that scale, as QLinearConv's bias is.
// Refused when C is not constant, its last axis is neither 1 nor B's column count while B has
// one scale per column, a value is not finite, or some c' does not fit int32.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "qconv/ir/tensor.h"
#include "qconv/passes/qop/select_contrib.h"

namespace qconv {

namespace {

/// C's values as the Gemm adds them, before beta: the float constant, or its DequantizeLinear.
std::optional<std::vector<float>> realValues(ir::Value* c, const ir::Node* dq, std::string* why) {
  const ir::Value* raw = dq ? dq->input(0) : c;
  const int32_t want = dq ? onnx::TensorProto::INT32 : onnx::TensorProto::FLOAT;
  if (!raw->isConstant() || raw->initializer()->data_type() != want) {
    *why = "C is neither a constant float nor a DequantizeLinear of a constant int32";
    return std::nullopt;
  }
  if (!dq) return ir::readFloats(*raw, why);
  std::string inner;
  auto cq = readConstQuant(*dq, &inner);
  auto ints = ir::readInts(*raw, why);
  if (!cq || !ints) {
    if (!cq) *why = "C's DequantizeLinear " + inner;
    return std::nullopt;
  }
  const auto dims = ir::dimsOf(*raw->initializer());
  const int64_t axis = cq->per_axis ? (cq->axis < 0 ? cq->axis + static_cast<int64_t>(dims.size()) : cq->axis) : 0;
  int64_t inner_size = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < dims.size(); ++d) inner_size *= dims[d];
  std::vector<float> out;
  for (size_t i = 0; i < ints->size(); ++i) {
    const size_t k = cq->per_axis ? static_cast<size_t>(static_cast<int64_t>(i) / inner_size % dims[static_cast<size_t>(axis)]) : 0;
    out.push_back(static_cast<float>((*ints)[i] - cq->zero_point[k]) * cq->scale[k]);
  }
  return out;
}

}  // namespace

bool planQGemmBias(ContribGroup& g, std::string* why) {
  if (g.operands.size() < 3 || !g.operands[2].value) return true;
  ContribOperand& c = g.operands[2];
  const ir::Node& gemm = *g.node;
  const float alpha = gemm.attrFloat("alpha", 1.0f), beta = gemm.attrFloat("beta", 1.0f);
  if (!std::isfinite(alpha) || alpha == 0.0f || !std::isfinite(beta)) {
    *why = "alpha is 0 or not finite, or beta is not finite";
    return false;
  }
  const ConstQuant& a = g.operands[0].dq->params;
  const ConstQuant& b = g.operands[1].dq->params;
  std::vector<float> acc;
  for (float s : b.scale) acc.push_back(alpha * a.scale[0] * s);
  ir::Node* dq = dequantizeFeeding(c.value);
  const ir::Value* raw = dq ? dq->input(0) : c.value;
  if (!raw->isConstant()) {
    *why = "C is not a constant (QGemm's C is int32 at alpha * a_scale * b_scale)";
    return false;
  }
  const auto dims = ir::dimsOf(*raw->initializer());
  const int64_t last = dims.empty() ? 1 : dims.back();
  if (acc.size() > 1 && last != static_cast<int64_t>(acc.size())) {
    *why = fmt::format("B has a scale per column ({}) but C's last axis has {}", acc.size(), last);
    return false;
  }
  if (dq && beta == 1.0f) {  // kept: the same scale bits, zero point 0
    std::string inner;
    auto cq = readConstQuant(*dq, &inner);
    bool same = cq && raw->initializer()->data_type() == onnx::TensorProto::INT32 &&
                (cq->size() == 1 || cq->size() == acc.size());
    for (size_t j = 0; same && j < acc.size(); ++j)
      same = cq->zero_point[cq->size() == 1 ? 0 : j] == 0 && cq->scale[cq->size() == 1 ? 0 : j] == acc[j];
    if (same) {
      c.value = dq->input(0);
      return true;
    }
  }
  auto real = realValues(c.value, dq, why);
  if (!real) return false;
  QGemmBias bias;
  bias.dims = dims;
  bias.requantized = true;
  for (size_t i = 0; i < real->size(); ++i) {
    const float s = acc[acc.size() == 1 ? 0 : i % acc.size()];
    const double q = std::nearbyint(static_cast<double>(beta * (*real)[i]) / static_cast<double>(s));
    if (!std::isfinite(q) || std::fabs(q) > std::numeric_limits<int32_t>::max()) {
      *why = fmt::format("C[{}] = {} does not fit int32 at alpha * a_scale * b_scale = {}", i, beta * (*real)[i], s);
      return false;
    }
    bias.values.push_back(static_cast<int64_t>(q));
  }
  g.bias = std::move(bias);
  return true;
}

}  // namespace qconv
