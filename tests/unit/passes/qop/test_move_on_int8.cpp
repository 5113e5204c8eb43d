// move-on-int8: data-movement ops between DQ and Q run on the 8-bit tensor; a requantization
// stays where the parameters differ; refusals name the condition.
#include <catch2/catch.hpp>

#include "model_builder.h"

using namespace qtest;
using qconv::ir::Node;

namespace {

/// x u8 [1,1,4,4] -> DQ(0.5, 128) -> op -> Q(y_s, 128) -> y
ModelBuilder around(const std::string& op, float y_s, const std::vector<std::string>& extra = {}) {
  ModelBuilder b;
  b.input("x", TensorProto::UINT8, {1, 1, 4, 4});
  b.floats("s", {}, {0.5f});
  b.floats("y_s", {}, {y_s});
  b.ints("z", TensorProto::UINT8, {}, {128});
  b.node("DequantizeLinear", {"x", "s", "z"}, {"xf"}, "dq");
  std::vector<std::string> in{"xf"};
  in.insert(in.end(), extra.begin(), extra.end());
  b.node(op, in, {"f"}, "op");
  b.node("QuantizeLinear", {"f", "y_s", "z"}, {"y"}, "q");
  b.output("y", TensorProto::UINT8);
  return b;
}

std::vector<std::string> ops(const qconv::ir::Graph& g) {
  std::vector<std::string> out;
  for (const auto& n : g.nodes()) out.push_back(n->opType());
  return out;
}

}  // namespace

TEST_CASE("MaxPool between DQ and Q of the same parameters runs on the integers") {
  auto b = around("MaxPool", 0.5f);
  setInts(*b.graph().mutable_node(1), "kernel_shape", {2, 2});
  auto m = b.build();
  Reporter r;
  qconv::moveOnInt8(m, r.ctx);
  REQUIRE(ops(m.graph) == std::vector<std::string>{"MaxPool"});
  const Node* pool = only(m.graph, "MaxPool");
  REQUIRE(pool->input(0)->name() == "x");
  REQUIRE(pool->output(0) == m.graph.outputs()[0]);
  REQUIRE(pool->output(0)->elemType() == TensorProto::UINT8);
}

TEST_CASE("other output parameters keep one requantization after the op") {
  auto b = around("Identity", 0.25f);
  auto m = b.build();
  Reporter r;
  qconv::moveOnInt8(m, r.ctx);
  REQUIRE(ops(m.graph) == std::vector<std::string>{"Identity", "DequantizeLinear", "QuantizeLinear"});
  REQUIRE(only(m.graph, "Identity")->input(0)->name() == "x");
}

TEST_CASE("a constant Pad's value becomes the integer that dequantizes to it, or the Pad stays") {
  auto padded = [](float value) {
    ModelBuilder b = around("Pad", 0.5f, {"pads", "v"});
    b.ints("pads", TensorProto::INT64, {8}, {0, 0, 1, 1, 0, 0, 1, 1});
    b.floats("v", {}, {value});
    return b.build();
  };
  SECTION("0 is the zero point") {
    auto m = padded(0.0f);
    Reporter r;
    qconv::moveOnInt8(m, r.ctx);
    const Node* pad = only(m.graph, "Pad");
    REQUIRE(intsOf(pad->input(2)) == std::vector<int64_t>{128});
    REQUIRE(pad->input(2)->initializer()->data_type() == TensorProto::UINT8);
  }
  SECTION("0.3 is no integer's value at scale 0.5") {
    auto m = padded(0.3f);
    Reporter r;
    qconv::moveOnInt8(m, r.ctx);
    REQUIRE(r.ctx.refusals().size() == 1);
    REQUIRE(r.ctx.refusals()[0].rfind("op: stays on float: its pad value 0.3", 0) == 0);
  }
}

TEST_CASE("Resize other than nearest computes new values and stays") {
  ModelBuilder b = around("Resize", 0.5f, {"", "scales"});
  b.floats("scales", {4}, {1, 1, 2, 2});
  auto& resize = *b.graph().mutable_node(1);
  auto* a = resize.add_attribute();
  a->set_name("mode");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("linear");
  auto m = b.build();
  Reporter r;
  qconv::moveOnInt8(m, r.ctx);
  REQUIRE(r.ctx.refusals() == std::vector<std::string>{"op: stays on float: Resize mode 'linear' computes new values"});
}

