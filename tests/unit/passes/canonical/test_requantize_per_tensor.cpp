// requantize-per-tensor: for a target without per-channel quantization and only with
// --approximate, a per-channel constant becomes per tensor, each listed with its worst error.
#include <catch2/catch.hpp>

#include <cmath>

#include "model_builder.h"
#include "qconv/ir/tensor.h"

using namespace qtest;

TEST_CASE("requantize-per-tensor: per-channel weights at one scale, the error bounded and listed") {
  ConvSpec spec;
  spec.per_channel = true;
  auto m = convModel(spec).build();
  auto* dqw = nodesOf(m.graph, "DequantizeLinear")[1];
  const std::vector<int64_t> q0 = intsOf(dqw->input(0));
  const std::vector<float> s0 = floatsOf(dqw->input(1));
  qconv::PassOptions o;
  o.target = qconv::findTarget("aidge");
  o.approximate = true;
  Reporter r(o);
  qconv::requantizePerTensor(m, r.ctx);
  const std::vector<float> s1 = floatsOf(dqw->input(1));
  REQUIRE(s1.size() == 1);
  REQUIRE(dqw->attribute("axis") == nullptr);
  const std::vector<int64_t> q1 = intsOf(dqw->input(0));
  const size_t per = q0.size() / s0.size();
  for (size_t i = 0; i < q0.size(); ++i) {  // within half a new step of the value it stood for
    const float was = static_cast<float>(q0[i]) * s0[i / per];
    REQUIRE(std::abs(static_cast<float>(q1[i]) * s1[0] - was) <= s1[0] / 2 * 1.0001f);
  }
  const auto listed = r.ctx.approximations();
  REQUIRE(listed.size() == 2);  // weight and bias
  REQUIRE(listed[0].find("requantized per tensor") != std::string::npos);
  REQUIRE(listed[0].find("worst error") != std::string::npos);
}

TEST_CASE("requantize-per-tensor: nothing without --approximate, nor for a target that runs per channel") {
  ConvSpec spec;
  spec.per_channel = true;
  for (auto [target, approximate] : {std::pair{"aidge", false}, std::pair{"openvino", true}}) {
    auto m = convModel(spec).build();
    qconv::PassOptions o;
    o.target = qconv::findTarget(target);
    o.approximate = approximate;
    Reporter r(o);
    qconv::requantizePerTensor(m, r.ctx);
    REQUIRE(floatsOf(nodesOf(m.graph, "DequantizeLinear")[1]->input(1)).size() == 3);
  }
}
