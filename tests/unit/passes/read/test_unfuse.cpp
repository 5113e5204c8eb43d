// unfuse-qop and unfuse-integer-ops (--format qdq): QOp ops and dynamic quantization's integer
// chains become DequantizeLinear -> float op [-> QuantizeLinear], operand by operand as
// qop_forms.h lays them out; refusals name the condition.
#include <catch2/catch.hpp>

#include <algorithm>

#include "model_builder.h"
#include "qconv/io/model_io.h"
#include "qconv/pipeline/pass_manager.h"
#include "qconv/pipeline/run.h"

using namespace qtest;
using qconv::ir::Node;

namespace {

void contrib(ModelBuilder& b) {
  auto* op = b.proto().add_opset_import();
  op->set_domain("com.microsoft");
  op->set_version(1);
}

/// Scale and zero point initializers `<name>_s` (float) and `<name>_zp` (uint8).
void params(ModelBuilder& b, const std::string& name, float s, int64_t zp) {
  b.floats(name + "_s", {}, {s});
  b.ints(name + "_zp", TensorProto::UINT8, {}, {zp});
}

/// QLinearConv(x[1,2,3,3] u8, w[3,2,1,1] s8 per output channel, B int32) -> y
ModelBuilder qlinearConv(int64_t opset = 13, bool named = true) {
  ModelBuilder b(opset);
  b.input("x", TensorProto::UINT8, {1, 2, 3, 3});
  params(b, "x", 0.5f, 128);
  b.ints("w", TensorProto::INT8, {3, 2, 1, 1}, {1, -2, 3, -4, 5, -6});
  b.floats("w_s", {3}, {0.25f, 0.125f, 0.5f});
  b.ints("w_zp", TensorProto::INT8, {3}, {0, 0, 0});
  params(b, "y", 0.75f, 100);
  b.ints("B", TensorProto::INT32, {3}, {10, -20, 30});
  auto& n = b.node("QLinearConv", {"x", "x_s", "x_zp", "w", "w_s", "w_zp", "y_s", "y_zp", "B"}, {"y"}, named ? "conv_q" : "");
  setInts(n, "pads", {0, 0, 0, 0});
  b.output("y", TensorProto::UINT8);
  return b;
}

/// One com.microsoft op on a u8 input x[1,4,2,2] with output parameters y_s, y_zp.
ModelBuilder unary(const std::string& op, int64_t opset = 13) {
  ModelBuilder b(opset);
  contrib(b);
  b.input("x", TensorProto::UINT8, {1, 4, 2, 2});
  params(b, "x", 0.5f, 128);
  params(b, "y", 0.25f, 120);
  b.node(op, {"x", "x_s", "x_zp", "y_s", "y_zp"}, {"y"}, "op").set_domain("com.microsoft");
  b.output("y", TensorProto::UINT8);
  return b;
}

std::string unfuse(qconv::ir::Model& m, Reporter& r) {
  qconv::unfuseQop(m, r.ctx);
  return r.ctx.refusals().empty() ? "" : r.ctx.refusals()[0];
}

std::vector<int64_t> intsAttr(const Node* n, const char* name) {
  const auto* a = n->attribute(name);
  REQUIRE(a);
  return {a->ints().begin(), a->ints().end()};
}

}  // namespace

TEST_CASE("QLinearConv becomes DQ(x), DQ(w per channel), DQ(B at x_s*w_s) -> Conv -> Q, named after it") {
  auto m = qlinearConv().build();
  Reporter r;
  REQUIRE(unfuse(m, r).empty());
  const Node* conv = only(m.graph, "Conv");
  REQUIRE(conv->name() == "conv_q");  // the node's name goes to the float op
  REQUIRE(intsAttr(conv, "pads") == std::vector<int64_t>{0, 0, 0, 0});
  const Node* dqx = conv->input(0)->producer();
  const Node* dqw = conv->input(1)->producer();
  const Node* dqb = conv->input(2)->producer();
  REQUIRE((dqx->name() == "conv_q_dq_x" && dqx->input(0)->name() == "x" && dqx->input(1)->name() == "x_s" &&
           dqx->input(2)->name() == "x_zp" && !dqx->attribute("axis")));
  REQUIRE((dqw->input(0)->name() == "w" && dqw->attrInt("axis", -1) == 0));
  REQUIRE((dqb->input(0)->name() == "B" && dqb->inputs().size() == 2 && dqb->attrInt("axis", -1) == 0));
  REQUIRE(floatsOf(dqb->input(1)) == std::vector<float>{0.5f * 0.25f, 0.5f * 0.125f, 0.5f * 0.5f});
  const Node* q = only(m.graph, "QuantizeLinear");
  REQUIRE((q->name() == "conv_q_q" && q->input(0) == conv->output(0) && q->input(1)->name() == "y_s"));
  REQUIRE(q->output(0) == m.graph.outputs()[0]);  // the output keeps its name and type
  REQUIRE(q->output(0)->elemType() == TensorProto::UINT8);
  REQUIRE(r.ctx.counters().at("QLinearConv -> QDQ Conv") == 1);
}

