// fuse-qlinear-conv: the operand layout of the fused node, and every refusal's message.
#include <catch2/catch.hpp>

#include "model_builder.h"
#include "qconv/ir/tensor.h"

using namespace qtest;

namespace {
struct Result {
  qconv::ir::Model model;
  std::string log;
  std::vector<std::string> refusals;
};

Result fuse(const ModelBuilder& b) {
  Result r{b.build(), {}, {}};
  Reporter rep;
  qconv::pairQdq(r.model, rep.ctx);
  qconv::fuseQLinearConv(r.model, rep.ctx);
  r.log = rep.text.str();
  r.refusals = rep.ctx.refusals();
  return r;
}

onnx::NodeProto& named(ModelBuilder& b, const std::string& name) {
  for (auto& n : *b.graph().mutable_node())
    if (n.name() == name) return n;
  FAIL("no node " + name);
  throw;
}

std::string refusalOf(const ModelBuilder& b) {
  auto r = fuse(b);
  REQUIRE(nodesOf(r.model.graph, "QLinearConv").empty());
  REQUIRE(nodesOf(r.model.graph, "Conv").size() == 1);  // left in QDQ form
  REQUIRE(r.refusals.size() == 1);
  return r.refusals[0];
}
}  // namespace

TEST_CASE("DQ + DQ + DQ(bias) -> Conv -> Q becomes one QLinearConv with the documented operand layout") {
  auto r = fuse(convModel({}));
  auto& g = r.model.graph;
  REQUIRE(nodesOf(g, "Conv").empty());
  auto* qc = only(g, "QLinearConv");
  REQUIRE(qc->name() == "conv_1");
  REQUIRE(qc->inputs().size() == 9);
  REQUIRE(qc->input(0)->name() == "x_q");
  REQUIRE(qc->input(1)->name() == "x_scale");
  REQUIRE(qc->input(2)->name() == "x_zp");
  REQUIRE(qc->input(3)->name() == "w");
  REQUIRE(qc->input(4)->name() == "w_scale");
  REQUIRE(qc->input(5)->name() == "w_zp");
  REQUIRE(qc->input(6)->name() == "y_scale");
  REQUIRE(qc->input(7)->name() == "y_zp");
  REQUIRE(qc->input(8)->name() == "b");  // the int32 bias, already at x_scale*w_scale: valid as it is
  REQUIRE(qc->output(0)->name() == "y_q");  // keeps the Q's output and its readers
  REQUIRE(qc->output(0)->uses()[0].node->name() == "dq_y");
  REQUIRE(qc->attribute("pads"));
  REQUIRE(qc->attribute("kernel_shape"));
  // the activation and weight DQs nobody reads are gone; the input Q stays
  REQUIRE(nodesOf(g, "DequantizeLinear").size() == 1);  // dq_y: the bias DQ went with the fusion
  REQUIRE(nodesOf(g, "QuantizeLinear").size() == 1);
}

TEST_CASE("per-channel weights, int8 activations and no bias fuse") {
  ConvSpec s;
  s.per_channel = true;
  s.x_type = s.y_type = TensorProto::INT8;
  s.y_zp = 0;
  s.bias = false;
  auto r = fuse(convModel(s));
  auto* qc = only(r.model.graph, "QLinearConv");
  REQUIRE(qc->inputs().size() == 8);
  REQUIRE(floatsOf(qc->input(4)).size() == 3);
}

TEST_CASE("a Relu is absorbed when the output zero point is the range minimum") {
  ConvSpec s;
  s.activation = "Relu";
  s.y_zp = 0;
  auto r = fuse(convModel(s));
  REQUIRE(nodesOf(r.model.graph, "Relu").empty());
  REQUIRE(nodesOf(r.model.graph, "QLinearConv").size() == 1);
}

TEST_CASE("a Relu that the output quantizer does not make redundant refuses the fusion") {
  ConvSpec s;
  s.activation = "Relu";
  s.y_zp = 128;
  REQUIRE(refusalOf(convModel(s)) ==
          "conv_1: not fused: relu_1 (Relu) is not redundant under the output quantizer: its bounds quantize "
          "to [128, 255], the uint8 range is [0, 255]");
}

TEST_CASE("a Clip is absorbed only when both bounds quantize to the range ends") {
  ConvSpec s;
  s.activation = "Clip";
  s.y_zp = 0;
  s.y_scale = 6.0f / 255.0f;
  s.clip_lo = 0.0f;
  s.clip_hi = 6.0f;
  auto r = fuse(convModel(s));
  REQUIRE(nodesOf(r.model.graph, "Clip").empty());
  s.clip_hi = 3.0f;  // cuts inside the quantizer's range
  REQUIRE(refusalOf(convModel(s)).find("clip_1 (Clip) is not redundant") != std::string::npos);
}

