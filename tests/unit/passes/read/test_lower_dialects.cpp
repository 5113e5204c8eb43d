// lower-contrib-qdq and lower-primitive-qdq: what is lowered, and the notes for what stays.
#include <catch2/catch.hpp>

#include "model_builder.h"

using namespace qtest;

namespace {
ModelBuilder contribQdq(int32_t type, int64_t opset, bool per_axis, bool with_axis) {
  ModelBuilder b(opset, opset >= 21 ? 10 : 7);
  auto* ms = b.proto().add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  b.input("x", TensorProto::FLOAT, {1, 2, 2});
  b.floats("s", per_axis ? std::vector<int64_t>{2} : std::vector<int64_t>{}, per_axis ? std::vector<float>{0.1f, 0.2f}
                                                                                        : std::vector<float>{0.1f});
  b.ints("z", type, per_axis ? std::vector<int64_t>{2} : std::vector<int64_t>{}, per_axis ? std::vector<int64_t>{1, 2}
                                                                                          : std::vector<int64_t>{1});
  auto& q = b.node("QuantizeLinear", {"x", "s", "z"}, {"q"}, "q_ms");
  q.set_domain("com.microsoft");
  auto& dq = b.node("DequantizeLinear", {"q", "s", "z"}, {"y"}, "dq_ms");
  dq.set_domain("com.microsoft");
  if (with_axis) {
    setInt(q, "axis", 1);
    setInt(dq, "axis", 1);
  }
  b.output("y", TensorProto::FLOAT);
  return b;
}

std::string m_outputName(const qconv::ir::Model& m) {
  return m.graph.outputs()[0]->name();
}

std::string run(qconv::ir::Model& m, void (*pass)(qconv::ir::Model&, qconv::PassContext&)) {
  Reporter r;
  pass(m, r.ctx);
  return r.text.str();
}
}  // namespace

TEST_CASE("com.microsoft Q/DQ become standard, per tensor and per axis") {
  for (bool perAxis : {false, true}) {
    auto m = contribQdq(TensorProto::UINT8, 13, perAxis, perAxis).build();
    run(m, qconv::lowerContribQdq);
    auto* q = only(m.graph, "QuantizeLinear");
    auto* dq = only(m.graph, "DequantizeLinear");
    REQUIRE(q->domain().empty());
    REQUIRE(dq->domain().empty());
    REQUIRE(q->name() == "q_ms");
    REQUIRE(dq->input(0) == q->output(0));
    REQUIRE(m.graph.outputs()[0]->producer() == dq);
    REQUIRE(static_cast<bool>(dq->attribute("axis")) == perAxis);
  }
}

TEST_CASE("com.microsoft Q/DQ that standard ONNX cannot say the same way stay, with the reason") {
  auto wide = contribQdq(TensorProto::UINT16, 13, false, false).build();
  REQUIRE(run(wide, qconv::lowerContribQdq).find("q_ms: stays com.microsoft: uint16 has no standard form at opset 13") !=
          std::string::npos);
  REQUIRE(only(wide.graph, "QuantizeLinear")->domain() == "com.microsoft");

  auto wide21 = contribQdq(TensorProto::UINT16, 21, false, false).build();
  run(wide21, qconv::lowerContribQdq);
  REQUIRE(only(wide21.graph, "QuantizeLinear")->domain().empty());

  auto noAxis = contribQdq(TensorProto::UINT8, 13, true, false).build();
  REQUIRE(run(noAxis, qconv::lowerContribQdq).find("there is no axis (com.microsoft has no default axis)") !=
          std::string::npos);
  REQUIRE(only(noAxis.graph, "DequantizeLinear")->domain() == "com.microsoft");
}

namespace {
// x -> Div(s) / Mul(k) -> Round -> Add(zp) -> Clip(lo, hi) -> Cast(T) -> Cast(float) -> Sub(zp) -> Mul(s) -> y
ModelBuilder primitive(float lo, float hi, int32_t type = TensorProto::UINT8, const char* first = "Div",
                       float scale = 0.25f, float zp = 3.0f) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {4});
  b.floats("s", {}, {scale});
  b.floats("zp_f", {}, {zp});
  b.floats("lo", {}, {lo});
  b.floats("hi", {}, {hi});
  b.node(first, {"x", "s"}, {"d"}, "div");
  b.node("Round", {"d"}, {"r"}, "round");
  b.node("Add", {"r", "zp_f"}, {"a"}, "add_zp");
  b.node("Clip", {"a", "lo", "hi"}, {"c"}, "clip");
  setInt(b.node("Cast", {"c"}, {"q"}, "to_int"), "to", type);
  setInt(b.node("Cast", {"q"}, {"qf"}, "to_float"), "to", TensorProto::FLOAT);
  b.node("Sub", {"qf", "zp_f"}, {"centered"}, "sub_zp");
  b.node("Mul", {"centered", "s"}, {"y"}, "scale");
  b.output("y", TensorProto::FLOAT);
  return b;
}
}  // namespace

