// The passes the NPU targets (qnn, rknn) need, on small graphs: dequantize-moves puts data
// movement between DQ and Q at the parameters its tensor is read with; matmul-as-conv writes
// the MatMul on a quantized graph input as a 1x1 Conv with the transposed integers;
// add-zero-points gives each Q/DQ its zero point; requantize-blocked and requantize-wide list what
// they change;
// check-target names per-channel activations, blocks and weight-only ops with the runtime's reason.
#include <catch2/catch.hpp>

#include "model_builder.h"
#include "qconv/ir/tensor.h"

using namespace qtest;

namespace {

ModelBuilder poolOnUint8() { return poolModel(TensorProto::UINT8, 128); }

/// x [1, 4] -> MatMul(x, DQ(w [4, 2], scale ws, axis 0, block_size 2)) -> y; w's initializer is
/// added by the caller (a packed int4 one, or any other).
ModelBuilder blockedMatMul(const std::vector<int64_t>& scale_dims, const std::vector<float>& scales) {
  ModelBuilder b(21, 10);
  b.input("x", TensorProto::FLOAT, {1, 4});
  b.floats("ws", scale_dims, scales);
  auto& dq = b.node("DequantizeLinear", {"w", "ws"}, {"w_f"}, "dq_w");
  setInt(dq, "axis", 0);
  setInt(dq, "block_size", 2);
  b.node("MatMul", {"x", "w_f"}, {"y"}, "mm");
  b.output("y", TensorProto::FLOAT);
  return b;
}

}  // namespace

TEST_CASE("dequantize-moves: MaxPool on uint8 runs between DQ and Q at its tensor's parameters, for qnn") {
  auto m = poolOnUint8().build();
  Reporter r(forTarget("qnn"));
  qconv::pairQdq(m, r.ctx);
  qconv::dequantizeMoves(m, r.ctx);
  const auto* pool = only(m.graph, "MaxPool");
  const auto* dq = pool->input(0)->producer();
  REQUIRE(dq->opType() == "DequantizeLinear");
  REQUIRE(floatsOf(dq->input(1)) == std::vector<float>{0.1f});
  REQUIRE(intsOf(dq->input(2)) == std::vector<int64_t>{128});
  REQUIRE(pool->output(0)->uses().size() == 1);
  const auto* q = pool->output(0)->uses()[0].node;
  REQUIRE(q->opType() == "QuantizeLinear");
  REQUIRE(q->output(0)->name() == "p_q");  // the 8-bit tensor keeps its name and readers
  REQUIRE(q->output(0)->elemType() == TensorProto::UINT8);
  REQUIRE(r.ctx.counters().at("MaxPool moved between DQ and Q") == 1);
  qconv::checkTarget(m, r.ctx);
  REQUIRE(r.ctx.reports(qconv::Report::Unconvertible).empty());
}

TEST_CASE("dequantize-moves: nothing moves for a target that moves data on that type, or without a target") {
  for (const char* t : {"onnxruntime", ""}) {
    auto m = poolOnUint8().build();
    Reporter r(*t ? forTarget(t) : qconv::PassOptions{});
    qconv::pairQdq(m, r.ctx);
    qconv::dequantizeMoves(m, r.ctx);
    REQUIRE(only(m.graph, "MaxPool")->input(0)->producer()->opType() == "QuantizeLinear");
  }
}

TEST_CASE("dequantize-moves: an op computing new values stays, and check-target names it with the runtime's reason") {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1, 2, 4, 4});
  b.floats("s", {}, {0.1f});
  b.ints("z", TensorProto::UINT8, {}, {128});
  b.floats("scales", {4}, {1, 1, 2, 2});
  b.node("QuantizeLinear", {"x", "s", "z"}, {"x_q"}, "q_x");
  auto& resize = b.node("Resize", {"x_q", "", "scales"}, {"r_q"}, "resize");
  resize.add_attribute()->CopyFrom([] {
    onnx::AttributeProto a;
    a.set_name("mode");
    a.set_type(onnx::AttributeProto::STRING);
    a.set_s("linear");
    return a;
  }());
  b.node("DequantizeLinear", {"r_q", "s", "z"}, {"y"}, "dq_y");
  b.output("y", TensorProto::FLOAT);
  auto m = b.build();
  Reporter r(forTarget("qnn"));
  qconv::pairQdq(m, r.ctx);
  qconv::dequantizeMoves(m, r.ctx);
  REQUIRE(r.text.str().find("resize: not moved between DQ and Q: Resize computes new values from the integers") !=
          std::string::npos);
  qconv::checkTarget(m, r.ctx);
  const auto said = r.ctx.reports(qconv::Report::Unconvertible);
  REQUIRE(said.size() == 1);
  REQUIRE(said[0].find("resize: not run by --target qnn: Resize on uint8: QNN HTP (onnxruntime-qnn 2.7) fails the "
                       "session on data movement run on an 8-bit tensor") == 0);
}