TEST_CASE("a per-channel QLinearConv in a model of opset 12 stays: DequantizeLinear has no axis there") {
  auto m = qlinearConv(12).build();
  Reporter r;
  REQUIRE(unfuse(m, r) == "conv_q: stays QLinearConv: w is quantized per axis, which DequantizeLinear takes from "
                          "opset 13; the model has 12");
  REQUIRE(only(m.graph, "QLinearConv"));
}

TEST_CASE("an unnamed QOp node: the new nodes get names made unique at emit, the same every time") {
  auto b = qlinearConv(13, false);
  b.node("Identity", {"x"}, {"Conv"}, "Conv");  // a node name the made ones must not take
  b.output("Conv", TensorProto::UINT8);
  auto names = [&] {
    auto m = b.build();
    Reporter r;
    REQUIRE(unfuse(m, r).empty());
    onnx::ModelProto out = qconv::io::exportModel(m);
    std::vector<std::string> all;
    for (const auto& n : out.graph().node()) all.push_back(n.name());
    return all;
  };
  const auto first = names();
  REQUIRE(first == std::vector<std::string>{"Conv_dq_x", "Conv_dq_w", "Conv_dq_B", "Conv_1", "Conv_q", "Conv"});
  REQUIRE(names() == first);
}

TEST_CASE("QLinearConcat: one DequantizeLinear per (X, scale, zero point) triple, the axis kept") {
  ModelBuilder b;
  contrib(b);
  b.input("a", TensorProto::UINT8, {1, 2});
  b.input("c", TensorProto::UINT8, {1, 3});
  params(b, "a", 0.5f, 128);
  params(b, "c", 0.25f, 0);
  params(b, "y", 0.5f, 128);
  auto& n = b.node("QLinearConcat", {"y_s", "y_zp", "a", "a_s", "a_zp", "c", "c_s", "c_zp", "a", "a_s", "a_zp"}, {"y"}, "cat");
  n.set_domain("com.microsoft");
  setInt(n, "axis", 1);
  b.output("y", TensorProto::UINT8);
  auto m = b.build();
  Reporter r;
  REQUIRE(unfuse(m, r).empty());
  const Node* cat = only(m.graph, "Concat");
  REQUIRE(cat->inputs().size() == 3);
  REQUIRE(cat->attrInt("axis", 0) == 1);
  REQUIRE(cat->input(1)->producer()->input(1)->name() == "c_s");
  REQUIRE(cat->input(2)->producer()->name() == "cat_dq_X2");
  REQUIRE(only(m.graph, "QuantizeLinear")->input(1)->name() == "y_s");
}

TEST_CASE("channels_last pools are wrapped in transposes to channels first and back") {
  auto b = unary("QLinearGlobalAveragePool");
  setInt(*b.graph().mutable_node(0), "channels_last", 1);
  auto m = b.build();
  Reporter r;
  REQUIRE(unfuse(m, r).empty());
  const Node* gap = only(m.graph, "GlobalAveragePool");
  REQUIRE_FALSE(gap->attribute("channels_last"));
  REQUIRE(intsAttr(gap->input(0)->producer(), "perm") == std::vector<int64_t>{0, 3, 1, 2});
  REQUIRE(intsAttr(gap->output(0)->uses()[0].node, "perm") == std::vector<int64_t>{0, 2, 3, 1});
}

TEST_CASE("QLinearSoftmax keeps its opset's meaning of axis, or stays") {
  auto b = unary("QLinearSoftmax");
  setInt(*b.graph().mutable_node(0), "opset", 12);
  SECTION("the last axis means the same in every opset") {
    setInt(*b.graph().mutable_node(0), "axis", 3);
    auto m = b.build();
    Reporter r;
    REQUIRE(unfuse(m, r).empty());
    REQUIRE(only(m.graph, "Softmax")->attrInt("axis", 0) == 3);
  }
  SECTION("another axis: opset 12 flattens there, the model's opset 13 does not") {
    setInt(*b.graph().mutable_node(0), "axis", 1);
    auto m = b.build();
    Reporter r;
    REQUIRE(unfuse(m, r) == "op: stays com.microsoft QLinearSoftmax: its softmax is opset 12's, whose axis 1 means "
                            "another thing in the model's opset 13");
  }
  SECTION("no axis: the contrib default, -1, written out (Softmax-13 defaults to it, Softmax-11 does not)") {
    auto m = b.build();
    Reporter r;
    REQUIRE(unfuse(m, r).empty());
    REQUIRE(only(m.graph, "Softmax")->attrInt("axis", 0) == -1);
  }
}

