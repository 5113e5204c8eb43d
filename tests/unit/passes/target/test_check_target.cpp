// The target passes on small graphs: fold-dequantized-constants gives the very floats the
// DequantizeLinear computed, check-target names each node a profile rules out with its reason,
// and requantize-per-tensor (canonical/) lists its worst error.
#include <catch2/catch.hpp>

#include "model_builder.h"
#include "qconv/ir/tensor.h"

using namespace qtest;

namespace {

qconv::PassOptions forTarget(const char* name, bool approximate = false) {
  qconv::PassOptions o;
  o.target = qconv::findTarget(name);
  o.approximate = approximate;
  return o;
}

}  // namespace

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
    ModelBuilder b;
    b.input("x", TensorProto::FLOAT, {1, 2, 4, 4});
    b.floats("s", {}, {0.1f});
    b.ints("z", type, {}, {zp});
    b.node("QuantizeLinear", {"x", "s", "z"}, {"x_q"}, "q_x");
    auto& pool = b.node("MaxPool", {"x_q"}, {"p_q"}, "pool");
    setInts(pool, "kernel_shape", {2, 2});
    setInts(pool, "strides", {2, 2});
    b.node("DequantizeLinear", {"p_q", "s", "z"}, {"y"}, "dq_y");
    b.output("y", TensorProto::FLOAT);
    auto m = b.build();
    qconv::PassOptions o;
    o.target = qconv::findTarget("iree");
    Reporter r(o);
    qconv::pairQdq(m, r.ctx);  // types the Q's output
    qconv::checkTarget(m, r.ctx);
    const auto said = r.ctx.reports(qconv::Report::Unconvertible);
    REQUIRE(said.size() == (refused ? 1u : 0u));
    if (refused)
      REQUIRE(said[0] == "pool: not run by --target iree: MaxPool on uint8: IREE 3.13 computes MaxPool on uint8 wrong (as "
                         "if signed: up to 221 steps off on over 80% of outputs)");
  }
}