TEST_CASE("matmul-as-conv: a MatMul on a quantized 2-D graph input becomes a 1x1 Conv of the transposed integers") {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {4, 3});
  b.floats("s", {}, {0.1f});
  b.ints("z", TensorProto::UINT8, {}, {128});
  b.ints("w", TensorProto::INT8, {3, 2}, {1, 2, 3, 4, 5, 6});
  b.floats("ws", {2}, {0.01f, 0.02f});
  b.ints("wz", TensorProto::INT8, {2}, {0, 0});
  b.floats("ys", {}, {0.2f});
  b.node("QuantizeLinear", {"x", "s", "z"}, {"x_q"}, "q_x");
  b.node("DequantizeLinear", {"x_q", "s", "z"}, {"x_f"}, "dq_x");
  setInt(b.node("DequantizeLinear", {"w", "ws", "wz"}, {"w_f"}, "dq_w"), "axis", 1);
  b.node("MatMul", {"x_f", "w_f"}, {"y_f"}, "mm");
  b.node("QuantizeLinear", {"y_f", "ys", "z"}, {"y_q"}, "q_y");
  b.node("DequantizeLinear", {"y_q", "ys", "z"}, {"y"}, "dq_y");
  b.output("y", TensorProto::FLOAT);
  auto m = b.build();
  Reporter r(forTarget("rknn"));
  qconv::matmulAsConv(m, r.ctx);
  REQUIRE(nodesOf(m.graph, "MatMul").empty());
  const auto* conv = only(m.graph, "Conv");
  REQUIRE(conv->name() == "mm");
  const auto* wdq = conv->input(1)->producer();
  REQUIRE(intsOf(wdq->input(0)) == std::vector<int64_t>{1, 3, 5, 2, 4, 6});  // [N, K, 1, 1]
  REQUIRE(qconv::ir::dimsOf(*wdq->input(0)->initializer()) == std::vector<int64_t>{2, 3, 1, 1});
  REQUIRE(wdq->attrInt("axis", -1) == 0);
  REQUIRE(only(m.graph, "Squeeze")->output(0)->name() == "y_f");
  REQUIRE(only(m.graph, "Unsqueeze")->input(0)->name() == "x_f");
  // only rknn asks for it
  auto again = b.build();
  Reporter q(forTarget("qnn"));
  qconv::matmulAsConv(again, q.ctx);
  REQUIRE(nodesOf(again.graph, "MatMul").size() == 1);
}

TEST_CASE("add-zero-points: a bias DequantizeLinear gets int32 zeros of its scale's shape, for rknn only") {
  ConvSpec spec;
  spec.per_channel = true;
  auto m = convModel(spec).build();
  auto* dqb = nodesOf(m.graph, "DequantizeLinear")[2];
  qconv::ir::Graph& g = m.graph;
  g.setInput(dqb, 2, nullptr);
  Reporter r(forTarget("rknn"));
  qconv::addZeroPoints(m, r.ctx);
  REQUIRE(dqb->input(2));
  REQUIRE(dqb->input(2)->initializer()->data_type() == TensorProto::INT32);
  REQUIRE(intsOf(dqb->input(2)) == std::vector<int64_t>{0, 0, 0});
  REQUIRE(r.ctx.counters().at("zero points made explicit") == 1);
}

