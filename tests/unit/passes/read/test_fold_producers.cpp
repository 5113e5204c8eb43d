// fold-producers: expected values come from the ONNX formulas worked by hand
// (QuantizeLinear: saturate(round_half_even(x / s) + zp); Cast float->int truncates).
#include <catch2/catch.hpp>

#include "model_builder.h"

using namespace qtest;

namespace {
ModelBuilder weightBehindQuantize(const std::vector<float>& w, float scale, int64_t zp, int32_t type) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {static_cast<int64_t>(w.size())});
  b.floats("w_f", {static_cast<int64_t>(w.size())}, w);
  b.floats("s", {}, {scale});
  b.ints("zp", type, {}, {zp});
  b.node("QuantizeLinear", {"w_f", "s", "zp"}, {"w_q"}, "quantize_w");
  b.node("DequantizeLinear", {"w_q", "s", "zp"}, {"w_dq"}, "dq_w");
  b.node("Add", {"x", "w_dq"}, {"y"}, "add");
  b.output("y", TensorProto::FLOAT);
  return b;
}
}  // namespace

TEST_CASE("QuantizeLinear on a float initializer becomes an integer initializer (ties to even, saturation)") {
  auto m = weightBehindQuantize({-1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 300.0f, -300.0f}, 1.0f, 0, TensorProto::INT8).build();
  Reporter r;
  qconv::foldProducers(m, r.ctx);
  REQUIRE(nodesOf(m.graph, "QuantizeLinear").empty());
  auto* dq = only(m.graph, "DequantizeLinear");
  REQUIRE(dq->input(0)->isConstant());
  REQUIRE(dq->input(0)->initializer()->data_type() == TensorProto::INT8);
  REQUIRE(intsOf(dq->input(0)) == std::vector<int64_t>{-2, 0, 0, 2, 2, 127, -128});
  // the float weights nobody reads any more are gone
  for (auto* v : m.graph.initializers()) REQUIRE(v->name() != "w_f");
}

TEST_CASE("uint8 QuantizeLinear adds the zero point after rounding") {
  auto m = weightBehindQuantize({0.25f, 0.75f, -1.0f, 10.0f}, 0.5f, 10, TensorProto::UINT8).build();
  Reporter r;
  qconv::foldProducers(m, r.ctx);
  // 0.25/0.5 = 0.5 -> 0; 0.75/0.5 = 1.5 -> 2; -2; 20 -> +10 each
  REQUIRE(intsOf(only(m.graph, "DequantizeLinear")->input(0)) == std::vector<int64_t>{10, 12, 8, 30});
}

TEST_CASE("per-axis QuantizeLinear uses each channel's scale") {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {2, 2});
  b.floats("w_f", {2, 2}, {1.0f, 3.0f, 1.0f, 3.0f});
  b.floats("s", {2}, {1.0f, 2.0f});
  b.ints("zp", TensorProto::INT8, {2}, {0, 0});
  auto& q = b.node("QuantizeLinear", {"w_f", "s", "zp"}, {"w_q"}, "q");
  setInt(q, "axis", 0);
  auto& dq = b.node("DequantizeLinear", {"w_q", "s", "zp"}, {"w_dq"}, "dq");
  setInt(dq, "axis", 0);
  b.node("Add", {"x", "w_dq"}, {"y"}, "add");
  b.output("y", TensorProto::FLOAT);
  auto m = b.build();
  Reporter r;
  qconv::foldProducers(m, r.ctx);
  // row 0 at scale 1: 1, 3; row 1 at scale 2: 0.5 -> 0 (tie to even), 1.5 -> 2
  REQUIRE(intsOf(only(m.graph, "DequantizeLinear")->input(0)) == std::vector<int64_t>{1, 3, 0, 2});
}

TEST_CASE("a Div -> Round -> Cast(int32) bias chain and Constant nodes fold") {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {3});
  b.floats("bias_f", {3}, {0.25f, -0.75f, 1.0f});
  auto& c = b.node("Constant", {}, {"bias_scale"}, "const_scale");
  auto* a = c.add_attribute();
  a->set_name("value_float");
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(0.5f);
  b.node("Div", {"bias_f", "bias_scale"}, {"d"}, "div");
  b.node("Round", {"d"}, {"r"}, "round");
  auto& cast = b.node("Cast", {"r"}, {"b_i"}, "cast");
  setInt(cast, "to", TensorProto::INT32);
  b.node("DequantizeLinear", {"b_i", "bias_scale"}, {"b"}, "dq_b");
  b.node("Add", {"x", "b"}, {"y"}, "add");
  b.output("y", TensorProto::FLOAT);
  auto m = b.build();
  Reporter r;
  qconv::foldProducers(m, r.ctx);
  for (const char* op : {"Constant", "Div", "Round", "Cast"}) REQUIRE(nodesOf(m.graph, op).empty());
  auto* dq = only(m.graph, "DequantizeLinear");
  REQUIRE(dq->input(0)->initializer()->data_type() == TensorProto::INT32);
  // 0.5 -> 0 (tie to even), -1.5 -> -2, 2
  REQUIRE(intsOf(dq->input(0)) == std::vector<int64_t>{0, -2, 2});
  REQUIRE(floatsOf(dq->input(1)) == std::vector<float>{0.5f});
}

TEST_CASE("folding declines what it cannot compute exactly, and what a graph output or graph input needs") {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1});
  b.floats("big", {1}, {3e9f});
  auto& cast = b.node("Cast", {"big"}, {"c"}, "cast_overflow");
  setInt(cast, "to", TensorProto::INT32);
  b.floats("k", {1}, {2.0f});
  b.node("Mul", {"k", "k"}, {"kk"}, "mul_to_output");
  b.node("Mul", {"x", "k"}, {"xk"}, "mul_of_input");
  b.output("c", TensorProto::INT32);
  b.output("kk", TensorProto::FLOAT);
  b.output("xk", TensorProto::FLOAT);
  auto m = b.build();
  Reporter r;
  qconv::foldProducers(m, r.ctx);
  REQUIRE(nodesOf(m.graph, "Cast").size() == 1);
  REQUIRE(nodesOf(m.graph, "Mul").size() == 2);
}

TEST_CASE("an out-of-range Cast that other nodes read is left in place with a note") {
  ModelBuilder b;
  b.input("x", TensorProto::INT32, {1});
  b.floats("big", {1}, {3e9f});
  auto& cast = b.node("Cast", {"big"}, {"c"}, "cast_overflow");
  setInt(cast, "to", TensorProto::INT32);
  b.node("Add", {"x", "c"}, {"y"}, "add");
  b.output("y", TensorProto::INT32);
  auto m = b.build();
  Reporter r;
  qconv::foldProducers(m, r.ctx);
  REQUIRE(nodesOf(m.graph, "Cast").size() == 1);
  INFO(r.text.str());
  REQUIRE(r.text.str().find("cast_overflow: not folded: Cast of 3000000000 to int32 is out of range") != std::string::npos);
}

TEST_CASE("an initializer that is also a graph input is not a constant") {
  auto b = weightBehindQuantize({1.0f}, 1.0f, 0, TensorProto::INT8);
  auto* in = b.graph().add_input();
  in->set_name("w_f");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(TensorProto::FLOAT);
  auto m = b.build();
  Reporter r;
  qconv::foldProducers(m, r.ctx);
  REQUIRE(nodesOf(m.graph, "QuantizeLinear").size() == 1);
}
