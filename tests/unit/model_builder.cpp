#include "model_builder.h"

#include "qconv/targets/target.h"

#include <catch2/catch.hpp>

#include "qconv/io/model_io.h"
#include "qconv/ir/tensor.h"

namespace qtest {

ModelBuilder::ModelBuilder(int64_t opset, int64_t ir_version) {
  model_.set_ir_version(ir_version);
  auto* op = model_.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  model_.set_producer_name("qconv-unit-tests");
  model_.mutable_graph()->set_name("g");
}

namespace {
void fillInfo(onnx::ValueInfoProto* vi, const std::string& name, int32_t type, const std::vector<int64_t>& dims) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(type);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}
}  // namespace

void ModelBuilder::input(const std::string& name, int32_t type, const std::vector<int64_t>& dims) {
  fillInfo(graph().add_input(), name, type, dims);
}

void ModelBuilder::output(const std::string& name, int32_t type, const std::vector<int64_t>& dims) {
  fillInfo(graph().add_output(), name, type, dims);
}

void ModelBuilder::floats(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values) {
  auto t = qconv::ir::makeFloatTensor(dims, values);
  t->set_name(name);
  *graph().add_initializer() = *t;
}

void ModelBuilder::ints(const std::string& name, int32_t type, const std::vector<int64_t>& dims,
                        const std::vector<int64_t>& values) {
  auto t = qconv::ir::makeIntTensor(type, dims, values);
  t->set_name(name);
  *graph().add_initializer() = *t;
}

onnx::NodeProto& ModelBuilder::node(const std::string& op, const std::vector<std::string>& inputs,
                                    const std::vector<std::string>& outputs, const std::string& name) {
  auto* n = graph().add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return *n;
}

qconv::ir::Model ModelBuilder::build() const { return qconv::io::importModel(model_, "test.onnx"); }

void setInt(onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void setInts(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void setFloat(onnx::NodeProto& n, const std::string& name, float v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

std::vector<qconv::ir::Node*> nodesOf(const qconv::ir::Graph& g, const std::string& op) {
  std::vector<qconv::ir::Node*> out;
  for (const auto& n : g.nodes())
    if (n->opType() == op) out.push_back(n);
  return out;
}

qconv::ir::Node* only(const qconv::ir::Graph& g, const std::string& op) {
  auto ns = nodesOf(g, op);
  REQUIRE(ns.size() == 1);
  return ns[0];
}

std::vector<int64_t> intsOf(const qconv::ir::Value* v) {
  REQUIRE(v);
  REQUIRE(v->initializer());
  std::string why;
  auto r = qconv::ir::readInts(*v, &why);
  REQUIRE(r);
  return *r;
}

std::vector<float> floatsOf(const qconv::ir::Value* v) {
  REQUIRE(v);
  REQUIRE(v->initializer());
  std::string why;
  auto r = qconv::ir::readFloats(*v, &why);
  REQUIRE(r);
  return *r;
}

ModelBuilder poolModel(int32_t type, int64_t zp) {
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
  return b;
}

qconv::PassOptions forTarget(const char* name, bool approximate) {
  qconv::PassOptions o;
  o.target = qconv::findTarget(name);
  o.approximate = approximate;
  return o;
}

Reporter::Reporter(qconv::PassOptions options)
    : sink(text), diagnostics(&sink, 3, "test.onnx"), ctx(diagnostics, options, "test.onnx") {}

ModelBuilder convModel(const ConvSpec& s) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1, s.cin, 4, 4});
  b.floats("x_scale", {}, {s.x_scale});
  b.ints("x_zp", s.x_type, {}, {s.x_type == TensorProto::UINT8 ? s.x_zp : 0});
  b.node("QuantizeLinear", {"x", "x_scale", "x_zp"}, {"x_q"}, "q_x");
  b.node("DequantizeLinear", {"x_q", "x_scale", "x_zp"}, {"x_dq"}, "dq_x");

  std::vector<int64_t> w;
  const int64_t shift = s.w_type == TensorProto::UINT8 ? 3 : 0;  // uint8 weights around zero point 3
  for (int64_t i = 0; i < s.cout * s.cin * 9; ++i) w.push_back(i % 7 - 3 + shift);
  b.ints("w", s.w_type, {s.cout, s.cin, 3, 3}, w);
  std::vector<float> wscale;
  for (int64_t c = 0; c < (s.per_channel ? s.cout : 1); ++c) wscale.push_back(s.w_scale * static_cast<float>(c + 1));
  b.floats("w_scale", s.per_channel ? std::vector<int64_t>{s.cout} : std::vector<int64_t>{}, wscale);
  b.ints("w_zp", s.w_type, s.per_channel ? std::vector<int64_t>{s.cout} : std::vector<int64_t>{},
         std::vector<int64_t>(wscale.size(), shift));
  auto& dqw = b.node("DequantizeLinear", {"w", "w_scale", "w_zp"}, {"w_dq"}, "dq_w");
  if (s.per_channel) setInt(dqw, "axis", 0);

  std::vector<std::string> convIn = {"x_dq", "w_dq"};
  if (s.bias) {
    std::vector<float> bscale;
    for (float ws : wscale) bscale.push_back(s.bias_scale == 0.0f ? s.x_scale * ws : s.bias_scale);
    b.floats("b_scale", s.per_channel ? std::vector<int64_t>{s.cout} : std::vector<int64_t>{}, bscale);
    std::vector<int64_t> bias;
    for (int64_t c = 0; c < s.cout; ++c) bias.push_back(100 * (c + 1) - 150);
    b.ints("b", TensorProto::INT32, {s.cout}, bias);
    auto& dqb = b.node("DequantizeLinear", {"b", "b_scale"}, {"b_dq"}, "dq_b");
    if (s.per_channel) setInt(dqb, "axis", 0);
    convIn.push_back("b_dq");
  }
  auto& conv = b.node("Conv", convIn, {"conv_y"}, "conv_1");
  setInts(conv, "kernel_shape", {3, 3});
  setInts(conv, "pads", {1, 1, 1, 1});
  std::string y = "conv_y";
  if (s.activation == "Relu") {
    b.node("Relu", {y}, {"act_y"}, "relu_1");
    y = "act_y";
  } else if (s.activation == "Clip") {
    b.floats("clip_lo", {}, {s.clip_lo});
    b.floats("clip_hi", {}, {s.clip_hi});
    b.node("Clip", {y, "clip_lo", "clip_hi"}, {"act_y"}, "clip_1");
    y = "act_y";
  }
  b.floats("y_scale", {}, {s.y_scale});
  b.ints("y_zp", s.y_type, {}, {s.y_zp});
  b.node("QuantizeLinear", {y, "y_scale", "y_zp"}, {"y_q"}, "q_y");
  b.node("DequantizeLinear", {"y_q", "y_scale", "y_zp"}, {"y"}, "dq_y");
  b.output("y", TensorProto::FLOAT, {1, s.cout, 4, 4});
  return b;
}

}  // namespace qtest