TEST_CASE("QLinearReduceMean: axes an attribute below opset 18, an input from 18") {
  for (int64_t opset : {13, 18}) {
    auto b = unary("QLinearReduceMean", opset);
    setInts(*b.graph().mutable_node(0), "axes", {2, 3});
    setInt(*b.graph().mutable_node(0), "keepdims", 1);
    auto m = b.build();
    Reporter r;
    REQUIRE(unfuse(m, r).empty());
    const Node* mean = only(m.graph, "ReduceMean");
    REQUIRE(mean->attrInt("keepdims", 0) == 1);
    if (opset < 18) {
      REQUIRE(intsAttr(mean, "axes") == std::vector<int64_t>{2, 3});
    } else {
      REQUIRE_FALSE(mean->attribute("axes"));
      REQUIRE(intsOf(mean->input(1)) == std::vector<int64_t>{2, 3});
    }
  }
}

TEST_CASE("QLinearWhere keeps its condition as it is; QLinearLeakyRelu its alpha") {
  ModelBuilder b;
  contrib(b);
  b.input("cond", TensorProto::BOOL, {4});
  b.input("p", TensorProto::UINT8, {4});
  b.input("q", TensorProto::UINT8, {4});
  params(b, "p", 0.5f, 128);
  params(b, "q", 0.25f, 128);
  params(b, "z", 0.5f, 128);
  b.node("QLinearWhere", {"cond", "p", "p_s", "p_zp", "q", "q_s", "q_zp", "z_s", "z_zp"}, {"z"}, "where").set_domain("com.microsoft");
  b.output("z", TensorProto::UINT8);
  auto m = b.build();
  Reporter r;
  REQUIRE(unfuse(m, r).empty());
  const Node* where = only(m.graph, "Where");
  REQUIRE(where->input(0)->name() == "cond");
  REQUIRE(where->input(2)->producer()->input(1)->name() == "q_s");

  auto leaky = unary("QLinearLeakyRelu");
  setFloat(*leaky.graph().mutable_node(0), "alpha", 0.2f);
  auto m2 = leaky.build();
  Reporter r2;
  REQUIRE(unfuse(m2, r2).empty());
  REQUIRE(only(m2.graph, "LeakyRelu")->attribute("alpha")->f() == 0.2f);
}

TEST_CASE("an attribute the float op does not have keeps the node, named") {
  auto b = unary("QLinearSigmoid");
  setInt(*b.graph().mutable_node(0), "fancy", 1);
  auto m = b.build();
  Reporter r;
  REQUIRE(unfuse(m, r) == "op: stays com.microsoft QLinearSigmoid: attribute 'fancy' has no Sigmoid counterpart");
}

TEST_CASE("an absent output zero point becomes 0 of the output's type") {
  ModelBuilder b;
  contrib(b);
  b.input("x", TensorProto::INT8, {4});
  b.floats("x_s", {}, {0.5f});
  b.floats("y_s", {}, {0.25f});
  b.node("QLinearSigmoid", {"x", "x_s", "", "y_s"}, {"y"}, "sig").set_domain("com.microsoft");
  b.output("y", TensorProto::INT8);
  auto m = b.build();
  Reporter r;
  REQUIRE(unfuse(m, r).empty());
  const Node* q = only(m.graph, "QuantizeLinear");
  REQUIRE(q->input(2)->initializer()->data_type() == TensorProto::INT8);
  REQUIRE(intsOf(q->input(2)) == std::vector<int64_t>{0});
  REQUIRE(only(m.graph, "DequantizeLinear")->inputs().size() == 2);
}

TEST_CASE("the qop pipeline keeps QOp ops as they are and the qdq pipeline unfuses them") {
  auto m = qlinearConv().build();
  Reporter r;
  qconv::PassManager(qconv::pipelineFor(qconv::Format::Qop)).run(m, r.ctx, nullptr);
  REQUIRE(only(m.graph, "QLinearConv"));
  auto pipeline = qconv::pipelineFor(qconv::Format::Qdq);
  REQUIRE(std::find(pipeline.begin(), pipeline.end(), "unfuse-qop") != pipeline.end());
  auto qop = qconv::pipelineFor(qconv::Format::Qop);
  REQUIRE(std::find(qop.begin(), qop.end(), "unfuse-qop") == qop.end());
}

// ---- unfuse-integer-ops ----

