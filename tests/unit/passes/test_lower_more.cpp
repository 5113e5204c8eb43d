// lower-vitis-qdq, lower-fake-quantize, unfuse-qop (QGemm) and lower-integer-ops; the stages validate,
// redeclare-opset and refuse-foreign-ops; and every rewriting pass on nodes with a missing or
// empty output (the driver never offers them to a selector).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <set>
#include <cstdio>
#include <sstream>

#include "model_builder.h"
#include "qconv/diag.h"
#include "qconv/io/model_io.h"
#include "qconv/pipeline/run.h"

using namespace qtest;
using qconv::Report;

namespace {

void addDomain(ModelBuilder& b, const std::string& domain) {
  auto* op = b.proto().add_opset_import();
  op->set_domain(domain);
  op->set_version(1);
}

/// x -> vai::QuantizeLinear(valmin, valmax, s, z, method) -> q -> vai::DequantizeLinear(s, z) -> y
ModelBuilder vaiModel(int64_t method, int64_t valmin = -128, int64_t valmax = 127, bool constant_scale = true) {
  ModelBuilder b;
  addDomain(b, "vai");
  b.input("x", TensorProto::FLOAT, {1, 4});
  b.ints("valmin", TensorProto::INT32, {}, {valmin});
  b.ints("valmax", TensorProto::INT32, {}, {valmax});
  if (constant_scale) b.floats("s", {}, {0.25f});
  else b.input("s", TensorProto::FLOAT, {});
  b.ints("z", TensorProto::INT8, {}, {0});
  b.ints("method", TensorProto::INT8, {}, {method});
  b.node("QuantizeLinear", {"x", "valmin", "valmax", "s", "z", "method"}, {"q"}, "fix_quant").set_domain("vai");
  b.node("DequantizeLinear", {"q", "s", "z"}, {"y"}, "fix_dequant").set_domain("vai");
  b.output("y", TensorProto::FLOAT);
  return b;
}

/// x -> FakeQuantize(il, ih, ol, oh; levels) -> y, il = ol = -1.28, ih = oh = 1.27 (int8 grid of 0.01)
ModelBuilder fakeQuantizeModel(int64_t levels, float oh = 1.27f) {
  ModelBuilder b;
  addDomain(b, "org.openvinotoolkit");
  b.input("x", TensorProto::FLOAT, {1, 4});
  b.floats("il", {}, {-1.28f});
  b.floats("ih", {}, {1.27f});
  b.floats("ol", {}, {-1.28f});
  b.floats("oh", {}, {oh});
  auto& fq = b.node("FakeQuantize", {"x", "il", "ih", "ol", "oh"}, {"y"}, "fq_1");
  fq.set_domain("org.openvinotoolkit");
  setInt(fq, "levels", levels);
  b.output("y", TensorProto::FLOAT);
  return b;
}

/// a:uint8 -> com.microsoft QGemm(a_s, a_zp, B:int8 [4, 3], b_s, b_zp, C:int32 [3], y_s, y_zp) -> y:uint8
ModelBuilder qgemmModel(bool constant_b_scale) {
  ModelBuilder b;
  addDomain(b, "com.microsoft");
  b.input("a", TensorProto::UINT8, {2, 4});
  b.floats("a_s", {}, {0.5f});
  b.ints("a_zp", TensorProto::UINT8, {}, {128});
  b.ints("B", TensorProto::INT8, {4, 3}, {1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12});
  if (constant_b_scale) b.floats("b_s", {}, {0.25f});
  else b.input("b_s", TensorProto::FLOAT, {});
  b.ints("b_zp", TensorProto::INT8, {}, {0});
  b.ints("C", TensorProto::INT32, {3}, {10, -20, 30});
  b.floats("y_s", {}, {0.75f});
  b.ints("y_zp", TensorProto::UINT8, {}, {100});
  b.node("QGemm", {"a", "a_s", "a_zp", "B", "b_s", "b_zp", "C", "y_s", "y_zp"}, {"y"}, "qg").set_domain("com.microsoft");
  b.output("y", TensorProto::UINT8);
  return b;
}

/// Aidge's integer export: x -> Q(s_in) -> xq:int8 -> Conv(xq, w:int8, b) -> acc -> Q(acc, S) -> yq -> Relu -> r
ModelBuilder integerConvModel(bool int32_bias) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1, 1, 3, 3});
  b.floats("s_in", {}, {0.5f});
  b.ints("z_in", TensorProto::INT8, {}, {0});
  b.node("QuantizeLinear", {"x", "s_in", "z_in"}, {"xq"}, "q_in");
  b.ints("w", TensorProto::INT8, {2, 1, 1, 1}, {3, -2});
  if (int32_bias) b.ints("b", TensorProto::INT32, {2}, {5, -7});
  else b.floats("b", {2}, {5.0f, -7.0f});
  b.node("Conv", {"xq", "w", "b"}, {"acc"}, "conv_int");
  b.floats("S", {}, {4.0f});
  b.ints("z_out", TensorProto::INT8, {}, {0});
  b.node("QuantizeLinear", {"acc", "S", "z_out"}, {"yq"}, "q_out");
  b.node("Relu", {"yq"}, {"r"}, "relu_int");
  b.output("r", TensorProto::INT8);
  return b;
}

