// check-ops: a target's measured per-op table (OpRule) refuses a node in the form the rule names
// (quantized int8, float, a computed input, computed through an op), quoting the runtime, and
// nothing else; redeclare-opset's two exemptions (Softmax on its last axis crossing 13, an
// inference BatchNormalization crossing 14) and an op's opset floor (IREE's BatchNormalization).
#include <catch2/catch.hpp>

#include "model_builder.h"
#include "qconv/passes/common/opset_history.h"

using namespace qtest;

namespace {

/// x (float [1, 4, 2, 2]) -> Q/DQ (type, zero point) -> OP -> Q/DQ -> y.
ModelBuilder quantizedOp(const char* op, int32_t type, int64_t zp) {
  ModelBuilder b(13);
  b.input("x", TensorProto::FLOAT, {1, 4, 2, 2});
  b.floats("s", {}, {0.05f});
  b.ints("z", type, {}, {zp});
  b.node("QuantizeLinear", {"x", "s", "z"}, {"xq"}, "q_x");
  b.node("DequantizeLinear", {"xq", "s", "z"}, {"xf"}, "dq_x");
  b.node(op, {"xf"}, {"yf"}, "probe");
  b.node("QuantizeLinear", {"yf", "s", "z"}, {"yq"}, "q_y");
  b.node("DequantizeLinear", {"yq", "s", "z"}, {"y"}, "dq_y");
  b.output("y", TensorProto::FLOAT);
  return b;
}

std::vector<std::string> refusals(qconv::ir::Model& m, const char* target) {
  Reporter r(forTarget(target));
  qconv::checkOps(m, r.ctx);
  return r.ctx.reports(qconv::Report::Unconvertible);
}

}  // namespace

TEST_CASE("check-ops: an int8 HardSigmoid is refused for qnn in its words, a uint8 one is not") {
  auto int8 = quantizedOp("HardSigmoid", TensorProto::INT8, 0).build();
  const auto said = refusals(int8, "qnn");
  REQUIRE(said.size() == 1);
  REQUIRE(said[0] == "probe: not run by --target qnn: HardSigmoid on int8: QNN HTP (onnxruntime-qnn 2.7) runs it on uint8 "
                     "and uint16 activations, not int8 ('Unsupported nodes in QNN EP'; convert --target qnn stores them as "
                     "uint8)");
  auto uint8 = quantizedOp("HardSigmoid", TensorProto::UINT8, 128).build();
  REQUIRE(refusals(uint8, "qnn").empty());
  REQUIRE(refusals(int8, "onnxruntime").empty());  // a profile without op rules checks nothing
}

TEST_CASE("check-ops: Erf is refused for qnn in any form; Clip only with a computed bound") {
  auto erf = quantizedOp("Erf", TensorProto::UINT8, 128).build();
  REQUIRE(refusals(erf, "qnn").size() == 1);
  ModelBuilder b(13);
  b.input("x", TensorProto::FLOAT, {4});
  b.floats("lo", {}, {-1.f});
  b.node("ReduceMax", {"x"}, {"hi"}, "max");
  b.node("Clip", {"x", "lo", "hi"}, {"y"}, "clip");
  b.output("y", TensorProto::FLOAT);
  auto clip = b.build();
  const auto said = refusals(clip, "qnn");
  REQUIRE(said.size() == 1);
  REQUIRE(said[0].find("clip: not run by --target qnn: Clip in float, its input 2 not a constant: QNN HTP") == 0);
}

TEST_CASE("check-ops: a Reshape's shape computed through a Cast is refused for tvm, one read off Shape alone is not") {
  for (bool cast : {true, false}) {
    ModelBuilder b(13);
    b.input("x", TensorProto::FLOAT, {1, 4});
    b.node("Shape", {"x"}, {cast ? "s64" : "shape"}, "shape");
    if (cast) {
      setInt(b.node("Cast", {"s64"}, {"s32"}, "to32"), "to", TensorProto::INT32);
      setInt(b.node("Cast", {"s32"}, {"shape"}, "to64"), "to", TensorProto::INT64);
    }
    b.node("Reshape", {"x", "shape"}, {"y"}, "reshape");
    b.output("y", TensorProto::FLOAT);
    auto m = b.build();
    const auto said = refusals(m, "tvm");
    REQUIRE(said.size() == (cast ? 1u : 0u));
    if (cast) REQUIRE(said[0].find("reshape: not run by --target tvm: Reshape in float, its input 1 computed through a Cast") == 0);
  }
}