TEST_CASE("requantize-wide: uint16 activations to uint8 for rknn with --approximate, each listed") {
  ModelBuilder b(21, 10);
  b.input("x", TensorProto::FLOAT, {1, 4});
  b.floats("s", {}, {0.001f});
  b.ints("z", TensorProto::UINT16, {}, {32768});
  b.node("QuantizeLinear", {"x", "s", "z"}, {"x_q"}, "q_x");
  b.node("DequantizeLinear", {"x_q", "s", "z"}, {"y"}, "dq_x");
  b.output("y", TensorProto::FLOAT);
  auto m = b.build();
  Reporter refused(forTarget("rknn"));
  qconv::requantizeWide(m, refused.ctx);  // without --approximate: nothing
  REQUIRE(refused.ctx.approximations().empty());
  Reporter r(forTarget("rknn", true));
  qconv::requantizeWide(m, r.ctx);
  const auto listed = r.ctx.approximations();
  REQUIRE(listed.size() == 2);
  REQUIRE(listed[0].find("q_x: uint16 requantized to uint8 at scale 0.257 (was 0.001), for --target rknn") == 0);
  const auto* q = only(m.graph, "QuantizeLinear");
  REQUIRE(floatsOf(q->input(1)) == std::vector<float>{0.001f * 257.0f});
  REQUIRE(intsOf(q->input(2)) == std::vector<int64_t>{128});  // 32768 / 257 = 127.5 -> 128 (ties to even)
  REQUIRE(q->output(0)->elemType() == TensorProto::UINT8);
}

namespace {

/// A conv whose output a float Relu reads, not a Q: its weight's DequantizeLinear is weight-only.
qconv::ir::Model weightOnlyConv(bool per_channel) {
  ConvSpec spec;
  spec.per_channel = per_channel;
  auto m = convModel(spec).build();
  qconv::ir::Graph& g = m.graph;
  auto* relu = g.createNode("Relu", "", {only(g, "Conv")->output(0)}, 1, nullptr);
  g.markGraphOutput(relu->output(0));
  return m;
}

}  // namespace

TEST_CASE("check-target: qnn names a per-channel activation and a weight-only op, each with HTP's reason") {
  auto m = weightOnlyConv(true);
  auto* dqw = nodesOf(m.graph, "DequantizeLinear")[1];
  auto* conv = only(m.graph, "Conv");
  Reporter r(forTarget("qnn"));
  qconv::checkTarget(m, r.ctx);
  const auto said = r.ctx.reports(qconv::Report::Unconvertible);
  REQUIRE(!said.empty());
  bool named = false;
  for (const auto& s : said)
    named = named || s.find(dqw->label() + ": not run by --target qnn: " + conv->label() +
                            " (Conv) reads it and computes in float: QNN HTP (onnxruntime-qnn 2.7) takes a "
                            "per-channel DequantizeLinear only inside a quantized op") == 0;
  REQUIRE(named);
}

TEST_CASE("check-target: qnn takes a per-tensor weight-only op (HTP runs it, measured)") {
  auto m = weightOnlyConv(false);
  Reporter r(forTarget("qnn"));
  qconv::checkTarget(m, r.ctx);
  for (const auto& s : r.ctx.reports(qconv::Report::Unconvertible)) REQUIRE(s.find("computes in float") == std::string::npos);
}