TEST_CASE("Concat: each input with other parameters than the output is requantized before it") {
  ModelBuilder b;
  b.input("a", TensorProto::UINT8, {1, 2});
  b.input("c", TensorProto::UINT8, {1, 2});
  b.floats("s", {}, {0.5f});
  b.floats("t", {}, {0.25f});
  b.ints("z", TensorProto::UINT8, {}, {128});
  b.node("DequantizeLinear", {"a", "s", "z"}, {"af"}, "dqa");
  b.node("DequantizeLinear", {"c", "t", "z"}, {"cf"}, "dqc");
  setInt(b.node("Concat", {"af", "cf"}, {"f"}, "cat"), "axis", 1);
  b.node("QuantizeLinear", {"f", "s", "z"}, {"y"}, "q");
  b.output("y", TensorProto::UINT8);
  auto m = b.build();
  Reporter r;
  qconv::moveOnInt8(m, r.ctx);
  const Node* cat = only(m.graph, "Concat");
  REQUIRE(cat->input(0)->name() == "a");
  REQUIRE(cat->input(1)->producer()->is("QuantizeLinear"));
  REQUIRE(cat->input(1)->producer()->input(0)->producer()->input(0)->name() == "c");
  REQUIRE(cat->output(0) == m.graph.outputs()[0]);
}

// ---- name-leftovers ----

TEST_CASE("name-leftovers counts every op left between DQ and Q and names each one") {
  ModelBuilder b;
  b.input("x", TensorProto::UINT8, {4});
  b.floats("s", {}, {0.5f});
  b.ints("z", TensorProto::UINT8, {}, {128});
  b.node("DequantizeLinear", {"x", "s", "z"}, {"xf"}, "dq");
  b.node("Add", {"xf", "xf"}, {"a"}, "add");
  b.node("QuantizeLinear", {"a", "s", "z"}, {"aq"}, "qa");
  b.node("Relu", {"xf"}, {"r"}, "relu");
  b.node("QuantizeLinear", {"r", "s", "z"}, {"rq"}, "qr");
  b.output("aq", TensorProto::UINT8);
  b.output("rq", TensorProto::UINT8);
  auto m = b.build();
  Reporter r;
  qconv::nameLeftovers(m, r.ctx);
  REQUIRE(r.ctx.refusals() == std::vector<std::string>{
                                  "add: stays in QDQ form: standard ONNX has no quantized Add (onnxruntime's is "
                                  "com.microsoft QLinearAdd, which --contrib writes where onnxruntime runs it)",
                                  "relu: stays in QDQ form: no qconv pass writes a quantized Relu (it computes in float "
                                  "between DequantizeLinear and QuantizeLinear)"});
  REQUIRE(r.ctx.counters().at("Add left in QDQ form") == 1);
  REQUIRE(r.ctx.counters().at("Relu left in QDQ form") == 1);
}

TEST_CASE("name-leftovers does not name again an op an earlier pass refused") {
  ModelBuilder b;
  b.input("x", TensorProto::UINT8, {4});
  b.floats("s", {}, {0.5f});
  b.ints("z", TensorProto::UINT8, {}, {128});
  b.node("DequantizeLinear", {"x", "s", "z"}, {"xf"}, "dq");
  b.node("Erf", {"xf"}, {"e"}, "erf");
  b.node("QuantizeLinear", {"e", "s", "z"}, {"y"}, "q");
  b.output("y", TensorProto::UINT8);
  auto m = b.build();
  Reporter r;
  r.ctx.report(qconv::Report::Refused, "erf", "not fused: an earlier reason");
  qconv::nameLeftovers(m, r.ctx);
  REQUIRE(r.ctx.refusals() == std::vector<std::string>{"erf: not fused: an earlier reason"});
  REQUIRE(r.ctx.counters().at("Erf left in QDQ form") == 1);
}