bool hasOp(const qconv::ir::Graph& g, const std::string& op) { return !nodesOf(g, op).empty(); }

bool anyDomainNode(const qconv::ir::Graph& g, const std::string& domain) {
  for (const auto& n : g.nodes())
    if (g.isAlive(n) && n->domain() == domain) return true;
  return false;
}

}  // namespace

// ---- lower-vitis-qdq ----

TEST_CASE("vai Q/DQ rounding half to even with zero point 0 become standard Q -> Cast and DQ of the integers") {
  auto m = vaiModel(/*method=*/1).build();
  Reporter r;
  qconv::lowerVitisQdq(m, r.ctx);
  REQUIRE_FALSE(anyDomainNode(m.graph, "vai"));
  auto* q = only(m.graph, "QuantizeLinear");
  REQUIRE(q->output(0)->elemType() == TensorProto::INT8);
  auto* dq = only(m.graph, "DequantizeLinear");
  REQUIRE(dq->input(0) == q->output(0));  // reads the integers, not the Cast's floats
  REQUIRE(nodesOf(m.graph, "Cast").empty());  // the integers' float copy nobody reads any more went
  REQUIRE(r.ctx.counters().at("vai::QuantizeLinear lowered") == 1);
  REQUIRE(r.ctx.counters().at("vai::DequantizeLinear lowered") == 1);
}

TEST_CASE("vai Q with another rounding method is emulated with float ops and says why") {
  auto m = vaiModel(/*method=*/2).build();
  Reporter r;
  qconv::lowerVitisQdq(m, r.ctx);
  REQUIRE_FALSE(anyDomainNode(m.graph, "vai"));
  REQUIRE_FALSE(hasOp(m.graph, "QuantizeLinear"));
  REQUIRE(hasOp(m.graph, "Div"));
  REQUIRE(r.ctx.reports(Report::Done).size() == 2);
  REQUIRE(r.ctx.reports(Report::Done)[0].rfind("fix_quant: vai::QuantizeLinear emulated exactly with float ops (no Q/DQ form: "
                                               "rounding method 2",
                                               0) == 0);
  REQUIRE(r.ctx.reports(Report::Done)[1] ==
          "fix_dequant: vai::DequantizeLinear emulated exactly with float ops (its input is not a lowered quantize)");
}

TEST_CASE("vai Q/DQ with a scale that is not constant stay, unconvertible, with the reason") {
  auto m = vaiModel(1, -128, 127, /*constant_scale=*/false).build();
  Reporter r;
  qconv::lowerVitisQdq(m, r.ctx);
  REQUIRE(anyDomainNode(m.graph, "vai"));
  REQUIRE(r.ctx.unconvertibleReason("fix_quant") ==
          "vai::QuantizeLinear not converted: scale is not a constant positive finite tensor");
  REQUIRE(r.ctx.unconvertibleReason("fix_dequant") ==
          "vai::DequantizeLinear not converted: scale is not a constant positive finite tensor");
}

// ---- lower-fake-quantize ----