namespace {

/// quantize_dynamic's chain: DynamicQuantizeLinear(x) -> MatMulInteger(xq, w, xzp, wzp) -> Cast ->
/// Mul(., Mul(x_s, w_s)); w_s per column when `columns`.
ModelBuilder dynamicMatMul(bool columns, bool cast = true) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {2, 4});
  b.node("DynamicQuantizeLinear", {"x"}, {"xq", "x_s", "x_zp"}, "dql");
  b.ints("w", TensorProto::UINT8, {4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  if (columns) b.floats("w_s", {3}, {0.5f, 0.25f, 0.125f});
  else b.floats("w_s", {}, {0.5f});
  b.ints("w_zp", TensorProto::UINT8, columns ? std::vector<int64_t>{3} : std::vector<int64_t>{}, columns ? std::vector<int64_t>{7, 8, 9} : std::vector<int64_t>{7});
  b.node("Mul", {"x_s", "w_s"}, {"s"}, "scales");
  b.node("MatMulInteger", {"xq", "w", "x_zp", "w_zp"}, {"acc"}, "mm");
  if (cast) {
    setInt(b.node("Cast", {"acc"}, {"accf"}, "cast"), "to", TensorProto::FLOAT);
    b.node("Mul", {"accf", "s"}, {"y"}, "scaled");
  } else {
    b.node("Mul", {"acc", "s"}, {"y"}, "scaled");
  }
  b.output("y", TensorProto::FLOAT);
  return b;
}

}  // namespace

TEST_CASE("MatMulInteger -> Cast -> Mul(x_s * w_s) becomes DQ(x), DQ(w per column) -> MatMul") {
  for (bool columns : {false, true}) {
    auto m = dynamicMatMul(columns).build();
    Reporter r;
    qconv::unfuseIntegerOps(m, r.ctx);
    REQUIRE(r.ctx.refusals().empty());
    REQUIRE(nodesOf(m.graph, "MatMulInteger").empty());
    REQUIRE(nodesOf(m.graph, "Cast").empty());
    REQUIRE(nodesOf(m.graph, "Mul").empty());
    const Node* mm = only(m.graph, "MatMul");
    REQUIRE(mm->name() == "mm");
    REQUIRE(mm->output(0) == m.graph.outputs()[0]);
    const Node* dqx = mm->input(0)->producer();
    const Node* dqw = mm->input(1)->producer();
    REQUIRE((dqx->input(0)->name() == "xq" && dqx->input(1)->name() == "x_s" && dqx->input(2)->name() == "x_zp"));
    REQUIRE((dqw->input(0)->name() == "w" && dqw->input(1)->name() == "w_s" && dqw->input(2)->name() == "w_zp"));
    REQUIRE(dqw->attrInt("axis", -7) == (columns ? 1 : -7));
    REQUIRE(only(m.graph, "DynamicQuantizeLinear"));
  }
}

TEST_CASE("an integer op whose output is not cast to float and scaled stays, with the reason") {
  auto m = dynamicMatMul(false, false).build();
  Reporter r;
  qconv::unfuseIntegerOps(m, r.ctx);
  REQUIRE(r.ctx.refusals() == std::vector<std::string>{"mm: stays MatMulInteger: its output is not read only by a Cast to float"});
  REQUIRE(only(m.graph, "MatMulInteger"));
}

// ---- check-zero-points ----

TEST_CASE("check-zero-points names each int8 tensor whose zero point is not 0 once and only when both types are int8") {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {4});
  b.floats("s", {}, {0.5f});
  b.ints("z0", TensorProto::INT8, {}, {0});
  b.ints("z5", TensorProto::INT8, {}, {5});
  b.node("QuantizeLinear", {"x", "s", "z0"}, {"a"}, "qa");
  b.node("DequantizeLinear", {"a", "s", "z0"}, {"af"}, "dqa");
  b.node("QuantizeLinear", {"af", "s", "z5"}, {"c"}, "qc");
  b.node("DequantizeLinear", {"c", "s", "z5"}, {"y"}, "dqc");
  b.output("y", TensorProto::FLOAT);
  for (bool both : {false, true}) {
    auto m = b.build();
    qconv::PassOptions o;
    o.activation_type = TensorProto::INT8;
    o.weight_type = both ? TensorProto::INT8 : 0;
    Reporter r(o);
    qconv::checkZeroPoints(m, r.ctx);
    if (!both) {
      REQUIRE(r.ctx.warnings().empty());
      continue;
    }
    REQUIRE(r.ctx.warnings() == std::vector<std::string>{
                                    "c: its zero point is 5 after the shift to int8; runtimes that take int8 with zero "
                                    "point 0 only (TensorRT) refuse it: it needs symmetric quantization",
                                    "test.onnx: 1 int8 tensor(s) keep a zero point other than 0, which runtimes that take int8 with zero point 0 only "
                                    "(TensorRT) refuse (-v names them)"});
  }
}
