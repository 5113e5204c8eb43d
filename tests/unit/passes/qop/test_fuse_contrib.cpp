// fuse-contrib (--contrib): QDQ groups become onnxruntime's com.microsoft ops, laid out by
// qop_forms.h's table; each refusal names the requirement that failed; off without --contrib.
#include <catch2/catch.hpp>

#include "model_builder.h"
#include "qconv/ir/tensor.h"

using namespace qtest;
using qconv::ir::Node;

namespace {

qconv::PassOptions withContrib() {
  qconv::PassOptions o;
  o.contrib = true;
  return o;
}

/// a, b u8 [1,4] -> DQ(0.5, 128), DQ(0.25, 120) -> op -> Q(0.75, 100) -> y
ModelBuilder binary(const std::string& op, int32_t y_type = TensorProto::UINT8) {
  ModelBuilder b;
  b.input("a", TensorProto::UINT8, {1, 4});
  b.input("b", TensorProto::UINT8, {1, 4});
  b.floats("sa", {}, {0.5f});
  b.floats("sb", {}, {0.25f});
  b.floats("sy", {}, {0.75f});
  b.ints("za", TensorProto::UINT8, {}, {128});
  b.ints("zb", TensorProto::UINT8, {}, {120});
  b.ints("zy", y_type, {}, {100});
  b.node("DequantizeLinear", {"a", "sa", "za"}, {"af"}, "dqa");
  b.node("DequantizeLinear", {"b", "sb", "zb"}, {"bf"}, "dqb");
  b.node(op, {"af", "bf"}, {"f"}, "op");
  b.node("QuantizeLinear", {"f", "sy", "zy"}, {"y"}, "q");
  b.output("y", y_type);
  return b;
}

/// x u8 `shape` -> DQ(0.5, 128) -> op (named `name`) -> Q(0.5, 128) -> y; returns the builder
/// and the op, for attributes.
ModelBuilder unary(const std::string& op, const std::string& name, const std::vector<int64_t>& shape,
                   onnx::NodeProto** node) {
  ModelBuilder b;
  b.input("x", TensorProto::UINT8, shape);
  b.floats("s", {}, {0.5f});
  b.ints("z", TensorProto::UINT8, {}, {128});
  b.node("DequantizeLinear", {"x", "s", "z"}, {"xf"}, "dq");
  b.node(op, {"xf"}, {"f"}, name);
  b.node("QuantizeLinear", {"f", "s", "z"}, {"y"}, "q");
  b.output("y", TensorProto::UINT8);
  *node = b.graph().mutable_node(1);
  return b;
}

/// What fuse-contrib refuses in the model `b` builds.
std::vector<std::string> refusalsOf(ModelBuilder& b) {
  auto m = b.build();
  Reporter r(withContrib());
  qconv::fuseContrib(m, r.ctx);
  return r.ctx.refusals();
}

std::vector<std::string> inputNames(const Node* n) {
  std::vector<std::string> out;
  for (const auto* v : n->inputs()) out.push_back(v ? v->name() : "");
  return out;
}

}  // namespace

TEST_CASE("Add between DQs and a Q becomes QLinearAdd, its operands as the table lays them out") {
  auto m = binary("Add").build();
  Reporter r(withContrib());
  qconv::fuseContrib(m, r.ctx);
  const Node* add = only(m.graph, "QLinearAdd");
  REQUIRE(add->domain() == "com.microsoft");
  REQUIRE(add->name() == "op");
  REQUIRE(inputNames(add) == std::vector<std::string>{"a", "sa", "za", "b", "sb", "zb", "sy", "zy"});
  REQUIRE(add->output(0) == m.graph.outputs()[0]);
  REQUIRE(m.graph.nodes().size() == 1);
  REQUIRE(r.ctx.counters().at("com.microsoft QLinearAdd") == 1);
}

TEST_CASE("fuse-contrib does nothing without --contrib") {
  auto m = binary("Mul").build();
  Reporter r;
  qconv::fuseContrib(m, r.ctx);
  REQUIRE(only(m.graph, "Mul"));
  REQUIRE(r.ctx.refusals().empty());
}

TEST_CASE("Concat of dequantized inputs becomes QLinearConcat with the output parameters first") {
  auto b = binary("Concat");
  setInt(*b.graph().mutable_node(2), "axis", 1);
  auto m = b.build();
  Reporter r(withContrib());
  qconv::fuseContrib(m, r.ctx);
  const Node* cat = only(m.graph, "QLinearConcat");
  REQUIRE(inputNames(cat) == std::vector<std::string>{"sy", "zy", "a", "sa", "za", "b", "sb", "zb"});
}

TEST_CASE("Softmax becomes QLinearSoftmax with its axis written out and the opset of the model") {
  ModelBuilder b;  // opset 13 by default: axis -1
  b.input("x", TensorProto::INT8, {2, 5});
  b.floats("s", {}, {0.1f});
  b.floats("sy", {}, {1.0f / 255});  // floor(1 / y_s) - 128 <= 127: onnxruntime cannot wrap
  b.ints("z", TensorProto::INT8, {}, {0});
  b.ints("zy", TensorProto::INT8, {}, {-128});
  b.node("DequantizeLinear", {"x", "s", "z"}, {"xf"}, "dq");
  b.node("Softmax", {"xf"}, {"f"}, "sm");
  b.node("QuantizeLinear", {"f", "sy", "zy"}, {"y"}, "q");
  b.output("y", TensorProto::INT8);
  auto m = b.build();
  Reporter r(withContrib());
  qconv::fuseContrib(m, r.ctx);
  const Node* sm = only(m.graph, "QLinearSoftmax");
  REQUIRE(sm->attrInt("axis", 99) == -1);
  REQUIRE(sm->attrInt("opset", 0) == qconv::ir::defaultOpset(m));
}