TEST_CASE("refusal: weight zero point is not constant") {
  auto b = convModel({});
  named(b, "dq_w").set_input(2, "w_zp_live");  // dq_w reads a computed zero point
  b.node("Identity", {"w_zp"}, {"w_zp_live"}, "zp_identity");
  for (int i = b.graph().node_size() - 1; i > 0; --i) b.graph().mutable_node()->SwapElements(i, i - 1);
  REQUIRE(refusalOf(b) == "conv_1: not fused: weight zero point is not constant");
}

TEST_CASE("refusal: int8 x with uint8 weights") {
  ConvSpec s;
  s.x_type = s.y_type = TensorProto::INT8;
  s.y_zp = 0;
  s.w_type = TensorProto::UINT8;
  REQUIRE(refusalOf(convModel(s)) ==
          "conv_1: not fused: x is int8 but the weight is uint8 (QLinearConv kernels take int8 x only with int8 "
          "weights)");
}

TEST_CASE("refusal: the Conv output has another reader") {
  auto b = convModel({});
  b.node("Relu", {"conv_y"}, {"side"}, "side_reader");
  b.output("side", TensorProto::FLOAT);
  REQUIRE(refusalOf(b) ==
          "conv_1: not fused: output must have exactly one reader, a QuantizeLinear, and must not be a graph output");
}

TEST_CASE("refusal: x does not come from a DequantizeLinear") {
  auto b = convModel({});
  named(b, "conv_1").set_input(0, "x");  // Conv reads the float input directly
  auto r = fuse(b);
  REQUIRE(r.refusals.size() == 1);
  REQUIRE(r.refusals[0] == "conv_1: not fused: x does not come from a DequantizeLinear");
}

TEST_CASE("refusal: weight quantized per axis 1") {
  ConvSpec s;
  s.per_channel = true;
  auto b = convModel(s);
  named(b, "dq_w").mutable_attribute(0)->set_i(1);
  REQUIRE(refusalOf(b) ==
          "conv_1: not fused: weight is quantized per axis 1; QLinearConv needs axis 0 (output channels)");
}

TEST_CASE("a DequantizeLinear shared with another reader stays for that reader") {
  auto b = convModel({});
  b.node("Sigmoid", {"x_dq"}, {"other"}, "other_reader");
  b.output("other", TensorProto::FLOAT);
  auto r = fuse(b);
  REQUIRE(nodesOf(r.model.graph, "QLinearConv").size() == 1);
  bool dqxKept = false;
  for (auto* dq : nodesOf(r.model.graph, "DequantizeLinear")) dqxKept |= dq->name() == "dq_x";
  REQUIRE(dqxKept);
}

TEST_CASE("auto_pad, group, strides and dilations carry over to the QLinearConv") {
  auto b = convModel({});
  auto& conv = named(b, "conv_1");
  conv.clear_attribute();
  auto* a = conv.add_attribute();
  a->set_name("auto_pad");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("SAME_UPPER");
  setInts(conv, "strides", {2, 2});
  setInts(conv, "dilations", {1, 1});
  setInt(conv, "group", 1);
  auto r = fuse(b);
  auto* qc = only(r.model.graph, "QLinearConv");
  REQUIRE(qc->attribute("auto_pad")->s() == "SAME_UPPER");
  REQUIRE(qc->attribute("strides")->ints(0) == 2);
  REQUIRE(qc->attribute("dilations"));
  REQUIRE(qc->attribute("group")->i() == 1);
  REQUIRE_FALSE(qc->attribute("pads"));
}

TEST_CASE("between two fused convs the Q -> DQ disappears; before an unfused reader a DQ stays") {
  // conv_1 -> Q -> DQ -> conv_2 -> Q -> DQ -> y, and the first DQ also feeds a Sigmoid
  auto b = convModel({});
  auto& dqy = named(b, "dq_y");
  dqy.set_output(0, "mid");
  b.graph().mutable_output(0)->set_name("y2");
  b.ints("w2", TensorProto::INT8, {3, 3, 1, 1}, {1, 0, 0, 0, 1, 0, 0, 0, 1});
  b.node("DequantizeLinear", {"w2", "w_scale", "w_zp"}, {"w2_dq"}, "dq_w2");
  b.node("Conv", {"mid", "w2_dq"}, {"conv2_y"}, "conv_2");
  b.node("QuantizeLinear", {"conv2_y", "y_scale", "y_zp"}, {"y2_q"}, "q_y2");
  b.node("DequantizeLinear", {"y2_q", "y_scale", "y_zp"}, {"y2"}, "dq_y2");
  auto r = fuse(b);
  auto convs = nodesOf(r.model.graph, "QLinearConv");
  REQUIRE(convs.size() == 2);
  REQUIRE(convs[1]->input(0) == convs[0]->output(0));  // integers flow directly
  bool midDq = false;
  for (auto* dq : nodesOf(r.model.graph, "DequantizeLinear")) midDq |= dq->name() == "dq_y";
  REQUIRE_FALSE(midDq);

  auto b2 = b;  // now with an unfused reader of the middle tensor
  b2.node("Sigmoid", {"mid"}, {"side"}, "side");
  b2.output("side", TensorProto::FLOAT);
  auto r2 = fuse(b2);
  REQUIRE(nodesOf(r2.model.graph, "QLinearConv").size() == 2);
  bool kept = false;
  for (auto* dq : nodesOf(r2.model.graph, "DequantizeLinear"))
    kept |= dq->name() == "dq_y" && dq->output(0)->uses().size() == 1 && dq->output(0)->uses()[0].node->opType() == "Sigmoid";
  REQUIRE(kept);
}

