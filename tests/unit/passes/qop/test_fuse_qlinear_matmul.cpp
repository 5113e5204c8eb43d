#include <catch2/catch.hpp>

#include "model_builder.h"

using namespace qtest;

namespace {
ModelBuilder matmulModel(bool per_column, int32_t a_type = TensorProto::UINT8, int64_t axis = 1) {
  ModelBuilder b;
  b.input("a", TensorProto::FLOAT, {2, 3});
  b.floats("a_s", {}, {0.1f});
  b.ints("a_z", a_type, {}, {a_type == TensorProto::UINT8 ? 100 : 0});
  b.node("QuantizeLinear", {"a", "a_s", "a_z"}, {"a_q"}, "q_a");
  b.node("DequantizeLinear", {"a_q", "a_s", "a_z"}, {"a_dq"}, "dq_a");
  b.ints("w", TensorProto::INT8, {3, 4}, {1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12});
  if (per_column) {
    b.floats("w_s", {4}, {0.01f, 0.02f, 0.03f, 0.04f});
    b.ints("w_z", TensorProto::INT8, {4}, {0, 0, 0, 0});
  } else {
    b.floats("w_s", {}, {0.01f});
    b.ints("w_z", TensorProto::INT8, {}, {0});
  }
  auto& dq = b.node("DequantizeLinear", {"w", "w_s", "w_z"}, {"w_dq"}, "dq_w");
  if (per_column) setInt(dq, "axis", axis);
  b.node("MatMul", {"a_dq", "w_dq"}, {"mm"}, "matmul_1");
  b.floats("y_s", {}, {0.2f});
  b.ints("y_z", TensorProto::UINT8, {}, {128});
  b.node("QuantizeLinear", {"mm", "y_s", "y_z"}, {"y_q"}, "q_y");
  b.node("DequantizeLinear", {"y_q", "y_s", "y_z"}, {"y"}, "dq_y");
  b.output("y", TensorProto::FLOAT);
  return b;
}

std::vector<std::string> fuse(qconv::ir::Model& m) {
  Reporter r;
  qconv::pairQdq(m, r.ctx);
  qconv::fuseQLinearMatMul(m, r.ctx);
  return r.ctx.refusals();
}
}  // namespace

TEST_CASE("DQ + DQ -> MatMul -> Q becomes QLinearMatMul with the documented operand layout") {
  for (bool perColumn : {false, true}) {
    auto m = matmulModel(perColumn).build();
    REQUIRE(fuse(m).empty());
    auto* q = only(m.graph, "QLinearMatMul");
    std::vector<std::string> names;
    for (auto* v : q->inputs()) names.push_back(v->name());
    REQUIRE(names == std::vector<std::string>{"a_q", "a_s", "a_z", "w", "w_s", "w_z", "y_s", "y_z"});
    REQUIRE(q->output(0)->name() == "y_q");
    REQUIRE(q->name() == "matmul_1");
    REQUIRE(nodesOf(m.graph, "MatMul").empty());
  }
}

TEST_CASE("refusal: B quantized per axis that is not its columns") {
  auto m = matmulModel(true, TensorProto::UINT8, 0).build();
  auto refusals = fuse(m);
  REQUIRE(refusals == std::vector<std::string>{
                          "matmul_1: not fused: B is quantized per axis but not per column of a rank-2 B"});
  REQUIRE(nodesOf(m.graph, "MatMul").size() == 1);
}

TEST_CASE("int8 A needs an int8 output") {
  auto m = matmulModel(false, TensorProto::INT8).build();  // output quantized to uint8
  REQUIRE(fuse(m) == std::vector<std::string>{"matmul_1: not fused: A is int8 but the output is uint8 "
                                              "(QLinearMatMul kernels take y of A's type)"});
  auto b = matmulModel(false, TensorProto::INT8);
  for (auto& t : *b.proto().mutable_graph()->mutable_initializer())
    if (t.name() == "y_z") {
      t.set_data_type(TensorProto::INT8);
      t.set_raw_data(std::string(1, '\0'));
    }
  auto m2 = b.build();
  REQUIRE(fuse(m2).empty());
  REQUIRE(nodesOf(m2.graph, "QLinearMatMul").size() == 1);
}
