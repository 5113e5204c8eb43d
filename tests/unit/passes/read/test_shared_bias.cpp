// One int32 bias two QOp nodes read at two scales (shared_bias.h): verify names the later
// reader, and with --approximate requantize-shared-bias gives it the first one's bias at its own
// scale; refusals name the requirement that failed.
#include <catch2/catch.hpp>

#include <algorithm>

#include "model_builder.h"
#include "qconv/analysis/verify.h"
#include "qconv/ir/tensor.h"
#include "qconv/passes/common/shared_bias.h"

using namespace qtest;
using qconv::ir::Node;

namespace {

/// x (u8) -> QLinearConv conv_0 (x at 0.5) and, on x2 (u8 at `x2_scale`), QLinearConv conv_1,
/// both reading w (int8 at w_s per channel) and one int32 bias B.
ModelBuilder twoConvs(float x2_scale, std::vector<int64_t> bias = {10, -21, 30}) {
  ModelBuilder b(13);
  b.input("x", TensorProto::UINT8, {1, 2, 3, 3});
  b.input("x2", TensorProto::UINT8, {1, 2, 3, 3});
  b.floats("x_s", {}, {0.5f});
  b.floats("x2_s", {}, {x2_scale});
  b.ints("zp", TensorProto::UINT8, {}, {128});
  b.ints("w", TensorProto::INT8, {3, 2, 1, 1}, {1, -2, 3, -4, 5, -6});
  b.floats("w_s", {3}, {0.25f, 0.125f, 0.5f});
  b.ints("w_zp", TensorProto::INT8, {3}, {0, 0, 0});
  b.floats("y_s", {}, {0.75f});
  b.ints("B", TensorProto::INT32, {3}, bias);
  b.node("QLinearConv", {"x", "x_s", "zp", "w", "w_s", "w_zp", "y_s", "zp", "B"}, {"y0"}, "conv_0");
  b.node("QLinearConv", {"x2", "x2_s", "zp", "w", "w_s", "w_zp", "y_s", "zp", "B"}, {"y1"}, "conv_1");
  b.output("y0", TensorProto::UINT8);
  b.output("y1", TensorProto::UINT8);
  return b;
}

qconv::PassOptions approximating() {
  qconv::PassOptions o;
  o.approximate = true;
  return o;
}


}  // namespace

TEST_CASE("shared bias: two QLinearConvs reading one int32 bias at two scales are found, the first one first") {
  auto m = twoConvs(2.0f).build();
  const auto shared = qconv::sharedBiases(m.graph);
  REQUIRE(shared.size() == 1);
  REQUIRE(shared[0].bias->name() == "B");
  REQUIRE(shared[0].reads.size() == 2);
  REQUIRE(shared[0].reads[0].node->name() == "conv_0");
  REQUIRE(shared[0].reads[0].scale == std::vector<float>{0.125f, 0.0625f, 0.25f});
  REQUIRE(shared[0].reads[1].scale == std::vector<float>{0.5f, 0.25f, 1.0f});
}

TEST_CASE("shared bias: readers at one scale share it rightly, and nothing is found") {
  auto m = twoConvs(0.5f).build();
  REQUIRE(qconv::sharedBiases(m.graph).empty());
  const auto findings = qconv::analysis::verifyModel(m, {});
  REQUIRE(std::none_of(findings.begin(), findings.end(), [](const auto& f) { return f.kind == "representation"; }));
}

TEST_CASE("shared bias: verify names the later reader, both scales and the remedy") {
  auto m = twoConvs(2.0f).build();
  const auto findings = qconv::analysis::verifyModel(m, {});
  auto f = std::find_if(findings.begin(), findings.end(), [](const auto& x) { return x.kind == "representation"; });
  REQUIRE(f != findings.end());
  REQUIRE(f->node == "conv_1");
  REQUIRE(f->tensor == "B");
  REQUIRE(f->severity == qconv::analysis::Severity::Error);
  REQUIRE_THAT(f->message, Catch::Contains("'B' is also the int32 bias of conv_0, at x_scale * w_scale 3 per channel, "
                                           "0.0625 .. 0.25; here it is at 3 per channel, 0.25 .. 1"));
  REQUIRE_THAT(f->message, Catch::Contains("convert --approximate gives it the first one's bias at its own scale"));
}

TEST_CASE("requantize-shared-bias: without --approximate the model keeps its math") {
  auto m = twoConvs(2.0f).build();
  Reporter r;
  qconv::requantizeSharedBias(m, r.ctx);
  REQUIRE(r.ctx.approximations().empty());
  REQUIRE(nodesOf(m.graph, "QLinearConv").size() == 2);
  for (const Node* n : m.graph.nodes()) REQUIRE(n->input(8)->name() == "B");
}

TEST_CASE("requantize-shared-bias: the later reader gets the first one's bias at its own scale, listed") {
  auto m = twoConvs(2.0f).build();
  Reporter r(approximating());
  qconv::requantizeSharedBias(m, r.ctx);
  const Node* conv0 = nullptr;
  const Node* conv1 = nullptr;
  for (const Node* n : m.graph.nodes()) (n->name() == "conv_0" ? conv0 : conv1) = n;
  REQUIRE(conv0->input(8)->name() == "B");
  REQUIRE(intsOf(conv0->input(8)) == std::vector<int64_t>{10, -21, 30});
  // B * (0.125, 0.0625, 0.25) / (0.5, 0.25, 1): 2.5 -> 2 (ties to even), -5.25 -> -5, 7.5 -> 8
  REQUIRE(intsOf(conv1->input(8)) == std::vector<int64_t>{2, -5, 8});
  REQUIRE(conv1->input(8)->elemType() == TensorProto::INT32);
  REQUIRE(r.ctx.approximations().size() == 1);
  REQUIRE_THAT(r.ctx.approximations()[0],
               Catch::StartsWith("conv_1: its int32 bias 'B' was quantized for conv_0 (x_scale * w_scale 3 per channel, "
                                 "0.0625 .. 0.25), and it reads it at 3 per channel, 0.25 .. 1: given its own, that bias "
                                 "at its own scale (worst 0.50 steps of it)"));
  REQUIRE(qconv::sharedBiases(m.graph).empty());
}

TEST_CASE("requantize-shared-bias: a bias that does not fit int32 at the later scale is refused, naming why") {
  auto m = twoConvs(1e-9f, {2000000000, 0, 0}).build();
  Reporter r(approximating());
  qconv::requantizeSharedBias(m, r.ctx);
  REQUIRE(r.ctx.approximations().empty());
  REQUIRE(r.ctx.refusals().size() == 1);
  REQUIRE_THAT(r.ctx.refusals()[0], Catch::StartsWith("conv_1: bias not requantized: the bias 'B' of conv_0 is "));
  REQUIRE_THAT(r.ctx.refusals()[0], Catch::EndsWith("outside int32"));
}
