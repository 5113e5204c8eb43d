// The target passes on small graphs: fold-dequantized-constants gives the very floats the
// DequantizeLinear computed, check-target names each node a profile rules out with its reason,
// and requantize-per-tensor (canonical/) lists its worst error.
#include <catch2/catch.hpp>

#include "model_builder.h"
#include "qconv/ir/tensor.h"

using namespace qtest;

TEST_CASE("fold-dequantized-constants: a per-channel int32 bias becomes the floats its DequantizeLinear computes") {
  ConvSpec spec;
  spec.per_channel = true;
  auto m = convModel(spec).build();
  auto* dqb = nodesOf(m.graph, "DequantizeLinear")[2];
  const std::vector<int64_t> q = intsOf(dqb->input(0));
  const std::vector<float> s = floatsOf(dqb->input(1));
  Reporter r(forTarget("tensorrt"));
  qconv::foldDequantizedConstants(m, r.ctx);
  REQUIRE(nodesOf(m.graph, "DequantizeLinear").size() == 3);  // x, w, y
  const qconv::ir::Value* b = only(m.graph, "Conv")->input(2);
  REQUIRE(b->isConstant());
  const std::vector<float> folded = floatsOf(b);
  REQUIRE(folded.size() == q.size());
  for (size_t c = 0; c < q.size(); ++c) REQUIRE(folded[c] == static_cast<float>(q[c]) * s[c]);
  REQUIRE(r.ctx.counters().at("dequantized constants given in float") == 1);
}

TEST_CASE("fold-dequantized-constants: nothing changes for a target that dequantizes int32") {
  auto m = convModel(ConvSpec{}).build();
  Reporter r(forTarget("openvino"));
  qconv::foldDequantizedConstants(m, r.ctx);
  REQUIRE(nodesOf(m.graph, "DequantizeLinear").size() == 4);  // x, w, b, y
}

TEST_CASE("check-target: each per-channel DequantizeLinear is unconvertible for aidge, with Aidge's limit") {
  ConvSpec spec;
  spec.per_channel = true;
  auto m = convModel(spec).build();
  Reporter r(forTarget("aidge"));
  qconv::checkTarget(m, r.ctx);
  const auto said = r.ctx.reports(qconv::Report::Unconvertible);
  REQUIRE(said.size() == 2);  // the weight's and the bias's
  for (const auto& s : said) {
    REQUIRE(s.find("not run by --target aidge: it dequantizes per channel (--approximate requantizes such a constant "
                   "per tensor): Aidge 0.10.1 runs per-tensor quantization only") != std::string::npos);
  }
  REQUIRE_THROWS_WITH(qconv::refuseForeignOps(m, r.ctx), Catch::Contains("(and 1 more nodes refused)"));
}

TEST_CASE("check-target: TensorRT's zero points and types") {
  auto m = convModel(ConvSpec{}).build();  // uint8 x at zero point 128
  Reporter r(forTarget("tensorrt"));
  qconv::checkTarget(m, r.ctx);
  const auto said = r.ctx.reports(qconv::Report::Unconvertible);
  REQUIRE(!said.empty());
  REQUIRE(said[0].find("its zero point is 128: TensorRT takes symmetric quantization only") != std::string::npos);
}

TEST_CASE("check-target: without --target nothing is said") {
  ConvSpec spec;
  spec.per_channel = true;
  auto m = convModel(spec).build();
  Reporter r;
  qconv::checkTarget(m, r.ctx);
  REQUIRE(r.ctx.said().empty());
}

TEST_CASE("check-target: data movement on a type the target moves no data on, with the runtime's reason") {
  for (auto [type, zp, refused] : {std::tuple{TensorProto::UINT8, 128, true}, std::tuple{TensorProto::INT8, 0, false}}) {
    auto m = poolModel(type, zp).build();
    Reporter r(forTarget("iree"));
    qconv::pairQdq(m, r.ctx);  // types the Q's output
    qconv::checkTarget(m, r.ctx);
    const auto said = r.ctx.reports(qconv::Report::Unconvertible);
    REQUIRE(said.size() == (refused ? 1u : 0u));
    if (refused)
      REQUIRE(said[0] == "pool: not run by --target iree: MaxPool on uint8: IREE 3.13 moves 8-bit data on int8 only: it "
                         "computes MaxPool on uint8 wrong (as if signed: up to 221 steps off on over 80% of outputs)");
  }
}

TEST_CASE("fold-dequantized-constants: an 8-bit constant at a zero point other than 0 becomes its floats for tensorrt") {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1, 3});
  b.ints("c", TensorProto::INT8, {1, 3}, {-5, 0, 7});
  b.floats("cs", {}, {0.25f});
  b.ints("cz", TensorProto::INT8, {}, {3});
  b.node("DequantizeLinear", {"c", "cs", "cz"}, {"c_f"}, "dq_c");
  b.node("Add", {"x", "c_f"}, {"y"}, "add");
  b.output("y", TensorProto::FLOAT);
  auto m = b.build();
  Reporter r(forTarget("tensorrt"));
  qconv::foldDequantizedConstants(m, r.ctx);
  REQUIRE(nodesOf(m.graph, "DequantizeLinear").empty());
  REQUIRE(floatsOf(only(m.graph, "Add")->input(1)) == std::vector<float>{-2.0f, -0.75f, 1.0f});
}