TEST_CASE("check-ops: rknn refuses an op computing in float, not one fused to the quantized Conv before it") {
  ConvSpec spec;
  auto conv = convModel(spec).build();  // DQ -> Conv -> Q: quantized
  REQUIRE(refusals(conv, "rknn").empty());
  ModelBuilder b(13);
  b.input("x", TensorProto::FLOAT, {1, 4, 2, 2});
  b.node("Sigmoid", {"x"}, {"y"}, "float_sigmoid");
  b.output("y", TensorProto::FLOAT);
  auto plain = b.build();
  const auto said = refusals(plain, "rknn");
  REQUIRE(said.size() == 1);
  REQUIRE(said[0].find("float_sigmoid: not run by --target rknn: Sigmoid in float: rknn-toolkit2 2.5 computes") == 0);
}

TEST_CASE("redeclare-opset: Softmax-11 on the last axis of a rank-2 input crosses 13 with its axis written out") {
  for (int64_t axis : {1, 0}) {
    ModelBuilder b(11);
    b.input("x", TensorProto::FLOAT, {1, 4});
    setInt(b.node("Softmax", {"x"}, {"y"}, "softmax"), "axis", axis);
    b.output("y", TensorProto::FLOAT, {1, 4});
    auto m = b.build();
    REQUIRE(qconv::opsetRaiseBlocker(m, 11, 13).empty() == (axis == 1));
    if (axis == 1) {
      qconv::declareOpset(m, 13);
      REQUIRE(only(m.graph, "Softmax")->attrInt("axis", -7) == 1);
    }
  }
}

TEST_CASE("redeclare-opset: an inference BatchNormalization crosses 14; iree asks opset 15 for it") {
  ModelBuilder b(11);
  b.input("x", TensorProto::FLOAT, {1, 2, 2, 2});
  for (const char* p : {"sc", "bi", "me", "va"}) b.floats(p, {2}, {1.f, 1.f});
  b.node("BatchNormalization", {"x", "sc", "bi", "me", "va"}, {"y"}, "bn");
  b.output("y", TensorProto::FLOAT);
  auto m = b.build();
  REQUIRE(qconv::opsetRaiseBlocker(m, 11, 15).empty());
  REQUIRE(qconv::targetOpsetMin(*qconv::findTarget("iree"), m) == 15);
  REQUIRE(qconv::targetOpsetMin(*qconv::findTarget("qnn"), m) == 10);
}

TEST_CASE("check-ops: for openvino, a quantized Conv's output plus a constant quantized at run time is refused; "
          "after a Relu, or plus a dequantized integer constant, it is not") {
  for (const char* pre : {"Conv", "Relu"}) {
    for (const bool at_run_time : {true, false}) {
      CAPTURE(pre, at_run_time);
      ModelBuilder b(13);
      b.input("x", TensorProto::FLOAT, {1, 2, 2, 2});
      b.floats("s", {}, {0.05f});
      b.ints("z", TensorProto::UINT8, {}, {128});
      b.floats("w", {2, 2, 1, 1}, {0.5f, 0.f, 0.f, 0.5f});
      b.floats("bias", {1, 2, 1, 1}, {0.25f, -0.5f});
      if (!at_run_time) b.ints("bias_q", TensorProto::UINT8, {1, 2, 1, 1}, {133, 118});
      b.node("QuantizeLinear", {"x", "s", "z"}, {"xq"}, "q_x");
      b.node("DequantizeLinear", {"xq", "s", "z"}, {"xf"}, "dq_x");
      if (std::string(pre) == "Conv") b.node("Conv", {"xf", "w"}, {"c"}, "conv");
      else b.node("Relu", {"xf"}, {"c"}, "relu");
      b.node("QuantizeLinear", {"c", "s", "z"}, {"cq"}, "q_c");
      b.node("DequantizeLinear", {"cq", "s", "z"}, {"cf"}, "dq_c");
      if (at_run_time) b.node("QuantizeLinear", {"bias", "s", "z"}, {"bias_q"}, "q_bias");
      b.node("DequantizeLinear", {"bias_q", "s", "z"}, {"bias_f"}, "dq_bias");
      b.node("Add", {"cf", "bias_f"}, {"y"}, "add");
      b.output("y", TensorProto::FLOAT);
      auto m = b.build();
      const auto said = refusals(m, "openvino");
      if (std::string(pre) == "Conv" && at_run_time) {
        REQUIRE(said.size() == 1);
        REQUIRE(said[0] == "add: not run by --target openvino: Add on uint8, its input 1 computed from constants through a "
                           "QuantizeLinear, the other a Conv's output: OpenVINO 2026.4's AddTransformation throws on a Conv's "
                           "output plus a constant quantized at run time ('index 0 out of range'); convert folds such a "
                           "QuantizeLinear where it can compute it");
      } else {
        REQUIRE(said.empty());
      }
    }
  }
}

