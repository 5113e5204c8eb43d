// The fused QLinearConv's int32 bias (conv_bias.h): expected integers are worked by hand from B' = round_half_even(B / (s_x*s_w)).
#include <catch2/catch.hpp>

#include "model_builder.h"
#include "qconv/diag.h"

#include <limits>

using namespace qtest;

namespace {
qconv::ir::Model fused(const ModelBuilder& b, Reporter& r) {
  auto m = b.build();
  qconv::pairQdq(m, r.ctx);
  qconv::fuseQLinearConv(m, r.ctx);
  REQUIRE(nodesOf(m.graph, "QLinearConv").size() == 1);
  return m;
}

/// convModel without a bias DQ: the Conv reads a float bias initializer instead.
ModelBuilder floatBias(ConvSpec s, const std::vector<float>& bias) {
  s.bias = false;
  auto b = convModel(s);
  b.floats("b_f", {static_cast<int64_t>(bias.size())}, bias);
  for (auto& n : *b.graph().mutable_node())
    if (n.op_type() == "Conv") n.add_input("b_f");
  return b;
}
}  // namespace

TEST_CASE("a bias DQ already at x_scale*w_scale keeps its int32 tensor untouched") {
  Reporter r;
  auto m = fused(convModel({}), r);
  auto* qc = only(m.graph, "QLinearConv");
  REQUIRE(qc->input(8)->name() == "b");
  REQUIRE(intsOf(qc->input(8)) == std::vector<int64_t>{-50, 50, 150});
  REQUIRE(nodesOf(m.graph, "DequantizeLinear").size() == 1);  // only dq_y is left
}

TEST_CASE("a bias DQ at another scale is requantized to x_scale*w_scale") {
  ConvSpec s;
  s.x_scale = 0.5f;
  s.w_scale = 0.25f;     // product 0.125, exact in binary
  s.bias_scale = 0.0625f;  // half the product: B' = b / 2, ties to even
  Reporter r;
  auto m = fused(convModel(s), r);
  auto* qc = only(m.graph, "QLinearConv");
  REQUIRE(qc->input(8)->initializer()->data_type() == TensorProto::INT32);
  // b = -50, 50, 150 at 0.0625 -> -25, 25, 75 at 0.125
  REQUIRE(intsOf(qc->input(8)) == std::vector<int64_t>{-25, 25, 75});
}

TEST_CASE("a float bias is quantized per output channel with ties to even") {
  ConvSpec s;
  s.x_scale = 0.5f;
  s.w_scale = 0.25f;
  s.per_channel = true;  // w_scale[c] = 0.25 * (c + 1): products 0.125, 0.25, 0.375
  Reporter r;
  auto m = fused(floatBias(s, {0.0625f, 0.375f, -0.9375f}), r);
  // 0.0625/0.125 = 0.5 -> 0; 0.375/0.25 = 1.5 -> 2; -0.9375/0.375 = -2.5 -> -2
  REQUIRE(intsOf(only(m.graph, "QLinearConv")->input(8)) == std::vector<int64_t>{0, 2, -2});
}

TEST_CASE("a bias that overflows int32 leaves the conv in QDQ form naming node and channel") {
  ConvSpec s;
  s.x_scale = 1e-6f;
  s.w_scale = 1e-6f;
  Reporter r;
  auto m = floatBias(s, {0.001f, 10.0f, -20.0f}).build();
  qconv::pairQdq(m, r.ctx);
  qconv::fuseQLinearConv(m, r.ctx);
  REQUIRE(nodesOf(m.graph, "QLinearConv").empty());
  REQUIRE(nodesOf(m.graph, "Conv").size() == 1);
  REQUIRE(r.ctx.refusals().size() == 1);
  const std::string msg = r.ctx.refusals()[0];
  REQUIRE(msg.rfind("conv_1: not fused: bias of output channel 1 is 10 and does not fit int32 at scale x_scale*w_scale", 0) == 0);
  REQUIRE(msg.find("(2 channel(s) overflow)") != std::string::npos);
  REQUIRE(msg.find("--raise-weight-scale") != std::string::npos);
}

TEST_CASE("a bias that is not finite leaves the conv in QDQ form") {
  Reporter r;
  auto m = floatBias({}, {0.5f, std::numeric_limits<float>::quiet_NaN(), 1.0f}).build();
  qconv::pairQdq(m, r.ctx);
  qconv::fuseQLinearConv(m, r.ctx);
  REQUIRE(nodesOf(m.graph, "QLinearConv").empty());
  REQUIRE(r.ctx.refusals() == std::vector<std::string>{"conv_1: not fused: bias of output channel 1 is nan"});
}

TEST_CASE("raising a weight scale needs a weight zero point of 0") {
  ConvSpec s;
  s.x_scale = 1e-6f;
  s.w_scale = 1e-6f;
  Reporter r(qconv::PassOptions{true});
  auto b = floatBias(s, {0.001f, 10.0f, -20.0f});
  b.ints("w_zp1", TensorProto::INT8, {}, {1});
  for (auto& n : *b.graph().mutable_node())
    if (n.name() == "dq_w") n.set_input(2, "w_zp1");
  auto m = b.build();
  qconv::pairQdq(m, r.ctx);
  qconv::fuseQLinearConv(m, r.ctx);
  REQUIRE(nodesOf(m.graph, "QLinearConv").empty());
  REQUIRE(r.ctx.refusals() ==
          std::vector<std::string>{"conv_1: not fused: cannot raise the weight scale: weight zero point is not constant 0"});
}

TEST_CASE("with raise_weight_scale, only the overflowing channels and reports each") {
  ConvSpec s;
  s.x_scale = 1e-6f;
  s.w_scale = 1e-6f;
  Reporter r(qconv::PassOptions{true});
  auto m = fused(floatBias(s, {0.001f, 10.0f, -20.0f}), r);
  REQUIRE(r.ctx.approximations().size() == 2);
  REQUIRE(r.ctx.approximations()[0].rfind("conv_1: output channel 1: bias 10 does not fit int32", 0) == 0);
  auto* qc = only(m.graph, "QLinearConv");
  auto ws = floatsOf(qc->input(4));
  REQUIRE(ws.size() == 3);
  REQUIRE(ws[0] == 1e-6f);  // channel 0 fits: unchanged
  for (int c : {1, 2}) {
    // the raised scale makes the bias fit: |B| / (s_x * s_w) <= 2^31 - 1
    REQUIRE(ws[c] > 1e-6f);
    const double b = c == 1 ? 10.0 : -20.0;
    REQUIRE(std::fabs(b / (double(1e-6f) * ws[c])) <= 2147483647.0);
  }
  auto bias = intsOf(qc->input(8));
  // channel 0 untouched: 0.001 / (1e-6 * 1e-6) = 1e9, up to float32's representation of the scales
  REQUIRE(std::llabs(bias[0] - 1000000000) < 1000);
  // weights of a raised channel shrink by the scale ratio; channel 0 keeps its values
  auto w = intsOf(qc->input(3));
  REQUIRE(w[0] == -3);  // convModel's weights are (i % 7) - 3
  for (size_t k = 18; k < 36; ++k) REQUIRE(std::abs(w[k]) <= 1);
}