TEST_CASE("FakeQuantize becomes its exact float emulation by default, and says why not Q/DQ") {
  auto m = fakeQuantizeModel(256).build();
  Reporter r;
  qconv::lowerFakeQuantize(m, r.ctx);
  REQUIRE_FALSE(anyDomainNode(m.graph, "org.openvinotoolkit"));
  REQUIRE(m.graph.outputs()[0]->producer()->opType() == "Where");
  REQUIRE(hasOp(m.graph, "Round"));
  REQUIRE(r.ctx.reports(Report::Done).at(0).rfind("fq_1: FakeQuantize emulated exactly with float ops (its formula", 0) == 0);
  REQUIRE(r.ctx.approximations().empty());
}

TEST_CASE("with --approximate a uniform FakeQuantize becomes Q -> DQ, listed as an approximation") {
  qconv::PassOptions o;
  o.approximate = true;
  Reporter r(o);
  auto m = fakeQuantizeModel(256).build();
  qconv::lowerFakeQuantize(m, r.ctx);
  auto* q = only(m.graph, "QuantizeLinear");
  REQUIRE(q->output(0)->elemType() == TensorProto::INT8);
  REQUIRE(only(m.graph, "DequantizeLinear")->output(0) == m.graph.outputs()[0]);
  REQUIRE(r.ctx.approximations().size() == 1);
  REQUIRE(r.ctx.approximations()[0].rfind("fq_1: FakeQuantize written as QuantizeLinear/DequantizeLinear (scale 0.01", 0) == 0);

  // an output range unlike the input range is emulated even then, with the reason
  Reporter r2(o);
  auto m2 = fakeQuantizeModel(256, 2.0f).build();
  qconv::lowerFakeQuantize(m2, r2.ctx);
  REQUIRE_FALSE(hasOp(m2.graph, "QuantizeLinear"));
  REQUIRE(r2.ctx.reports(Report::Done).at(0) ==
          "fq_1: FakeQuantize emulated exactly with float ops (output range differs from input range)");
}

TEST_CASE("a FakeQuantize with levels < 2 stays, unconvertible") {
  auto m = fakeQuantizeModel(1).build();
  Reporter r;
  qconv::lowerFakeQuantize(m, r.ctx);
  REQUIRE(anyDomainNode(m.graph, "org.openvinotoolkit"));
  REQUIRE(r.ctx.unconvertibleReason("fq_1") ==
          "FakeQuantize not converted: needs 5 inputs, levels from 2 to 2^24 and opset 12 (levels 1, opset 13)");
}

// ---- unfuse-qop on QGemm ----

TEST_CASE("QGemm becomes DQ(A), DQ(B), DQ(C at alpha*a_s*b_s) -> Gemm -> Q with the documented operands") {
  auto m = qgemmModel(true).build();
  Reporter r;
  qconv::unfuseQop(m, r.ctx);
  REQUIRE_FALSE(anyDomainNode(m.graph, "com.microsoft"));
  auto* gemm = only(m.graph, "Gemm");
  REQUIRE(gemm->name() == "qg");  // the node's name goes to the float op
  REQUIRE(gemm->inputs().size() == 3);
  auto* dqa = gemm->input(0)->producer();
  auto* dqb = gemm->input(1)->producer();
  auto* dqc = gemm->input(2)->producer();
  REQUIRE((dqa->is("DequantizeLinear") && dqa->input(0)->name() == "a" && dqa->input(1)->name() == "a_s"));
  REQUIRE((dqb->is("DequantizeLinear") && dqb->input(0)->name() == "B" && dqb->input(2)->name() == "b_zp"));
  REQUIRE(dqc->input(0)->name() == "C");
  REQUIRE(floatsOf(dqc->input(1)) == std::vector<float>{0.5f * 0.25f});  // alpha * a_s * b_s
  auto* q = only(m.graph, "QuantizeLinear");
  REQUIRE(q->name() == "qg_q");
  REQUIRE(q->output(0) == m.graph.outputs()[0]);  // the output keeps its name and type
  REQUIRE(q->input(1)->name() == "y_s");
}