TEST_CASE("requantize-symmetric: zero point 0 at a scale covering the old range, a Clip keeping its saturation") {
  ConvSpec spec;  // x and y uint8 at zero point 128, shifted to int8 at 0 first: only y's is moved
  spec.y_zp = 10;
  auto m = convModel(spec).build();
  qconv::PassOptions o = forTarget("tensorrt", /*approximate=*/true);
  o.activation_type = o.weight_type = TensorProto::INT8;
  Reporter r(o);
  qconv::pairQdq(m, r.ctx);
  qconv::shiftTypes(m, r.ctx);
  qconv::requantizeSymmetric(m, r.ctx);
  auto* q = nodesOf(m.graph, "QuantizeLinear")[1];
  REQUIRE(intsOf(q->input(2)) == std::vector<int64_t>{0});
  // y was uint8 at 10 (int8 at -118) at 0.1: [-1.0, 24.5] -> s' = 0.1 * 245 / 127
  REQUIRE(floatsOf(q->input(1))[0] == Approx(0.1f * 245.0f / 127.0f));
  const qconv::ir::Node* clip = q->input(0)->producer();
  REQUIRE(clip->opType() == "Clip");
  REQUIRE(floatsOf(clip->input(1))[0] == Approx(-1.0f));
  REQUIRE(floatsOf(clip->input(2))[0] == Approx(24.5f));
  for (auto* dq : nodesOf(m.graph, "DequantizeLinear"))
    if (dq->input(0) == q->output(0)) REQUIRE(intsOf(dq->input(2)) == std::vector<int64_t>{0});
  REQUIRE(r.ctx.approximations().size() == 1);
  REQUIRE(r.ctx.approximations()[0].find("worst rounding error") != std::string::npos);
}

TEST_CASE("fold-dequantized-constants: a LayerNormalization's dequantized scale is given in float for aidge and qnn, "
          "and check-ops then finds nothing") {
  for (const char* target : {"aidge", "qnn"}) {
    CAPTURE(target);
    ModelBuilder b(17);
    b.input("x", TensorProto::FLOAT, {1, 2, 4});
    b.floats("s", {}, {0.05f});
    b.ints("z", TensorProto::UINT8, {}, {128});
    b.ints("g_q", TensorProto::INT8, {4}, {100, -7, 127, 64});
    b.floats("g_s", {}, {0.0123f});
    b.ints("b_q", TensorProto::INT32, {4}, {-20000, 5, 16777217, 3});
    b.floats("b_s", {}, {0.000615f});
    b.node("QuantizeLinear", {"x", "s", "z"}, {"xq"}, "q_x");
    b.node("DequantizeLinear", {"xq", "s", "z"}, {"xf"}, "dq_x");
    b.node("DequantizeLinear", {"g_q", "g_s"}, {"g"}, "dq_g");
    b.node("DequantizeLinear", {"b_q", "b_s"}, {"bias"}, "dq_b");
    b.node("LayerNormalization", {"xf", "g", "bias"}, {"yf"}, "ln");
    b.node("QuantizeLinear", {"yf", "s", "z"}, {"yq"}, "q_y");
    b.node("DequantizeLinear", {"yq", "s", "z"}, {"y"}, "dq_y");
    b.output("y", TensorProto::FLOAT);
    auto m = b.build();
    {
      Reporter before(forTarget(target));
      qconv::checkOps(m, before.ctx);
      const auto said = before.ctx.reports(qconv::Report::Unconvertible);
      REQUIRE(said.size() == 1);
      REQUIRE(said[0].rfind("ln: not run by --target ", 0) == 0);
    }
    Reporter r(forTarget(target));
    qconv::foldDequantizedConstants(m, r.ctx);
    REQUIRE(r.ctx.counters().at("dequantized constants given in float") == 2);
    const qconv::ir::Node* ln = only(m.graph, "LayerNormalization");
    REQUIRE(ln->input(1)->isConstant());
    const std::vector<float> g = floatsOf(ln->input(1));
    const std::vector<float> bias = floatsOf(ln->input(2));
    const std::vector<int64_t> gq{100, -7, 127, 64}, bq{-20000, 5, 16777217, 3};
    for (size_t i = 0; i < 4; ++i) {
      REQUIRE(g[i] == static_cast<float>(gq[i]) * 0.0123f);
      REQUIRE(bias[i] == static_cast<float>(bq[i]) * 0.000615f);
    }
    Reporter after(forTarget(target));
    qconv::checkOps(m, after.ctx);
    REQUIRE(after.ctx.reports(qconv::Report::Unconvertible).empty());
  }
}