TEST_CASE("requantize-blocked: int4 blocks along K become int8 per output column, for qnn with --approximate") {
  ModelBuilder b = blockedMatMul({2, 2}, {0.5f, 0.25f, 0.1f, 1.0f});  // [K / 2, N]
  {  // int4, packed two to a byte, the first in the low nibble
    const std::vector<int> v = {-8, 7, 1, -1, 3, 2, -4, 0};
    onnx::TensorProto& t = *b.graph().add_initializer();
    t.set_name("w");
    t.set_data_type(22);  // INT4
    t.add_dims(4);
    t.add_dims(2);
    std::string raw;
    for (size_t i = 0; i < v.size(); i += 2) raw.push_back(static_cast<char>((v[i] & 0xF) | ((v[i + 1] & 0xF) << 4)));
    t.set_raw_data(raw);
  }
  auto m = b.build();
  Reporter r(forTarget("qnn", true));
  qconv::requantizeBlocked(m, r.ctx);
  const auto listed = r.ctx.approximations();
  REQUIRE(listed.size() == 1);
  REQUIRE(listed[0].find("dq_w: int4 weights in blocks of 2 requantized per channel (axis 1) as int8, for --target qnn") == 0);
  const auto* n = only(m.graph, "DequantizeLinear");
  REQUIRE(n->attrInt("block_size", 0) == 0);
  REQUIRE(n->attrInt("axis", -1) == 1);
  // column 0: -4, 0.5, 0.3, -0.4 -> scale 4/127; column 1: 1.75, -0.25, 2, 0 -> scale 2/127
  REQUIRE(floatsOf(n->input(1)) == std::vector<float>{4.0f / 127.0f, 2.0f / 127.0f});
  const std::vector<int64_t> q = intsOf(n->input(0));
  REQUIRE(q[0] == -127);  // -4
  REQUIRE(q[5] == 127);   // 2
  REQUIRE(n->input(0)->initializer()->data_type() == TensorProto::INT8);
  qconv::checkTarget(m, r.ctx);
  for (const auto& s : r.ctx.reports(qconv::Report::Unconvertible)) REQUIRE(s.find("in blocks") == std::string::npos);
}

