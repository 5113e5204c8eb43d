// fuse-qlinear-conv: the operand layout of the fused node, and every refusal's message.
#include <catch2/catch.hpp>

#include "model_builder.h"

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
  REQUIRE(qc->input(8)->name() == "b_dq");  // still float: fix-bias-scale runs next
  REQUIRE(qc->output(0)->name() == "y_q");  // keeps the Q's output and its readers
  REQUIRE(qc->output(0)->uses()[0].node->name() == "dq_y");
  REQUIRE(qc->attribute("pads"));
  REQUIRE(qc->attribute("kernel_shape"));
  // the activation and weight DQs nobody reads are gone; the input Q stays
  REQUIRE(nodesOf(g, "DequantizeLinear").size() == 2);  // bias DQ (until fix-bias-scale) and dq_y
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
  s.x_type = TensorProto::INT8;
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
