// The IR's mutators keep def-use links; misuse is our bug and throws an internal error.
#include <catch2/catch.hpp>
#include <cmath>

#include "model_builder.h"
#include "qconv/diag.h"
#include "qconv/ir/tensor.h"

using namespace qtest;
using qconv::ir::Graph;
using qconv::ir::Value;

namespace {
ModelBuilder chain() {  // x -> Relu -> a -> Neg -> b -> Abs -> y
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {4});
  b.node("Relu", {"x"}, {"a"}, "relu");
  b.node("Neg", {"a"}, {"b"}, "neg");
  b.node("Abs", {"b"}, {"y"}, "abs");
  b.output("y", TensorProto::FLOAT, {4});
  return b;
}
}  // namespace

TEST_CASE("parse links producers and uses") {
  auto m = chain().build();
  Graph& g = m.graph;
  auto* relu = only(g, "Relu");
  auto* neg = only(g, "Neg");
  REQUIRE(relu->output(0)->producer() == relu);
  REQUIRE(relu->output(0)->uses().size() == 1);
  REQUIRE(relu->output(0)->uses()[0].node == neg);
  REQUIRE(relu->output(0)->uses()[0].index == 0);
  REQUIRE(g.inputs()[0]->isGraphInput());
  REQUIRE(g.outputs()[0]->isGraphOutput());
}

TEST_CASE("replaceAllUsesWith, destroyNode and pruneIfDead keep links consistent") {
  auto m = chain().build();
  Graph& g = m.graph;
  auto* relu = only(g, "Relu");
  auto* neg = only(g, "Neg");
  auto* abs = only(g, "Abs");
  Value* a = relu->output(0);
  Value* b = neg->output(0);
  g.replaceAllUsesWith(b, a);  // Abs now reads Relu's output directly
  REQUIRE(abs->input(0) == a);
  REQUIRE(b->uses().empty());
  REQUIRE(a->uses().size() == 2);
  g.pruneIfDead(b);  // Neg is dead: destroyed, and its input loses that use
  REQUIRE_FALSE(g.isAlive(neg));
  REQUIRE(nodesOf(g, "Neg").empty());
  REQUIRE(a->uses().size() == 1);
  REQUIRE(a->uses()[0].node == abs);
}

TEST_CASE("createNode and takeOutput move a value to a new producer") {
  auto m = chain().build();
  Graph& g = m.graph;
  auto* abs = only(g, "Abs");
  Value* y = abs->output(0);
  auto* sq = g.createNode("Sqrt", "", {abs->input(0)}, 1, abs);
  g.takeOutput(sq, 0, y);
  REQUIRE(y->producer() == sq);
  REQUIRE(abs->output(0) != y);
  g.destroyNode(abs);
  REQUIRE(nodesOf(g, "Abs").empty());
  // the new node sits where Abs was: after Neg
  std::vector<std::string> order;
  for (const auto& n : g.nodes()) order.push_back(n->opType());
  REQUIRE(order == std::vector<std::string>{"Relu", "Neg", "Sqrt"});
}

TEST_CASE("nextNode follows the order as nodes come and go") {
  auto m = chain().build();
  Graph& g = m.graph;
  auto* relu = only(g, "Relu");
  auto* neg = only(g, "Neg");
  auto* abs = only(g, "Abs");
  REQUIRE(g.nextNode(relu) == neg);
  REQUIRE(g.nextNode(abs) == nullptr);
  auto* sq = g.createNode("Sqrt", "", {neg->output(0)}, 1, abs);  // between Neg and Abs
  REQUIRE(g.nextNode(neg) == sq);
  REQUIRE(g.nextNode(sq) == abs);
  auto* last = g.createNode("Sqrt", "", {abs->output(0)}, 1, nullptr);
  REQUIRE(g.nextNode(abs) == last);
  REQUIRE(g.nextNode(last) == nullptr);
}

TEST_CASE("mutator misuse is an internal error, not a crash") {
  auto m = chain().build();
  Graph& g = m.graph;
  auto* neg = only(g, "Neg");
  try {
    g.destroyNode(neg);  // its output is still read by Abs
    FAIL("destroyNode accepted a node whose output is used");
  } catch (const qconv::Error& e) {
    REQUIRE(e.code() == qconv::ExitCode::Internal);
    REQUIRE(std::string(e.what()).find("still used") != std::string::npos);
  }
  auto* abs = only(g, "Abs");
  REQUIRE_THROWS_AS(g.replaceAllUsesWith(abs->output(0), neg->output(0)), qconv::Error);  // a graph output
}

TEST_CASE("a graph output is never pruned") {
  auto m = chain().build();
  Graph& g = m.graph;
  Value* y = g.outputs()[0];
  g.pruneIfDead(y);
  REQUIRE(g.isAlive(y->producer()));
}

TEST_CASE("float16 and bfloat16 tensors read as the floats of the same values") {
  qconv::ir::Graph g;
  auto half = std::make_unique<onnx::TensorProto>();
  half->set_data_type(TensorProto::FLOAT16);
  half->add_dims(5);
  const uint16_t bits[] = {0x3C00, 0xC000, 0x0001, 0x7BFF, 0x3555};  // 1, -2, 2^-24, 65504, 0.333251953125
  half->set_raw_data(std::string(reinterpret_cast<const char*>(bits), sizeof bits));
  qconv::ir::Value* h = g.addValue("h");
  g.setInitializer(h, std::move(half));
  std::string why;
  REQUIRE(qconv::ir::readHalfAsFloats(*h, &why) ==
          std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24), 65504.0f, 0.333251953125f});
  auto bf = std::make_unique<onnx::TensorProto>();
  bf->set_data_type(TensorProto::BFLOAT16);
  bf->add_dims(2);
  bf->add_int32_data(0x3F80);  // 1
  bf->add_int32_data(0xC0A0);  // -5
  qconv::ir::Value* b = g.addValue("b");
  g.setInitializer(b, std::move(bf));
  REQUIRE(qconv::ir::readHalfAsFloats(*b, &why) == std::vector<float>{1.0f, -5.0f});
  REQUIRE_FALSE(qconv::ir::readFloats(*b, &why));  // the float readers stay float-only
}