TEST_CASE("Div -> Round -> Add -> Clip -> Cast and Cast -> Sub -> Mul become Q and DQ") {
  auto m = primitive(0, 255).build();
  run(m, qconv::lowerPrimitiveQdq);
  for (const char* op : {"Div", "Round", "Add", "Clip", "Cast", "Sub", "Mul"}) REQUIRE(nodesOf(m.graph, op).empty());
  auto* q = only(m.graph, "QuantizeLinear");
  auto* dq = only(m.graph, "DequantizeLinear");
  REQUIRE(q->input(1)->name() == "s");
  REQUIRE(intsOf(q->input(2)) == std::vector<int64_t>{3});
  REQUIRE(q->input(2)->initializer()->data_type() == TensorProto::UINT8);
  REQUIRE(q->output(0)->name() == "q");
  REQUIRE(dq->input(0) == q->output(0));
  REQUIRE(intsOf(dq->input(2)) == std::vector<int64_t>{3});
  REQUIRE(dq->output(0)->name() == "y");
}

TEST_CASE("a narrow range becomes QuantizeLinear then an integer Clip") {
  auto m = primitive(-127, 127, TensorProto::INT8, "Div", 0.25f, 0.0f).build();
  run(m, qconv::lowerPrimitiveQdq);
  auto* clip = only(m.graph, "Clip");
  REQUIRE(clip->input(0)->producer()->opType() == "QuantizeLinear");
  REQUIRE(intsOf(clip->input(1)) == std::vector<int64_t>{-127});
  REQUIRE(intsOf(clip->input(2)) == std::vector<int64_t>{127});
  REQUIRE(clip->output(0)->name() == "q");
}

TEST_CASE("Mul by a power of two is x / s; Mul by another factor stays, with the reason") {
  auto m = primitive(0, 255, TensorProto::UINT8, "Mul", 128.0f, 0.0f).build();
  // the dequantizer multiplies by 128 too: that is a DQ with scale 128, still exact
  run(m, qconv::lowerPrimitiveQdq);
  REQUIRE(floatsOf(only(m.graph, "QuantizeLinear")->input(1)) == std::vector<float>{1.0f / 128.0f});

  auto m2 = primitive(0, 255, TensorProto::UINT8, "Mul", 0.3f, 0.0f).build();
  std::string log = run(m2, qconv::lowerPrimitiveQdq);
  REQUIRE(log.find("to_int: quantizer left as primitive ops: x * 0.3 is not x / s for any float s (only a power of two "
                   "is; --approximate writes x / 3.33333)") != std::string::npos);
  REQUIRE(nodesOf(m2.graph, "QuantizeLinear").empty());
}

TEST_CASE("with --approximate, Mul by any factor becomes QuantizeLinear(1/f), listed as an approximation") {
  auto m = primitive(0, 255, TensorProto::UINT8, "Mul", 0.3f, 0.0f).build();
  qtest::Reporter r(qconv::PassOptions{false, true});
  qconv::lowerPrimitiveQdq(m, r.ctx);
  REQUIRE(floatsOf(only(m.graph, "QuantizeLinear")->input(1)) == std::vector<float>{1.0f / 0.3f});
  REQUIRE(r.ctx.approximations() ==
          std::vector<std::string>{"to_int: quantizer x * 0.3 written as QuantizeLinear(x, 3.33333): a near-tie can round by one step"});
}