TEST_CASE("fuse-contrib refusals name the requirement that failed") {
  SECTION("an attribute the contrib op does not take") {
    onnx::NodeProto* pool = nullptr;
    auto b = unary("AveragePool", "pool", {1, 1, 4, 4}, &pool);
    setInts(*pool, "kernel_shape", {2, 2});
    setInts(*pool, "dilations", {2, 2});
    REQUIRE(refusalsOf(b) == std::vector<std::string>{
                                    "pool: not fused: it has attribute 'dilations', which com.microsoft "
                                    "QLinearAveragePool does not take"});
  }
  SECTION("operands of two 8-bit types") {
    auto b = binary("Mul", TensorProto::INT8);
    REQUIRE(refusalsOf(b) == std::vector<std::string>{
                                    "op: not fused: A is uint8 but the output is int8 (com.microsoft QLinearMul "
                                    "takes one 8-bit type)"});
  }
  SECTION("an op onnxruntime's CPU provider has no kernel for") {
    onnx::NodeProto* mean = nullptr;
    auto b = unary("ReduceMean", "mean", {1, 2, 3}, &mean);
    setInts(*mean, "axes", {2});
    const auto refusals = refusalsOf(b);
    REQUIRE(refusals.size() == 1);
    REQUIRE(refusals[0].rfind("mean: not fused: onnxruntime has no com.microsoft QLinearReduceMean kernel", 0) == 0);
  }
  SECTION("an output read by something else than a QuantizeLinear") {
    auto b = binary("Add");
    b.graph().mutable_node(3)->set_op_type("Neg");
    b.graph().mutable_node(3)->clear_input();
    b.graph().mutable_node(3)->add_input("f");
    b.graph().mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(TensorProto::FLOAT);
    REQUIRE(refusalsOf(b) == std::vector<std::string>{
                                    "op: not fused: output goes to q (Neg), not to a QuantizeLinear"});
  }
}

TEST_CASE("Gemm with a C per row becomes QGemm, C requantized to int32 at alpha * a_scale * b_scale") {
  ModelBuilder b;
  b.input("a", TensorProto::UINT8, {2, 3});
  b.floats("sa", {}, {0.5f});
  b.ints("za", TensorProto::UINT8, {}, {128});
  b.ints("w", TensorProto::INT8, {3, 2}, {1, -2, 3, -4, 5, -6});
  b.floats("sw", {}, {0.25f});
  b.ints("zw", TensorProto::INT8, {}, {0});
  b.floats("c", {2, 2}, {0.25f, 0.5f, -1.0f, 3.0f});
  b.floats("sy", {}, {0.75f});
  b.ints("zy", TensorProto::UINT8, {}, {100});
  b.node("DequantizeLinear", {"a", "sa", "za"}, {"af"}, "dqa");
  b.node("DequantizeLinear", {"w", "sw", "zw"}, {"wf"}, "dqw");
  auto& gemm = b.node("Gemm", {"af", "wf", "c"}, {"f"}, "gemm");
  setFloat(gemm, "alpha", 2.0f);
  setFloat(gemm, "beta", 0.5f);
  b.node("QuantizeLinear", {"f", "sy", "zy"}, {"y"}, "q");
  b.output("y", TensorProto::UINT8);
  auto m = b.build();
  Reporter r(withContrib());
  qconv::fuseContrib(m, r.ctx);
  const Node* q = only(m.graph, "QGemm");
  REQUIRE(inputNames(q) == std::vector<std::string>{"a", "sa", "za", "w", "sw", "zw", "c_int32", "sy", "zy"});
  // beta * C / (alpha * 0.5 * 0.25) = 0.5 * C / 0.25, half to even
  std::string why;
  REQUIRE(*qconv::ir::readInts(*q->input(6), &why) == std::vector<int64_t>{0, 1, -2, 6});
  REQUIRE(q->attribute("beta") == nullptr);
  REQUIRE(q->attribute("alpha")->f() == 2.0f);
}

TEST_CASE("a Relu the output quantizer makes redundant is absorbed into QLinearAdd") {
  ModelBuilder b;
  b.input("a", TensorProto::UINT8, {1, 4});
  b.floats("s", {}, {0.5f});
  b.ints("z", TensorProto::UINT8, {}, {128});
  b.ints("zy", TensorProto::UINT8, {}, {0});  // Relu's 0 quantizes to uint8's lowest value
  b.node("DequantizeLinear", {"a", "s", "z"}, {"af"}, "dq");
  b.node("Add", {"af", "af"}, {"f"}, "add");
  b.node("Relu", {"f"}, {"r"}, "relu");
  b.node("QuantizeLinear", {"r", "s", "zy"}, {"y"}, "q");
  b.output("y", TensorProto::UINT8);
  auto m = b.build();
  Reporter r(withContrib());
  qconv::fuseContrib(m, r.ctx);
  REQUIRE(only(m.graph, "QLinearAdd")->output(0) == m.graph.outputs()[0]);
  REQUIRE(m.graph.nodes().size() == 1);
}