TEST_CASE("QGemm with a b_scale that is not constant stays com.microsoft, with the reason") {
  auto m = qgemmModel(false).build();
  Reporter r;
  qconv::unfuseQop(m, r.ctx);
  REQUIRE(anyDomainNode(m.graph, "com.microsoft"));
  REQUIRE(r.ctx.refusals().size() == 1);
  REQUIRE(r.ctx.refusals()[0] == "qg: stays com.microsoft QGemm: the scale of C (the product of the input's and the "
                                 "weight's) needs both constant and positive");
  REQUIRE(r.ctx.unconvertibleReason("qg").empty());  // onnxruntime runs it
}

// ---- lower-integer-ops ----

TEST_CASE("an integer Conv is rebuilt on DequantizeLinear at scale 1; an op on its int8 output is wrapped") {
  auto m = integerConvModel(true).build();
  Reporter r;
  qconv::lowerIntegerOps(m, r.ctx);
  auto* conv = only(m.graph, "Conv");
  for (size_t k = 0; k < 3; ++k) {
    auto* dq = conv->input(k)->producer();
    REQUIRE(dq);
    REQUIRE(dq->is("DequantizeLinear"));
    REQUIRE(floatsOf(dq->input(1)) == std::vector<float>{1.0f});  // integer units: exact
  }
  REQUIRE(conv->input(2)->producer()->input(0)->name() == "b");
  REQUIRE(conv->output(0)->elemType() == TensorProto::FLOAT);
  // Relu on int8: DQ(1) -> Relu -> Q(1), the Q keeping the name and the graph output
  auto* relu = only(m.graph, "Relu");
  REQUIRE(relu->input(0)->producer()->is("DequantizeLinear"));
  REQUIRE(m.graph.outputs()[0]->producer()->is("QuantizeLinear"));
  REQUIRE(m.graph.outputs()[0]->producer()->name() == "relu_int");
  REQUIRE(r.ctx.counters().at("integer conv rebuilt as QDQ") == 1);
  REQUIRE(r.ctx.counters().at("integer op wrapped in DQ/Q") == 1);
}

TEST_CASE("an integer Conv with a float bias is not rebuilt: unconvertible, naming the condition") {
  auto m = integerConvModel(false).build();
  Reporter r;
  qconv::lowerIntegerOps(m, r.ctx);
  REQUIRE(r.ctx.unconvertibleReason("conv_int") ==
          "integer Conv not rebuilt (standard Conv takes no int8 input): its bias is not a constant int32");
}

TEST_CASE("with --approximate the integer Conv gets absolute scales, listed as an approximation") {
  qconv::PassOptions o;
  o.approximate = true;
  Reporter r(o);
  auto m = integerConvModel(true).build();
  qconv::lowerIntegerOps(m, r.ctx);
  auto* conv = only(m.graph, "Conv");
  REQUIRE(floatsOf(conv->input(0)->producer()->input(1)) == std::vector<float>{0.5f});  // s_x from the input quantizer
  REQUIRE(floatsOf(nodesOf(m.graph, "QuantizeLinear")[1]->input(1)) == std::vector<float>{0.5f * 4.0f});
  REQUIRE(r.ctx.approximations().size() == 1);
  REQUIRE(r.ctx.approximations()[0].rfind("conv_int: integer Conv rebuilt with absolute scales", 0) == 0);
}

// ---- the stages ----

TEST_CASE("validate names file and node for an unknown operator and a bad scale") {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {4});
  b.node("NoSuchOp", {"x"}, {"y"}, "odd");
  b.output("y", TensorProto::FLOAT);
  auto m = b.build();
  Reporter r;
  try {
    qconv::validate(m, r.ctx);
    FAIL("accepted an unknown operator");
  } catch (const qconv::Error& e) {
    REQUIRE(e.code() == qconv::ExitCode::BadInput);
    REQUIRE(std::string(e.what()) == "test.onnx: node 'odd' (NoSuchOp): not an ai.onnx operator at opset 13");
  }
  ModelBuilder q;
  q.input("x", TensorProto::FLOAT, {4});
  q.floats("s", {}, {0.0f});
  q.node("QuantizeLinear", {"x", "s"}, {"y"}, "quant");
  q.output("y", TensorProto::UINT8);
  auto mq = q.build();
  REQUIRE_THROWS_WITH(qconv::validate(mq, r.ctx), "test.onnx: node 'quant' (QuantizeLinear): scale 0 is not positive and finite");
}