TEST_CASE("redeclare-opset: raised across 13 (Unsqueeze, Squeeze, ReduceSum) or 18 (ReduceMean), axes move from the "
          "attribute to a constant input") {
  ModelBuilder b(12);
  b.input("x", TensorProto::FLOAT, {2, 3});
  setInts(b.node("Unsqueeze", {"x"}, {"u"}, "unsqueeze"), "axes", {0});
  setInts(b.node("ReduceMean", {"u"}, {"y"}, "mean"), "axes", {-1});
  b.output("y", TensorProto::FLOAT);
  auto m = b.build();
  REQUIRE(qconv::opsetRaiseBlocker(m, 12, 18).empty());
  qconv::declareOpset(m, 18);
  for (const char* op : {"Unsqueeze", "ReduceMean"}) {
    CAPTURE(op);
    const qconv::ir::Node* n = only(m.graph, op);
    REQUIRE(n->attribute("axes") == nullptr);
    REQUIRE(n->input(1)->isConstant());
    REQUIRE(intsOf(n->input(1)) == std::vector<int64_t>{std::string(op) == "Unsqueeze" ? 0 : -1});
  }
}

namespace {

/// x -> Q/DQ -> a0 = Div(6) -> Q/DQ; a1 = [Div(6) ->] Q/DQ of x's; Add(a0, a1) -> Q/DQ -> y.
ModelBuilder addOfDivided(bool both) {
  ModelBuilder b(13);
  b.input("x", TensorProto::FLOAT, {1, 4, 2, 2});
  b.floats("s", {}, {0.05f});
  b.floats("six", {}, {6.f});
  b.ints("z", TensorProto::INT8, {}, {0});
  b.node("QuantizeLinear", {"x", "s", "z"}, {"xq"}, "q_x");
  b.node("DequantizeLinear", {"xq", "s", "z"}, {"xf"}, "dq_x");
  for (int k = 0; k < 2; ++k) {
    const std::string i = std::to_string(k);
    const bool divided = k == 0 || both;
    if (divided) b.node("Div", {"xf", "six"}, {"d" + i}, "div_" + i);
    else b.node("Relu", {"xf"}, {"d" + i}, "relu_" + i);
    b.node("QuantizeLinear", {"d" + i, "s", "z"}, {"dq" + i}, "q_d" + i);
    b.node("DequantizeLinear", {"dq" + i, "s", "z"}, {"df" + i}, "dq_d" + i);
  }
  b.node("Add", {"df0", "df1"}, {"yf"}, "probe");
  b.node("QuantizeLinear", {"yf", "s", "z"}, {"yq"}, "q_y");
  b.node("DequantizeLinear", {"yq", "s", "z"}, {"y"}, "dq_y");
  b.output("y", TensorProto::FLOAT);
  return b;
}

}  // namespace