TEST_CASE("Aidge's float form (no Cast) becomes QuantizeLinear -> Cast(float), typed by its clip range") {
  // x -> Mul(f) -> Round -> Clip(-128, 127) -> y:float (integers held as floats)
  for (float f : {0.25f, 0.3f}) {
    ModelBuilder b;
    b.input("x", TensorProto::FLOAT, {4});
    b.floats("f", {}, {f});
    b.floats("lo", {}, {-128});
    b.floats("hi", {}, {127});
    b.node("Mul", {"x", "f"}, {"m"}, "mul");
    b.node("Round", {"m"}, {"r"}, "round");
    b.node("Clip", {"r", "lo", "hi"}, {"y"}, "clip");
    b.output("y", TensorProto::FLOAT);
    auto m = b.build();
    qtest::Reporter r(qconv::PassOptions{false, f != 0.25f});
    qconv::lowerPrimitiveQdq(m, r.ctx);
    auto* cast = only(m.graph, "Cast");
    REQUIRE(cast->output(0)->name() == "y");
    REQUIRE(cast->attrInt("to", 0) == TensorProto::FLOAT);
    auto* q = cast->input(0)->producer();
    REQUIRE(q->opType() == "QuantizeLinear");
    REQUIRE(q->input(2)->initializer()->data_type() == TensorProto::INT8);
    REQUIRE(floatsOf(q->input(1)) == std::vector<float>{1.0f / f});
    REQUIRE(r.ctx.approximations().size() == (f == 0.25f ? 0u : 1u));  // a power of two is exact
  }
}

TEST_CASE("a zero point outside the type's range or a Clip wider than the type stays primitive") {
  auto m = primitive(-10, 300).build();
  REQUIRE(run(m, qconv::lowerPrimitiveQdq).find("Clip bounds are not constant integers inside the Cast type's range") !=
          std::string::npos);
  REQUIRE(nodesOf(m.graph, "QuantizeLinear").empty());
}

namespace {
ModelBuilder qonnxQuant(float bits, bool isSigned, bool narrow, const std::string& mode, float zp = 0.0f,
                        const char* domain = "qonnx.custom_op.general", bool perAxis = false) {
  ModelBuilder b;
  auto* op = b.proto().add_opset_import();
  op->set_domain(domain);
  op->set_version(1);
  b.input("x", TensorProto::FLOAT, {1, 2, 3});
  if (perAxis) b.floats("s", {1, 2, 1}, {0.5f, 0.25f});
  else b.floats("s", {}, {0.5f});
  b.floats("z", {}, {zp});
  b.floats("bits", {}, {bits});
  auto& q = b.node("Quant", {"x", "s", "z", "bits"}, {"y"}, "quant_7");
  q.set_domain(domain);
  setInt(q, "signed", isSigned);
  setInt(q, "narrow", narrow);
  auto* a = q.add_attribute();
  a->set_name("rounding_mode");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(mode);
  b.output("y", TensorProto::FLOAT);
  return b;
}
}  // namespace

TEST_CASE("QONNX Quant 8-bit becomes Q -> DQ; 4-bit and narrow add an integer Clip") {
  auto m = qonnxQuant(8, false, false, "ROUND").build();
  run(m, qconv::lowerQonnxQuant);
  REQUIRE(nodesOf(m.graph, "Quant").empty());
  REQUIRE(nodesOf(m.graph, "Clip").empty());
  auto* q = only(m.graph, "QuantizeLinear");
  REQUIRE(q->input(2)->initializer()->data_type() == TensorProto::UINT8);
  REQUIRE(only(m.graph, "DequantizeLinear")->output(0)->name() == "y");

  for (auto [bits, isSigned, narrow, lo, hi] : std::vector<std::tuple<float, bool, bool, int64_t, int64_t>>{
           {4, true, false, -8, 7}, {4, true, true, -7, 7}, {8, true, true, -127, 127}, {3, false, false, 0, 7},
           {8, false, true, 0, 254}}) {
    auto m2 = qonnxQuant(bits, isSigned, narrow, "HALF_EVEN", 0.0f, "onnx.brevitas").build();
    run(m2, qconv::lowerQonnxQuant);
    auto* clip = only(m2.graph, "Clip");
    REQUIRE(intsOf(clip->input(1)) == std::vector<int64_t>{lo});
    REQUIRE(intsOf(clip->input(2)) == std::vector<int64_t>{hi});
    REQUIRE(clip->input(1)->initializer()->data_type() == (isSigned ? TensorProto::INT8 : TensorProto::UINT8));
  }
}

TEST_CASE("QONNX Quant per channel gets a 1-D scale and its axis") {
  auto m = qonnxQuant(8, true, false, "ROUND", 0.0f, "finn.custom_op.general", true).build();
  run(m, qconv::lowerQonnxQuant);
  auto* q = only(m.graph, "QuantizeLinear");
  REQUIRE(q->attribute("axis")->i() == 1);
  REQUIRE(floatsOf(q->input(1)) == std::vector<float>{0.5f, 0.25f});
  REQUIRE(q->input(1)->initializer()->dims_size() == 1);
}