TEST_CASE("refuse-foreign-ops names the first node left, its reason and how many more") {
  auto m = vaiModel(1, -128, 127, false).build();
  Reporter r;
  qconv::lowerVitisQdq(m, r.ctx);
  try {
    qconv::refuseForeignOps(m, r.ctx);
    FAIL("a vai node was left");
  } catch (const qconv::Error& e) {
    REQUIRE(e.code() == qconv::ExitCode::Unsupported);
    REQUIRE(std::string(e.what()) == "test.onnx: fix_quant: vai::QuantizeLinear not converted: scale is not a constant "
                                     "positive finite tensor (and 1 more nodes refused)");
  }
  auto clean = convModel({}).build();
  REQUIRE_NOTHROW(qconv::refuseForeignOps(clean, r.ctx));
}

TEST_CASE("redeclare-opset moves the opset when no node is in the way, and names the node that is") {
  qconv::PassOptions o;
  o.opset = 12;
  Reporter r(o);
  auto m = convModel({}).build();  // opset 13: Conv, Q, DQ per tensor use nothing 13 added
  qconv::redeclareOpset(m, r.ctx);
  REQUIRE(r.ctx.reports(Report::Unconvertible).empty());
  REQUIRE(qconv::ir::defaultOpset(m) == 12);
  o.opset = 10;  // QuantizeLinear-13 added axis; convModel's per-channel weight DQ sets it
  Reporter r2(o);
  ConvSpec s;
  s.per_channel = true;
  auto m2 = convModel(s).build();
  qconv::redeclareOpset(m2, r2.ctx);
  REQUIRE(qconv::ir::defaultOpset(m2) == 13);
  REQUIRE(r2.ctx.reports(Report::Unconvertible).size() == 1);
  REQUIRE(r2.ctx.reports(Report::Unconvertible)[0] ==
          "dq_w: cannot declare opset 10 (the model declares 13): DequantizeLinear version 13 is in the way: the node sets "
          "attribute axis, which it added");
}

// ---- a node with a missing or empty output, in every rewriting pass ----

namespace {

struct OutputLess {
  const char* pass;
  void (*run)(qconv::ir::Model&, qconv::PassContext&);
  ModelBuilder (*make)();
  const char* node;  // the node whose output goes
  bool foreign;      // in a foreign quantization domain: unconvertible
};

ModelBuilder vai() { return vaiModel(1); }
ModelBuilder fq() { return fakeQuantizeModel(256); }
ModelBuilder qgemm() { return qgemmModel(true); }
ModelBuilder intConv() { return integerConvModel(true); }
ModelBuilder conv() { return convModel({}); }
ModelBuilder qonnx() {
  ModelBuilder b;
  addDomain(b, "qonnx.custom_op.general");
  b.input("x", TensorProto::FLOAT, {1, 4});
  b.floats("s", {}, {0.5f});
  b.floats("z", {}, {0.0f});
  b.floats("bits", {}, {8.0f});
  b.node("Quant", {"x", "s", "z", "bits"}, {"y"}, "quant_1").set_domain("qonnx.custom_op.general");
  b.output("y", TensorProto::FLOAT);
  return b;
}
ModelBuilder contrib() {
  ModelBuilder b;
  addDomain(b, "com.amd.quark");
  b.input("x", TensorProto::FLOAT, {1, 4});
  b.floats("s", {}, {0.5f});
  b.ints("z", TensorProto::INT8, {}, {0});
  b.node("ExtendedDequantizeLinear", {"x", "s", "z"}, {"y"}, "dq_quark").set_domain("com.amd.quark");
  b.output("y", TensorProto::FLOAT);
  return b;
}
ModelBuilder primitive() {
  ModelBuilder b;
  b.input("q", TensorProto::INT8, {4});
  b.node("Cast", {"q"}, {"f"}, "cast");
  setInt(b.graph().mutable_node(0)[0], "to", TensorProto::FLOAT);
  b.floats("s", {}, {0.5f});
  b.node("Mul", {"f", "s"}, {"y"}, "mul");
  b.output("y", TensorProto::FLOAT);
  return b;
}

/// `make()` with node `name`'s outputs removed (none) or renamed "" (empty), and the graph
/// outputs it fed dropped.
ModelBuilder withoutOutput(ModelBuilder b, const std::string& name, bool empty) {
  std::string lost;
  for (auto& n : *b.graph().mutable_node()) {
    if (n.name() != name) continue;
    lost = n.output(0);
    if (empty) n.set_output(0, "");
    else n.clear_output();
  }
  // the readers of the lost value go, and theirs, and the graph outputs nobody makes any more
  std::set<std::string> gone{lost};
  auto* nodes = b.graph().mutable_node();
  for (int k = 0; k < nodes->size();) {
    const auto& n = nodes->Get(k);
    if (std::none_of(n.input().begin(), n.input().end(), [&](const std::string& in) { return gone.count(in) > 0; })) {
      ++k;
      continue;
    }
    for (const auto& o : n.output()) gone.insert(o);
    nodes->DeleteSubrange(k, 1);
  }
  auto* outs = b.graph().mutable_output();
  for (int k = outs->size() - 1; k >= 0; --k)
    if (gone.count(outs->Get(k).name())) outs->DeleteSubrange(k, 1);
  if (outs->empty()) *outs->Add() = b.graph().input(0);  // a graph needs an output
  return b;
}

}  // namespace