TEST_CASE("requantize-blocked: a scale not of the blocked shape is refused, said, and left") {
  ModelBuilder b = blockedMatMul({1, 2}, {0.5f, 0.25f});  // should be [2, 2]
  b.ints("w", TensorProto::INT8, {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto m = b.build();
  Reporter r(forTarget("rknn", true));
  qconv::requantizeBlocked(m, r.ctx);
  REQUIRE(r.ctx.approximations().empty());
  REQUIRE(r.text.str().find("dq_w: not requantized per channel: its scale is not of the blocked shape") != std::string::npos);
  REQUIRE(only(m.graph, "DequantizeLinear")->attrInt("block_size", 0) == 2);
}

TEST_CASE("declare-shapes: for iree, an undeclared Reshape to a computed shape read by a QuantizeLinear gets its "
          "quantized form's shape; a constant shape, or another target, is left as it is") {
  for (const bool computed : {true, false}) {
    CAPTURE(computed);
    ModelBuilder b(13);
    b.input("x", TensorProto::FLOAT, {1, 4});
    if (computed) b.input("shape", TensorProto::INT64, {2});
    else b.ints("shape", TensorProto::INT64, {2}, {2, 2});
    b.floats("s", {}, {0.05f});
    b.ints("z", TensorProto::UINT8, {}, {128});
    b.node("Reshape", {"x", "shape"}, {"t"}, "reshape");
    b.node("QuantizeLinear", {"t", "s", "z"}, {"t_q"}, "q_t");
    b.node("DequantizeLinear", {"t_q", "s", "z"}, {"y"}, "dq_t");
    b.output("y", TensorProto::FLOAT, {2, 2});
    auto m = b.build();
    Reporter other(forTarget("onnxruntime"));
    qconv::declareShapes(m, other.ctx);
    const qconv::ir::Value* t = only(m.graph, "Reshape")->output(0);
    REQUIRE(t->info() == nullptr);
    Reporter r(forTarget("iree"));
    qconv::declareShapes(m, r.ctx);
    if (!computed) {
      REQUIRE(t->info() == nullptr);
      continue;
    }
    REQUIRE(r.ctx.counters().at("shapes declared") == 1);
    REQUIRE(t->info() != nullptr);
    const auto& tensor = t->info()->type().tensor_type();
    REQUIRE(tensor.elem_type() == TensorProto::FLOAT);
    REQUIRE(tensor.shape().dim_size() == 2);
    REQUIRE(tensor.shape().dim(0).dim_value() == 2);
    REQUIRE(tensor.shape().dim(1).dim_value() == 2);
  }
}

namespace {

/// a = DQ(Q(x)) -> Div(√2) -> Erf -> Q/DQ -> Add(1) -> Q/DQ -> Mul(a) -> Q/DQ -> Mul(0.5) -> Q/DQ -> y
ModelBuilder geluChain() {
  ModelBuilder b(18);
  b.input("x", TensorProto::FLOAT, {1, 8});
  b.floats("s", {}, {0.03f});
  b.ints("z", TensorProto::UINT8, {}, {128});
  b.floats("se", {}, {1.f / 127});
  b.floats("sqrt2", {}, {1.4142135f});
  b.floats("one", {}, {1.f});
  b.floats("half", {}, {0.5f});
  b.node("QuantizeLinear", {"x", "s", "z"}, {"xq"}, "q_x");
  b.node("DequantizeLinear", {"xq", "s", "z"}, {"a"}, "dq_x");
  b.node("Div", {"a", "sqrt2"}, {"d"}, "div");
  b.node("Erf", {"d"}, {"e"}, "erf");
  b.node("QuantizeLinear", {"e", "se", "z"}, {"eq"}, "q_e");
  b.node("DequantizeLinear", {"eq", "se", "z"}, {"ef"}, "dq_e");
  b.node("Add", {"ef", "one"}, {"p"}, "add");
  b.floats("sp", {}, {2.f / 255});  // 1 + erf in [0, 2]
  b.ints("z0", TensorProto::UINT8, {}, {0});
  b.node("QuantizeLinear", {"p", "sp", "z0"}, {"pq"}, "q_p");
  b.node("DequantizeLinear", {"pq", "sp", "z0"}, {"pf"}, "dq_p");
  b.node("Mul", {"a", "pf"}, {"m"}, "mul");
  b.floats("s2", {}, {0.06f});  // a * (1 + erf): twice a's range
  b.node("QuantizeLinear", {"m", "s2", "z"}, {"mq"}, "q_m");
  b.node("DequantizeLinear", {"mq", "s2", "z"}, {"mf"}, "dq_m");
  b.node("Mul", {"mf", "half"}, {"g"}, "mul_half");
  b.node("QuantizeLinear", {"g", "s", "z"}, {"gq"}, "q_g");
  b.node("DequantizeLinear", {"gq", "s", "z"}, {"y"}, "dq_g");
  b.output("y", TensorProto::FLOAT);
  return b;
}

}  // namespace

TEST_CASE("approximate-gelu: for qnn with --approximate, the Erf chain becomes one Gelu, listed with its worst error; "
          "without --approximate, or for another target, nothing changes") {
  {
    auto m = geluChain().build();
    Reporter plain(forTarget("qnn"));
    qconv::approximateGelu(m, plain.ctx);
    Reporter other(forTarget("onnxruntime", true));
    qconv::approximateGelu(m, other.ctx);
    REQUIRE(nodesOf(m.graph, "Erf").size() == 1);
    REQUIRE(nodesOf(m.graph, "Gelu").empty());
  }
  auto m = geluChain().build();
  Reporter r(forTarget("qnn", true));
  qconv::approximateGelu(m, r.ctx);
  REQUIRE(nodesOf(m.graph, "Erf").empty());
  REQUIRE(nodesOf(m.graph, "Div").empty());
  REQUIRE(nodesOf(m.graph, "Mul").empty());
  REQUIRE(nodesOf(m.graph, "Add").empty());
  const qconv::ir::Node* gelu = only(m.graph, "Gelu");
  REQUIRE(gelu->input(0)->producer()->opType() == "DequantizeLinear");   // a
  REQUIRE(gelu->output(0)->uses().size() == 1);
  REQUIRE(gelu->output(0)->uses()[0].node->opType() == "QuantizeLinear");  // q_g
  REQUIRE(nodesOf(m.graph, "QuantizeLinear").size() == 2);  // q_x, q_g: the three inside are gone
  const auto listed = r.ctx.approximations();
  REQUIRE(listed.size() == 1);
  const std::string head = "the Gelu written with Erf (and 3 quantizations inside it) as one Gelu, for --target qnn: worst "
                           "error ";
  REQUIRE(listed[0].find(head) != std::string::npos);
  CAPTURE(listed[0]);
  REQUIRE(std::stoi(listed[0].substr(listed[0].find(head) + head.size())) <= 2);
  REQUIRE(r.ctx.counters().at("Gelu chains written as one Gelu") == 1);
}

TEST_CASE("approximate-gelu: a chain whose constant is not 1 is refused with the requirement that failed") {
  auto b = geluChain();
  b.floats("one_and_a_bit", {}, {1.5f});
  auto m0 = b.build();
  qconv::ir::Node* add = only(m0.graph, "Add");
  qconv::ir::Value* k = nullptr;
  for (const auto& v : m0.graph.allValues())
    if (v->name() == "one_and_a_bit") k = v.get();
  REQUIRE(k);
  m0.graph.setInput(add, 1, k);
  Reporter r(forTarget("qnn", true));
  qconv::approximateGelu(m0, r.ctx);
  REQUIRE(nodesOf(m0.graph, "Erf").size() == 1);
  REQUIRE(r.text.str().find("erf: not written as one Gelu: Erf is not followed by an Add of 1") != std::string::npos);
}

namespace {

/// geluChain's Add(1) output p -> Q/DQ -> pf, then the multiplications in another order:
/// kByHalfThenA: pf * 0.5 -> Q/DQ -> * a;  kByHalfOfA: pf * (a * 0.5 -> Q/DQ).
ModelBuilder geluChainOrdered(bool half_of_a) {
  ModelBuilder b = geluChain();
  auto* g = b.proto().mutable_graph();
  // drop the nodes from "mul" on and write the other order
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (const auto& n : g->node())
    if (n.name() != "mul" && n.name() != "q_m" && n.name() != "dq_m" && n.name() != "mul_half" && n.name() != "q_g" &&
        n.name() != "dq_g")
      *kept.Add() = n;
  g->mutable_node()->Swap(&kept);
  if (half_of_a) {
    b.node("Mul", {"a", "half"}, {"h"}, "mul_half");
    b.node("QuantizeLinear", {"h", "s", "z"}, {"hq"}, "q_h");
    b.node("DequantizeLinear", {"hq", "s", "z"}, {"hf"}, "dq_h");
    b.node("Mul", {"pf", "hf"}, {"g"}, "mul");
  } else {
    b.floats("sm", {}, {1.f / 255});  // (1 + erf) / 2 in [0, 1]
    b.node("Mul", {"pf", "half"}, {"m"}, "mul_half");
    b.node("QuantizeLinear", {"m", "sm", "z0"}, {"mq"}, "q_m");
    b.node("DequantizeLinear", {"mq", "sm", "z0"}, {"mf"}, "dq_m");
    b.node("Mul", {"mf", "a"}, {"g"}, "mul");
  }
  b.node("QuantizeLinear", {"g", "s", "z"}, {"gq"}, "q_g");
  b.node("DequantizeLinear", {"gq", "s", "z"}, {"y"}, "dq_g");
  return b;
}

}  // namespace

TEST_CASE("approximate-gelu: (1 + erf) * 0.5 * a and (1 + erf) * (a * 0.5) become one Gelu too, each listed") {
  for (const bool half_of_a : {false, true}) {
    CAPTURE(half_of_a);
    auto m = geluChainOrdered(half_of_a).build();
    Reporter r(forTarget("qnn", true));
    qconv::approximateGelu(m, r.ctx);
    REQUIRE(nodesOf(m.graph, "Erf").empty());
    REQUIRE(nodesOf(m.graph, "Mul").empty());
    const qconv::ir::Node* gelu = only(m.graph, "Gelu");
    REQUIRE(gelu->input(0)->producer()->name() == "dq_x");
    REQUIRE(nodesOf(m.graph, "QuantizeLinear").size() == 2);  // q_x and q_g
    const auto listed = r.ctx.approximations();
    REQUIRE(listed.size() == 1);
    const std::string head = "the Gelu written with Erf (and 3 quantizations inside it) as one Gelu, for --target qnn: worst "
                             "error ";
    const size_t at = listed[0].find(head);
    REQUIRE(at != std::string::npos);
    // every value of the 8-bit input, the chain against Gelu: the roundings inside move it by a step or two
    const int worst = std::stoi(listed[0].substr(at + head.size()));
    CAPTURE(listed[0]);
    REQUIRE(worst >= 0);
    REQUIRE(worst <= 2);
  }
}