TEST_CASE("QONNX Quant that QuantizeLinear cannot say is emulated with float ops, naming node and reason") {
  auto floor = qonnxQuant(8, true, false, "FLOOR").build();
  REQUIRE(run(floor, qconv::lowerQonnxQuant).find("quant_7: qonnx.custom_op.general::Quant emulated exactly with float "
                                                 "ops (no Q/DQ form: rounding FLOOR has no QuantizeLinear form)") !=
          std::string::npos);
  REQUIRE(nodesOf(floor.graph, "Quant").empty());
  REQUIRE(nodesOf(floor.graph, "Floor").size() == 1);
  REQUIRE(nodesOf(floor.graph, "QuantizeLinear").empty());
  REQUIRE(m_outputName(floor) == "y");
  for (auto* v : floor.graph.initializers()) REQUIRE(v->name() != "bits");  // nothing reads it any more

  auto zp = qonnxQuant(8, false, false, "ROUND", 3.0f).build();
  REQUIRE(run(zp, qconv::lowerQonnxQuant).find("(no Q/DQ form: zero point is not constant 0") != std::string::npos);
  REQUIRE(nodesOf(zp.graph, "Round").size() == 1);
  auto wide = qonnxQuant(12, true, false, "HALF_UP").build();
  REQUIRE(run(wide, qconv::lowerQonnxQuant).find("bit width is not a constant integer from 2 to 8") != std::string::npos);
  REQUIRE(nodesOf(wide.graph, "Sign").size() == 1);
}

TEST_CASE("QONNX Quant that neither form can say stays, with the reason") {
  auto huge = qonnxQuant(30, true, false, "ROUND").build();
  REQUIRE(run(huge, qconv::lowerQonnxQuant).find("quant_7: qonnx.custom_op.general::Quant not converted: bit width is not a "
                                                "constant integer from 1 to 24") != std::string::npos);
  REQUIRE(nodesOf(huge.graph, "Quant").size() == 1);
}

TEST_CASE("com.amd.quark Extended Q/DQ become standard; a missing axis means axis 0") {
  ModelBuilder b;
  auto* op = b.proto().add_opset_import();
  op->set_domain("com.amd.quark");
  op->set_version(1);
  b.input("x", TensorProto::FLOAT, {2, 3});
  b.floats("w", {2, 3}, {1, 2, 3, 4, 5, 6});
  b.floats("s", {2}, {0.5f, 0.25f});
  b.ints("z", TensorProto::INT8, {2}, {0, 0});
  b.node("ExtendedQuantizeLinear", {"w", "s", "z"}, {"wq"}, "q_w").set_domain("com.amd.quark");
  b.node("ExtendedDequantizeLinear", {"wq", "s", "z"}, {"wd"}, "dq_w").set_domain("com.amd.quark");
  b.node("Add", {"x", "wd"}, {"y"}, "add");
  b.output("y", TensorProto::FLOAT);
  auto m = b.build();
  run(m, qconv::lowerContribQdq);
  auto* q = only(m.graph, "QuantizeLinear");
  auto* dq = only(m.graph, "DequantizeLinear");
  REQUIRE(q->domain().empty());
  REQUIRE(q->attribute("axis")->i() == 0);
  REQUIRE(dq->attribute("axis")->i() == 0);
  REQUIRE(nodesOf(m.graph, "ExtendedQuantizeLinear").empty());
}

TEST_CASE("QONNX BipolarQuant becomes Where(x >= 0, 1, -1) * scale, said per node") {
  ModelBuilder b;
  auto* op = b.proto().add_opset_import();
  op->set_domain("qonnx.custom_op.general");
  op->set_version(1);
  b.input("x", TensorProto::FLOAT, {4});
  b.floats("s", {}, {0.5f});
  b.node("BipolarQuant", {"x", "s"}, {"y"}, "bipolar_3").set_domain("qonnx.custom_op.general");
  b.output("y", TensorProto::FLOAT);
  auto m = b.build();
  REQUIRE(run(m, qconv::lowerQonnxQuant).find("bipolar_3: qonnx.custom_op.general::BipolarQuant emulated exactly") !=
          std::string::npos);
  auto* mul = only(m.graph, "Mul");
  REQUIRE(mul->output(0)->name() == "y");
  REQUIRE(mul->input(1)->name() == "s");
  REQUIRE(mul->input(0)->producer()->opType() == "Where");
  REQUIRE(only(m.graph, "GreaterOrEqual")->input(0)->name() == "x");
}