TEST_CASE("no pass crashes on a node with a missing or empty output; foreign ones are unconvertible") {
  const OutputLess cases[] = {
      {"lower-contrib-qdq", qconv::lowerContribQdq, contrib, "dq_quark", true},
      {"lower-vitis-qdq", qconv::lowerVitisQdq, vai, "fix_quant", true},
      {"lower-vitis-qdq", qconv::lowerVitisQdq, vai, "fix_dequant", true},
      {"lower-qonnx-quant", qconv::lowerQonnxQuant, qonnx, "quant_1", true},
      {"lower-fake-quantize", qconv::lowerFakeQuantize, fq, "fq_1", true},
      {"unfuse-qop", qconv::unfuseQop, qgemm, "qg", false},
      {"lower-primitive-qdq", qconv::lowerPrimitiveQdq, primitive, "mul", false},
      {"lower-integer-ops", qconv::lowerIntegerOps, intConv, "conv_int", false},
      {"fuse-qlinear-conv", qconv::fuseQLinearConv, conv, "conv_1", false},
  };
  for (const auto& c : cases)
    for (bool empty : {false, true}) {
      INFO(c.pass << " " << c.node << (empty ? " with an empty output name" : " with no output"));
      auto m = withoutOutput(c.make(), c.node, empty).build();
      Reporter r;
      REQUIRE_NOTHROW(c.run(m, r.ctx));
      bool still = false;
      for (const auto& n : m.graph.nodes())
        if (m.graph.isAlive(n) && n->name() == c.node) still = true;
      REQUIRE(still);  // never offered to a selector: the node stays as it is
      const auto& said = r.ctx.reports(c.foreign ? Report::Unconvertible : Report::Refused);
      REQUIRE(std::any_of(said.begin(), said.end(), [&](const std::string& s) {
        return s.rfind(std::string(c.node) + ": ", 0) == 0 && s.find("it has no output") != std::string::npos;
      }));
    }
}

TEST_CASE("the whole pipeline on a foreign node without an output: exit 4 naming it, no crash") {
  auto b = withoutOutput(fq(), "fq_1", false);
  const std::string in = "/tmp/qconv-unit-outputless-" + std::to_string(::getpid()) + ".onnx";
  qconv::io::writeModelAtomically(b.proto(), in);
  qconv::ConvertOptions o;
  o.input = in;
  o.output = in + ".out";
  std::ostringstream out, err;
  REQUIRE(qconv::run(o, out, err) == static_cast<int>(qconv::ExitCode::Unsupported));
  REQUIRE(err.str().find("fq_1: FakeQuantize not converted: it has no output") != std::string::npos);
  std::remove(in.c_str());
}
