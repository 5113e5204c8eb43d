// verify's bias checks (checkBias in analysis/verify.cpp) on a Conv whose bias has another count
// than its weight's scales: per-axis names the weight, and the bias check reads nothing past
// the scales (a fuzzer's input read past them, found by ASan).
#include <catch2/catch.hpp>

#include <algorithm>

#include "model_builder.h"
#include "qconv/analysis/verify.h"

using namespace qtest;

namespace {

/// x (u8, DQ) and w (int8, DQ at `channels` scales along axis 0) into Conv conv_0 with a bias of
/// three: float, or int32 through a DequantizeLinear at 0.1.
ModelBuilder convWithThreeBiases(bool quantized_bias, int64_t channels = 2) {
  ModelBuilder b(13);
  b.input("x", TensorProto::UINT8, {1, 2, 3, 3});
  b.floats("x_s", {}, {0.5f});
  b.ints("x_zp", TensorProto::UINT8, {}, {128});
  const std::vector<int64_t> w = {1, -2, 3, -4, 5, -6};
  const std::vector<float> w_s = {0.25f, 0.125f, 0.5f};
  const auto n = static_cast<size_t>(channels);
  b.ints("w", TensorProto::INT8, {channels, 2, 1, 1}, {w.begin(), w.begin() + static_cast<std::ptrdiff_t>(2 * n)});
  b.floats("w_s", {channels}, {w_s.begin(), w_s.begin() + static_cast<std::ptrdiff_t>(n)});
  b.ints("w_zp", TensorProto::INT8, {channels}, std::vector<int64_t>(n, 0));
  b.node("DequantizeLinear", {"x", "x_s", "x_zp"}, {"xf"}, "dq_x");
  setInt(b.node("DequantizeLinear", {"w", "w_s", "w_zp"}, {"wf"}, "dq_w"), "axis", 0);
  if (quantized_bias) {
    b.ints("B", TensorProto::INT32, {3}, {10, -20, 30});
    b.floats("b_s", {3}, {0.1f, 0.1f, 0.1f});
    b.ints("b_zp", TensorProto::INT32, {3}, {0, 0, 0});
    setInt(b.node("DequantizeLinear", {"B", "b_s", "b_zp"}, {"bf"}, "dq_b"), "axis", 0);
  } else {
    b.floats("bf", {3}, {1e9f, 2.0f, 3.0f});
  }
  b.node("Conv", {"xf", "wf", "bf"}, {"y"}, "conv_0");
  b.output("y", TensorProto::FLOAT);
  return b;
}

bool hasKind(const std::vector<qconv::analysis::Finding>& fs, const std::string& kind) {
  return std::any_of(fs.begin(), fs.end(), [&](const auto& f) { return f.kind == kind; });
}

}  // namespace

TEST_CASE("verify: a dequantized bias of three beside two weight scales reads no scale past them") {
  auto m = convWithThreeBiases(true).build();
  const auto findings = qconv::analysis::verifyModel(m, {});
  REQUIRE_FALSE(hasKind(findings, "bias-scale"));  // which scale it should be is undefined
}

TEST_CASE("verify: a float bias of three beside two weight scales reads no scale past them") {
  auto m = convWithThreeBiases(false).build();
  const auto findings = qconv::analysis::verifyModel(m, {});
  REQUIRE_FALSE(hasKind(findings, "bias-overflow"));  // 1e9 would overflow at 0.125: not judged
}

TEST_CASE("verify: with one weight scale per bias the bias checks still speak") {
  auto m = convWithThreeBiases(false, 3).build();
  const auto findings = qconv::analysis::verifyModel(m, {});
  const auto it = std::find_if(findings.begin(), findings.end(), [](const auto& f) { return f.kind == "bias-overflow"; });
  REQUIRE(it != findings.end());
  REQUIRE(it->node.find("conv_0") != std::string::npos);
  REQUIRE(it->message.find("bias[0] = 1000000000 is") != std::string::npos);

  auto q = convWithThreeBiases(true, 3).build();
  REQUIRE(hasKind(qconv::analysis::verifyModel(q, {}), "bias-scale"));  // 0.1 is not 0.5 * 0.25
}