TEST_CASE("check-ops: rknn refuses a quantized Add of two Div outputs (it rescales the sum in float16), not of one") {
  auto both = addOfDivided(true).build();
  const auto said = refusals(both, "rknn");
  REQUIRE(said.size() == 1);
  REQUIRE(said[0] == "probe: not run by --target rknn: Add on int8, its input 0 a Div's output, the other a Div's output: "
                     "rknn-toolkit2 2.5 moves both inputs' Div past the Add and rescales the sum in float16 (its layer "
                     "table: Mul FLOAT16, exDataConvert), not in 8 bits");
  auto one = addOfDivided(false).build();
  REQUIRE(refusals(one, "rknn").empty());
  REQUIRE(refusals(both, "qnn").empty());
}

namespace {

/// x -> Q/DQ -> cut in four (a Split, or four Slices of x's DQ) -> each part Q/DQ -> `sigmoids`
/// Sigmoids (sigmoid_0, ...) and Tanhs on the rest -> Q/DQ -> Concat -> y: an LSTM cell's gates.
ModelBuilder gates(int sigmoids, bool slices) {
  ModelBuilder b(13);
  b.input("x", TensorProto::FLOAT, {1, 8, 2, 2});
  b.floats("s", {}, {0.05f});
  b.ints("z", TensorProto::INT8, {}, {0});
  b.ints("sizes", TensorProto::INT64, {4}, {2, 2, 2, 2});
  b.ints("axes", TensorProto::INT64, {1}, {1});
  b.node("QuantizeLinear", {"x", "s", "z"}, {"xq"}, "q_x");
  b.node("DequantizeLinear", {"xq", "s", "z"}, {"xf"}, "dq_x");
  if (!slices) setInt(b.node("Split", {"xf", "sizes"}, {"p0", "p1", "p2", "p3"}, "split"), "axis", 1);
  std::vector<std::string> joined;
  for (int k = 0; k < 4; ++k) {
    const std::string i = std::to_string(k);
    if (slices) {
      b.ints("starts" + i, TensorProto::INT64, {1}, {2 * k});
      b.ints("ends" + i, TensorProto::INT64, {1}, {2 * k + 2});
      b.node("Slice", {"xf", "starts" + i, "ends" + i, "axes"}, {"p" + i}, "slice_" + i);
    }
    b.node("QuantizeLinear", {"p" + i, "s", "z"}, {"pq" + i}, "q_p" + i);
    b.node("DequantizeLinear", {"pq" + i, "s", "z"}, {"pf" + i}, "dq_p" + i);
    const bool sigmoid = k < sigmoids;
    b.node(sigmoid ? "Sigmoid" : "Tanh", {"pf" + i}, {"a" + i}, (sigmoid ? "sigmoid_" : "tanh_") + i);
    b.node("QuantizeLinear", {"a" + i, "s", "z"}, {"aq" + i}, "q_a" + i);
    b.node("DequantizeLinear", {"aq" + i, "s", "z"}, {"af" + i}, "dq_a" + i);
    joined.push_back("af" + i);
  }
  setInt(b.node("Concat", joined, {"y"}, "concat"), "axis", 1);
  b.output("y", TensorProto::FLOAT);
  return b;
}

}  // namespace

TEST_CASE("check-ops: rknn refuses three quantized Sigmoids on the parts of one tensor (it merges them in float16), "
          "not two") {
  for (const bool slices : {false, true}) {
    auto three = gates(3, slices).build();
    const auto said = refusals(three, "rknn");
    REQUIRE(said.size() == 3);
    REQUIRE(said[0] == "sigmoid_0: not run by --target rknn: Sigmoid on int8, one of 3 on the parts of one tensor: "
                       "rknn-toolkit2 2.5 merges three or more Sigmoids on the parts of one tensor into Concat -> "
                       "Sigmoid -> Split and runs it in float16 (its layer table: Sigmoid FLOAT16, exDataConvert), "
                       "not in 8 bits");
    REQUIRE(said[2].rfind("sigmoid_2: ", 0) == 0);
    auto two = gates(2, slices).build();
    REQUIRE(refusals(two, "rknn").empty());
    REQUIRE(refusals(three, "qnn").empty());
  }
}
