// fold-shapes (aidge, tvm): a shape computed from static shapes becomes that constant; the
// evaluator (shape_eval.h) computes each op as the specification does, and declines with a reason.
#include <catch2/catch.hpp>

#include "model_builder.h"
#include "qconv/passes/common/computed_dims.h"
#include "qconv/passes/common/shape_eval.h"

using namespace qtest;
using qconv::IntTensor;

namespace {

void declare(ModelBuilder& b, const std::string& name, const std::vector<int64_t>& dims) {
  auto* vi = b.graph().add_value_info();
  vi->set_name(name);
  auto* t = vi->mutable_type()->mutable_tensor_type();
  t->set_elem_type(TensorProto::FLOAT);
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

/// Paddle's flatten: x [1,120,1,40] -> Conv -> c (declared) -> Q -> DQ -> d -> Shape ->
/// Cast(int32) -> Slice(0, 2) -> Cast(int64) -> Concat(-1) -> Reshape(d, ·) -> y
ModelBuilder paddleFlatten() {
  ModelBuilder b(12);
  b.input("x", TensorProto::FLOAT, {1, 120, 1, 40});
  b.floats("w", {120, 120, 1, 1}, std::vector<float>(120 * 120, 0.01f));
  b.floats("s", {}, {0.05f});
  b.ints("z", TensorProto::INT8, {}, {0});
  b.ints("starts", TensorProto::INT64, {1}, {0});
  b.ints("ends", TensorProto::INT64, {1}, {2});
  b.ints("minus_one", TensorProto::INT64, {1}, {-1});
  b.node("Conv", {"x", "w"}, {"c"}, "conv");
  declare(b, "c", {1, 120, 1, 40});
  b.node("QuantizeLinear", {"c", "s", "z"}, {"cq"}, "q_c");
  b.node("DequantizeLinear", {"cq", "s", "z"}, {"d"}, "dq_c");
  b.node("Shape", {"d"}, {"sh"}, "shape");
  setInt(b.node("Cast", {"sh"}, {"sh32"}, "cast_32"), "to", TensorProto::INT32);
  b.node("Slice", {"sh32", "starts", "ends"}, {"sl"}, "slice");
  setInt(b.node("Cast", {"sl"}, {"sl64"}, "cast_64"), "to", TensorProto::INT64);
  setInt(b.node("Concat", {"sl64", "minus_one"}, {"shape_out"}, "concat"), "axis", 0);
  b.node("Reshape", {"d", "shape_out"}, {"y"}, "reshape");
  b.output("y", TensorProto::FLOAT, {1, 120, 40});
  return b;
}

/// The one node `b` holds, evaluated on `in` (its inputs made graph inputs, so that it parses).
std::optional<IntTensor> eval(ModelBuilder b, const std::vector<std::optional<IntTensor>>& in, int64_t opset,
                              std::string* why) {
  for (const auto& name : b.graph().node(0).input()) b.input(name, TensorProto::INT64, {1});
  auto m = b.build();
  return qconv::evalShapeOp(*m.graph.nodes().front(), in, {}, opset, why);
}

/// A 1-D int64 tensor.
IntTensor i64(std::vector<int64_t> v) {
  const auto n = static_cast<int64_t>(v.size());
  return {TensorProto::INT64, {n}, std::move(v)};
}

IntTensor scalar(int64_t v) { return {TensorProto::INT64, {}, {v}}; }

}  // namespace

TEST_CASE("fold-shapes: for aidge and tvm, Shape -> Cast -> Slice -> Cast -> Concat of a static shape becomes the constant") {
  for (const char* target : {"aidge", "tvm"}) {
    CAPTURE(target);
    auto m = paddleFlatten().build();
    Reporter r(forTarget(target));
    qconv::foldShapes(m, r.ctx);
    const auto* reshape = only(m.graph, "Reshape");
    REQUIRE(reshape->input(1)->isConstant());
    REQUIRE(intsOf(reshape->input(1)) == std::vector<int64_t>{1, 120, -1});
    REQUIRE(nodesOf(m.graph, "Shape").empty());
    REQUIRE(nodesOf(m.graph, "Cast").empty());
    REQUIRE(r.ctx.counters().at("Shape of a shape folded") == 1);
    REQUIRE(r.ctx.counters().at("Cast of a shape folded") == 2);
    REQUIRE(nodesOf(m.graph, "DequantizeLinear").size() == 1);  // the Reshape still reads it
  }
}

TEST_CASE("fold-shapes: for iree, torch's F.pad pads computed from constants become the constant Pad reads") {
  // Silero VAD's STFT: [0, 2] ++ ConstantOfShape([2]) -> Reshape([-1, 2]) -> Slice(rows reversed)
  // -> Transpose -> Reshape([-1]) -> Cast -> Pad(x, ·, reflect)
  ModelBuilder b(16);
  b.input("x", TensorProto::FLOAT, {1, 8});
  b.ints("two", TensorProto::INT64, {1}, {2});
  b.ints("head", TensorProto::INT64, {2}, {0, 2});
  b.ints("pairs", TensorProto::INT64, {2}, {-1, 2});
  b.ints("start", TensorProto::INT64, {1}, {-1});
  b.ints("end", TensorProto::INT64, {1}, {INT64_MIN + 1});
  b.ints("axis0", TensorProto::INT64, {1}, {0});
  b.ints("back", TensorProto::INT64, {1}, {-1});
  b.ints("flat", TensorProto::INT64, {1}, {-1});
  onnx::AttributeProto* value = b.node("ConstantOfShape", {"two"}, {"zeros"}, "zeros").add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(TensorProto::INT64);
  value->mutable_t()->add_dims(1);
  value->mutable_t()->add_int64_data(0);
  setInt(b.node("Concat", {"head", "zeros"}, {"joined"}, "concat"), "axis", 0);
  b.node("Reshape", {"joined", "pairs"}, {"paired"}, "reshape");
  b.node("Slice", {"paired", "start", "end", "axis0", "back"}, {"reversed"}, "slice");
  setInts(b.node("Transpose", {"reversed"}, {"columns"}, "transpose"), "perm", {1, 0});
  b.node("Reshape", {"columns", "flat"}, {"pads32"}, "reshape_1");
  setInt(b.node("Cast", {"pads32"}, {"pads"}, "cast"), "to", TensorProto::INT64);
  onnx::NodeProto& pad = b.node("Pad", {"x", "pads"}, {"y"}, "pad");
  onnx::AttributeProto* mode = pad.add_attribute();
  mode->set_name("mode");
  mode->set_type(onnx::AttributeProto::STRING);
  mode->set_s("reflect");
  b.output("y", TensorProto::FLOAT, {1, 10});
  auto m = b.build();
  Reporter r(forTarget("iree"));
  qconv::foldShapes(m, r.ctx);
  const auto* p = only(m.graph, "Pad");
  REQUIRE(p->input(1)->isConstant());
  REQUIRE(intsOf(p->input(1)) == std::vector<int64_t>{0, 0, 0, 2});  // x [1, 8] -> [1, 10]: 2 at the end of axis 1
  REQUIRE(m.graph.nodes().size() == 1);
  REQUIRE(r.ctx.counters().at("Reshape of a shape folded") == 2);
}

TEST_CASE("fold-shapes: another target, or a model whose input shape is not static, keeps the computed shape") {
  for (const bool static_input : {true, false}) {
    ModelBuilder b = paddleFlatten();
    if (!static_input) b.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_param("C");
    auto m = b.build();
    Reporter r(static_input ? forTarget("onnxruntime") : forTarget("aidge"));
    qconv::foldShapes(m, r.ctx);
    REQUIRE(nodesOf(m.graph, "Shape").size() == 1);
    REQUIRE_FALSE(only(m.graph, "Reshape")->input(1)->isConstant());
  }
}

TEST_CASE("shape_eval: Slice with a negative step and negative bounds, as the specification clamps them") {
  ModelBuilder b(13);
  b.node("Slice", {"x", "s", "e", "a", "st"}, {"y"});
  std::string why;
  // [10, 20, 30, 40, 50][-1 : -4 : -2] = [50, 30]
  auto y = eval(b, {i64({10, 20, 30, 40, 50}), i64({-1}), i64({-4}), i64({0}), i64({-2})}, 13, &why);
  REQUIRE(y);
  REQUIRE(y->values == std::vector<int64_t>{50, 30});
  REQUIRE(y->dims == std::vector<int64_t>{2});
  // ends past the end are clamped: [10..50][3 : 100] = [40, 50]
  ModelBuilder bounds(13);
  bounds.node("Slice", {"x", "s", "e"}, {"y"});
  y = eval(bounds, {i64({10, 20, 30, 40, 50}), i64({3}), i64({100})}, 13, &why);
  REQUIRE(y);
  REQUIRE(y->values == std::vector<int64_t>{40, 50});
}

TEST_CASE("shape_eval: Gather by a negative scalar index, Unsqueeze by attribute (opset 11) and by input (13)") {
  std::string why;
  ModelBuilder g(13);
  g.node("Gather", {"x", "i"}, {"y"});
  auto y = eval(g, {i64({1, 120, 1, 40}), scalar(-1)}, 13, &why);  // a scalar index: a scalar
  REQUIRE(y);
  REQUIRE(y->values == std::vector<int64_t>{40});
  REQUIRE(y->dims.empty());
  ModelBuilder u11(11);
  setInts(u11.node("Unsqueeze", {"x"}, {"y"}), "axes", {0});
  y = eval(u11, {scalar(40)}, 11, &why);
  REQUIRE(y->dims == std::vector<int64_t>{1});
  ModelBuilder u13(13);
  u13.node("Unsqueeze", {"x", "axes"}, {"y"});
  y = eval(u13, {scalar(40), i64({0})}, 13, &why);
  REQUIRE(y->dims == std::vector<int64_t>{1});
  REQUIRE(y->values == std::vector<int64_t>{40});
}

TEST_CASE("shape_eval: what it cannot compute exactly is declined with the reason") {
  std::string why;
  ModelBuilder c(13);
  setInt(c.node("Cast", {"x"}, {"y"}), "to", TensorProto::INT32);
  REQUIRE_FALSE(eval(c, {i64({int64_t{1} << 40})}, 13, &why));
  REQUIRE(why == "Cast of 1099511627776 to int32 is out of range");
  ModelBuilder m(13);
  m.node("Mul", {"a", "b"}, {"y"});
  REQUIRE_FALSE(eval(m, {i64({int64_t{1} << 62}), i64({4})}, 13, &why));
  REQUIRE(why == "integer Mul overflows int64");
  ModelBuilder g(13);
  g.node("Gather", {"x", "i"}, {"y"});
  REQUIRE_FALSE(eval(g, {i64({1, 2}), scalar(2)}, 13, &why));
  REQUIRE(why == "a Gather index 2 outside [-2, 2)");
  ModelBuilder k(13);  // ConstantOfShape's default value is a float 0
  k.node("ConstantOfShape", {"x"}, {"y"});
  REQUIRE_FALSE(eval(k, {i64({2})}, 13, &why));
  REQUIRE(why == "a ConstantOfShape of other than one int64 or int32 value");
  ModelBuilder t(13);
  setInts(t.node("Transpose", {"x"}, {"y"}), "perm", {0, 0});
  REQUIRE_FALSE(eval(t, {IntTensor{TensorProto::INT64, {2, 2}, {1, 2, 3, 4}}}, 13, &why));
  REQUIRE(why == "a Transpose whose perm is not a permutation of the input's axes");
}

TEST_CASE("shape_eval: a 2-D Slice reversing rows, a Transpose, a Reshape inferring -1, ConstantOfShape") {
  std::string why;
  const IntTensor m{TensorProto::INT64, {3, 2}, {1, 2, 3, 4, 5, 6}};
  ModelBuilder s(13);
  s.node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
  auto reversed = eval(s, {m, i64({-1}), i64({INT64_MIN + 1}), i64({0}), i64({-1})}, 13, &why);
  REQUIRE(reversed);
  REQUIRE(reversed->dims == std::vector<int64_t>{3, 2});
  REQUIRE(reversed->values == std::vector<int64_t>{5, 6, 3, 4, 1, 2});
  ModelBuilder s4(13);  // no steps
  s4.node("Slice", {"x", "starts", "ends", "axes"}, {"y"});
  auto column = eval(s4, {m, i64({1}), i64({2}), i64({-1})}, 13, &why);
  REQUIRE(column);
  REQUIRE(column->dims == std::vector<int64_t>{3, 1});
  REQUIRE(column->values == std::vector<int64_t>{2, 4, 6});
  ModelBuilder t(13);
  setInts(t.node("Transpose", {"x"}, {"y"}), "perm", {1, 0});
  auto transposed = eval(t, {m}, 13, &why);
  REQUIRE(transposed);
  REQUIRE(transposed->dims == std::vector<int64_t>{2, 3});
  REQUIRE(transposed->values == std::vector<int64_t>{1, 3, 5, 2, 4, 6});
  ModelBuilder r(13);
  r.node("Reshape", {"x", "shape"}, {"y"});
  auto flat = eval(r, {m, i64({-1})}, 13, &why);
  REQUIRE(flat);
  REQUIRE(flat->dims == std::vector<int64_t>{6});
  ModelBuilder k(13);
  onnx::AttributeProto* value = k.node("ConstantOfShape", {"x"}, {"y"}).add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(TensorProto::INT64);
  value->mutable_t()->add_dims(1);
  value->mutable_t()->add_int64_data(7);
  auto filled = eval(k, {i64({2, 2})}, 13, &why);
  REQUIRE(filled);
  REQUIRE(filled->type == TensorProto::INT64);
  REQUIRE(filled->dims == std::vector<int64_t>{2, 2});
  REQUIRE(filled->values == std::vector<int64_t>{7, 7, 7, 7});
  REQUIRE_FALSE(eval(k, {i64({int64_t{1} << 62, 4})}, 13, &why));  // no shape: declined, without overflow
  REQUIRE(why == "a ConstantOfShape of more than 65536 values");
  auto empty = eval(k, {i64({int64_t{1} << 62, 0})}, 13, &why);  // a 0 dim: no values at all
  REQUIRE(empty);
  REQUIRE(empty->values.empty());
}

namespace {

/// x [1,4,2,2] -> Shape -> Reshape(x, ·) -> Relu -> a; x -> Sigmoid -> b; Concat(a, b) -> y
ModelBuilder joinAfterComputedShape(bool static_input) {
  ModelBuilder b(13);
  b.input("x", TensorProto::FLOAT, {1, 4, 2, 2});
  if (!static_input)
    b.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("N");
  b.node("Shape", {"x"}, {"sh"}, "shape");
  b.node("Reshape", {"x", "sh"}, {"r"}, "reshape");
  b.node("Relu", {"r"}, {"a"}, "relu");
  b.node("Sigmoid", {"x"}, {"s"}, "sigmoid");
  setInt(b.node("Concat", {"a", "s"}, {"y"}, "concat"), "axis", 1);
  b.output("y", TensorProto::FLOAT, {1, 8, 2, 2});
  return b;
}

}  // namespace

TEST_CASE("computed dims: a Concat joining a branch after a Reshape to a computed shape with another is found") {
  auto m = joinAfterComputedShape(true).build();
  const auto joins = qconv::computedDimsJoins(m.graph);
  REQUIRE(joins.size() == 1);
  REQUIRE(joins[0].concat->name() == "concat");
  REQUIRE(joins[0].reshape->name() == "reshape");
}

TEST_CASE("fold-shapes for aidge: a static shape is folded and the Concat runs; a shape it cannot fold refuses the Concat") {
  for (const bool static_input : {true, false}) {
    CAPTURE(static_input);
    auto m = joinAfterComputedShape(static_input).build();
    Reporter r(forTarget("aidge"));
    qconv::foldShapes(m, r.ctx);
    const std::string why = r.ctx.unconvertibleReason("concat");
    if (static_input) {
      REQUIRE(why.empty());
      REQUIRE(only(m.graph, "Reshape")->input(1)->isConstant());
      continue;
    }
    REQUIRE_THAT(why, Catch::StartsWith("it joins a tensor computed after reshape (a Reshape to a shape the model "
                                        "computes) with one that is not: Aidge 0.10.1 forwards no dims"));
    REQUIRE_THAT(why, Catch::EndsWith("convert --target aidge computes such a shape to a constant where the model's "
                                      "input shapes are static"));
  }
}