TEST_CASE("x of the other 8-bit type than y moves to y's type, its quantizer's and readers' zero points by 128") {
  ConvSpec s;  // onnxruntime has no kernel for int8 x with uint8 y: x from its own QuantizeLinear moves
  s.x_type = TensorProto::INT8;  // (the builder's int8 x is at zero point 0)
  s.y_type = TensorProto::UINT8;
  s.y_zp = 130;
  auto r = fuse(convModel(s));
  REQUIRE(r.refusals.empty());
  auto* qc = only(r.model.graph, "QLinearConv");
  std::string why;
  REQUIRE(qconv::ir::readInts(*qc->input(2), &why) == std::vector<int64_t>{128});
  REQUIRE(qc->input(2)->initializer()->data_type() == TensorProto::UINT8);
  REQUIRE(qconv::ir::readInts(*qc->input(7), &why) == std::vector<int64_t>{130});  // y as it was
  auto* q = only(r.model.graph, "QuantizeLinear");
  REQUIRE(q->output(0) == qc->input(0));
  REQUIRE(qconv::ir::readInts(*q->input(2), &why) == std::vector<int64_t>{128});
  REQUIRE(q->output(0)->elemType() == TensorProto::UINT8);
}

TEST_CASE("y moves to x's type where x cannot: its zero point and its DequantizeLinear readers' by 128") {
  ConvSpec s;
  s.x_type = TensorProto::INT8;
  s.y_type = TensorProto::UINT8;
  s.y_zp = 130;
  auto b = convModel(s);
  b.node("Cast", {"x_q"}, {"x_cast"}, "cast_x");  // x is read by another op: it keeps its type
  b.output("x_cast", TensorProto::FLOAT);
  auto r = fuse(b);
  REQUIRE(r.refusals.empty());
  auto* qc = only(r.model.graph, "QLinearConv");
  std::string why;
  REQUIRE(qconv::ir::readInts(*qc->input(7), &why) == std::vector<int64_t>{2});
  REQUIRE(qc->input(7)->initializer()->data_type() == TensorProto::INT8);
  REQUIRE(qc->output(0)->elemType() == TensorProto::INT8);
  auto* dq = only(r.model.graph, "DequantizeLinear");  // y's reader reads it at the moved zero point
  REQUIRE(dq->input(0) == qc->output(0));
  REQUIRE(qconv::ir::readInts(*dq->input(2), &why) == std::vector<int64_t>{2});
  REQUIRE(dq->input(2)->initializer()->data_type() == TensorProto::INT8);
}

TEST_CASE("refusal: x and y of other types, and neither can move") {
  ConvSpec s;
  s.x_type = TensorProto::INT8;
  s.y_type = TensorProto::UINT8;
  auto b = convModel(s);
  b.node("Cast", {"x_q"}, {"x_cast"}, "cast_x");
  b.output("x_cast", TensorProto::FLOAT);
  b.node("Cast", {"y_q"}, {"y_cast"}, "cast_y");
  b.output("y_cast", TensorProto::FLOAT);
  REQUIRE(refusalOf(b) ==
          "conv_1: not fused: x is int8 but the output is uint8, and cast_y reads it, not a per-tensor DequantizeLinear "
          "(QLinearConv kernels take y of x's type)");
}

TEST_CASE("refusal: a Clip bound that is not constant") {
  ConvSpec s;
  s.activation = "Clip";
  s.y_zp = 0;
  auto b = convModel(s);
  b.input("clip_hi", TensorProto::FLOAT, {});  // the initializer is also a graph input: overridable
  REQUIRE(refusalOf(b) == "conv_1: not fused: Clip max bound is not a constant float scalar");
}
