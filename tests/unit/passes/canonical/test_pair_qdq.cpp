#include <catch2/catch.hpp>

#include "model_builder.h"

using namespace qtest;

namespace {
// x -Q1-> q1 -DQ1-> f -Q2-> q2 -DQ2-> y, with Q2's parameters chosen by the test.
ModelBuilder doubleQdq(float second_scale, bool q2_is_output = false) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {4});
  b.floats("s", {}, {0.1f});
  b.floats("s2", {}, {second_scale});
  b.ints("z", TensorProto::UINT8, {}, {128});
  b.node("QuantizeLinear", {"x", "s", "z"}, {"q1"}, "q1");
  b.node("DequantizeLinear", {"q1", "s", "z"}, {"f"}, "dq1");
  b.node("QuantizeLinear", {"f", "s2", "z"}, {"q2"}, "q2");
  b.node("DequantizeLinear", {"q2", "s2", "z"}, {"y"}, "dq2");
  b.output("y", TensorProto::FLOAT);
  if (q2_is_output) b.output("q2", TensorProto::UINT8);
  return b;
}
}  // namespace

TEST_CASE("pair-qdq gives a quantized output of unknown type its zero point's type") {
  auto b = doubleQdq(0.2f);
  b.ints("z8", TensorProto::INT8, {}, {0});
  b.graph().mutable_node(0)->set_input(2, "z8");
  b.graph().mutable_node(1)->set_input(2, "z8");
  auto m = b.build();
  auto* q1 = nodesOf(m.graph, "QuantizeLinear")[0];
  REQUIRE(q1->output(0)->elemType() == 0);  // the builder declares no value_info for q1
  Reporter r;
  qconv::pairQdq(m, r.ctx);
  REQUIRE(q1->output(0)->elemType() == TensorProto::INT8);
}

TEST_CASE("DQ -> Q with identical parameters collapses") {
  auto m = doubleQdq(0.1f).build();
  Reporter r;
  qconv::pairQdq(m, r.ctx);
  REQUIRE(nodesOf(m.graph, "QuantizeLinear").size() == 1);
  auto* dq = only(m.graph, "DequantizeLinear");
  REQUIRE(dq->name() == "dq2");
  REQUIRE(dq->input(0) == only(m.graph, "QuantizeLinear")->output(0));
}

TEST_CASE("DQ -> Q with different parameters, or whose Q is a graph output, stays") {
  auto m = doubleQdq(0.2f).build();
  Reporter r;
  qconv::pairQdq(m, r.ctx);
  REQUIRE(nodesOf(m.graph, "QuantizeLinear").size() == 2);
  auto m2 = doubleQdq(0.1f, true).build();
  qconv::pairQdq(m2, r.ctx);
  REQUIRE(nodesOf(m2.graph, "QuantizeLinear").size() == 2);
}
