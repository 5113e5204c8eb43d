// fold-constant-weights (openvino): an LSTM weight the model computes from constants (Silero VAD's
// gates reordered by Slices and a Concat, then quantized at run time) becomes the floats that chain
// computes; layout_eval's data-movement ops and const_eval's DequantizeLinear compute each step as
// the specification does.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model_builder.h"
#include "qconv/ir/tensor.h"
#include "qconv/passes/common/const_eval.h"
#include "qconv/passes/common/layout_eval.h"

using namespace qtest;
namespace eval = qconv::eval;

namespace {

constexpr int64_t kHidden = 2, kInput = 3;

/// x [4, 1, 3] -> LSTM(x, W, R) -> y_h, W = DQ(Unsqueeze(Q(Concat(Slice(w0, 4..8), Slice(w0, 0..4))))),
/// w0 [8, 3] = 0.1 * k; or (`from_input`) W read from a graph input.
ModelBuilder vadLstm(bool from_input = false) {
  ModelBuilder b(13);
  b.input("x", TensorProto::FLOAT, {4, 1, kInput});
  std::vector<float> w0;
  for (int k = 0; k < 4 * kHidden * kInput; ++k) w0.push_back(0.1f * static_cast<float>(k) - 1.0f);
  if (from_input) b.input("w0", TensorProto::FLOAT, {4 * kHidden, kInput});
  else b.floats("w0", {4 * kHidden, kInput}, w0);
  b.floats("r", {1, 4 * kHidden, kHidden}, std::vector<float>(4 * kHidden * kHidden, 0.25f));
  b.floats("s", {}, {0.02f});
  b.ints("z", TensorProto::INT8, {}, {0});
  b.ints("axis0", TensorProto::INT64, {1}, {0});
  b.ints("lo", TensorProto::INT64, {1}, {0});
  b.ints("mid", TensorProto::INT64, {1}, {2 * kHidden});
  b.ints("hi", TensorProto::INT64, {1}, {4 * kHidden});
  b.node("Slice", {"w0", "mid", "hi", "axis0"}, {"upper"}, "slice_upper");
  b.node("Slice", {"w0", "lo", "mid", "axis0"}, {"lower"}, "slice_lower");
  setInt(b.node("Concat", {"upper", "lower"}, {"gates"}, "concat"), "axis", 0);
  b.node("QuantizeLinear", {"gates", "s", "z"}, {"gates_q"}, "quant");
  b.node("Unsqueeze", {"gates_q", "axis0"}, {"w_q"}, "unsqueeze");
  b.node("DequantizeLinear", {"w_q", "s", "z"}, {"w"}, "dequant");
  auto& lstm = b.node("LSTM", {"x", "w", "r"}, {"", "y_h"}, "lstm");
  setInt(lstm, "hidden_size", kHidden);
  b.output("y_h", TensorProto::FLOAT);
  return b;
}

/// Every initializer of `b` stored in the typed fields (float_data, int32_data for 8-bit types,
/// int64_data) instead of raw_data, as some exporters write them; w0 moved into a Constant node.
void typedFields(ModelBuilder& b) {
  auto* inits = b.graph().mutable_initializer();
  for (auto& t : *inits) {
    const std::string raw = t.raw_data();
    t.clear_raw_data();
    if (t.data_type() == TensorProto::FLOAT) {
      for (size_t k = 0; k < raw.size(); k += 4) {
        float v;
        std::memcpy(&v, raw.data() + k, 4);
        t.add_float_data(v);
      }
    } else if (t.data_type() == TensorProto::INT64) {
      for (size_t k = 0; k < raw.size(); k += 8) {
        int64_t v;
        std::memcpy(&v, raw.data() + k, 8);
        t.add_int64_data(v);
      }
    } else {  // INT8
      for (char c : raw) t.add_int32_data(static_cast<int8_t>(c));
    }
  }
  for (int k = 0; k < inits->size(); ++k) {
    if (inits->Get(k).name() != "w0") continue;
    auto& constant = b.node("Constant", {}, {"w0"}, "w0_constant");
    auto* value = constant.add_attribute();
    value->set_name("value");
    value->set_type(onnx::AttributeProto::TENSOR);
    *value->mutable_t() = inits->Get(k);
    value->mutable_t()->clear_name();
    inits->DeleteSubrange(k, 1);
    auto* nodes = b.graph().mutable_node();
    for (int j = nodes->size() - 1; j > 0; --j) nodes->SwapElements(j, j - 1);  // first, before its readers
    break;
  }
}

std::vector<float> foldedW(qconv::ir::Model& m) {
  Reporter r(forTarget("openvino"));
  qconv::foldConstantWeights(m, r.ctx);
  const qconv::ir::Value* w = only(m.graph, "LSTM")->input(1);
  REQUIRE(w->isConstant());
  std::string why;
  const auto folded = eval::fromValue(*w, &why);
  REQUIRE(folded);
  return folded->f;
}

}  // namespace

TEST_CASE("fold-constant-weights: for openvino, an LSTM weight computed from constants becomes the floats it computes") {
  auto m = vadLstm().build();
  Reporter r(forTarget("openvino"));
  qconv::foldConstantWeights(m, r.ctx);
  const qconv::ir::Node* lstm = only(m.graph, "LSTM");
  const qconv::ir::Value* w = lstm->input(1);
  REQUIRE(w->isConstant());
  for (const char* gone : {"Slice", "Concat", "QuantizeLinear", "Unsqueeze", "DequantizeLinear"})
    REQUIRE(nodesOf(m.graph, gone).empty());
  std::string why;
  const auto folded = eval::fromValue(*w, &why);
  REQUIRE(folded);
  REQUIRE(folded->dims == std::vector<int64_t>{1, 4 * kHidden, kInput});
  // row k of the Concat is row (k + 4) % 8 of w0; each value round(v / 0.02) * 0.02 in float32
  for (int64_t k = 0; k < 4 * kHidden; ++k)
    for (int64_t j = 0; j < kInput; ++j) {
      const int64_t src = ((k + 2 * kHidden) % (4 * kHidden)) * kInput + j;
      const float v = 0.1f * static_cast<float>(src) - 1.0f;
      const float q = std::max(-128.0f, std::min(127.0f, std::nearbyint(v / 0.02f)));  // round half to even
      REQUIRE(folded->f[static_cast<size_t>(k * kInput + j)] == q * 0.02f);
    }
}

TEST_CASE("fold-constant-weights: weights in typed fields and a Constant node fold to the same floats as raw_data") {
  auto raw = vadLstm().build();
  ModelBuilder typed = vadLstm();
  typedFields(typed);
  REQUIRE(typed.graph().initializer(0).raw_data().empty());
  auto m = typed.build();
  REQUIRE(nodesOf(m.graph, "Constant").size() == 1);
  const std::vector<float> expected = foldedW(raw);
  REQUIRE(expected.size() == 4 * kHidden * kInput);
  REQUIRE(foldedW(m) == expected);
  REQUIRE(nodesOf(m.graph, "Constant").empty());
}

TEST_CASE("fold-constant-weights: a weight read from a graph input, or another target, stays") {
  auto m = vadLstm(true).build();
  Reporter r(forTarget("openvino"));
  qconv::foldConstantWeights(m, r.ctx);
  REQUIRE(!only(m.graph, "LSTM")->input(1)->isConstant());
  REQUIRE(r.ctx.reports(qconv::Report::Refused) ==
          std::vector<std::string>{"lstm: input computed at run time kept: input 1: it is not computed from constants alone"});
  auto other = vadLstm().build();
  Reporter ro(forTarget("tvm"));
  qconv::foldConstantWeights(other, ro.ctx);
  REQUIRE(nodesOf(other.graph, "Concat").size() == 1);
}

TEST_CASE("layout_eval: Slice with a negative step, Concat along a middle axis, Transpose; DequantizeLinear per axis") {
  std::string why;
  const eval::Tensor x{TensorProto::FLOAT, {2, 3}, {0, 1, 2, 3, 4, 5}, {}};
  const auto reversed = eval::slice(x, {-1}, {-4}, {1}, {-1}, &why);  // every column, backwards
  REQUIRE(reversed);
  REQUIRE(reversed->f == std::vector<float>{2, 1, 0, 5, 4, 3});
  const auto joined = eval::concat({x, *reversed}, 1, &why);
  REQUIRE(joined);
  REQUIRE(joined->dims == std::vector<int64_t>{2, 6});
  REQUIRE(joined->f == std::vector<float>{0, 1, 2, 2, 1, 0, 3, 4, 5, 5, 4, 3});
  const auto t = eval::transpose(x, {}, &why);
  REQUIRE(t);
  REQUIRE(t->f == std::vector<float>{0, 3, 1, 4, 2, 5});
  REQUIRE(!eval::concat({x, eval::Tensor{TensorProto::FLOAT, {3, 2}, {0, 1, 2, 3, 4, 5}, {}}}, 1, &why));
  REQUIRE(why == "a Concat of tensors of different types, ranks or dims");
  const eval::Tensor q{TensorProto::UINT8, {2, 2}, {}, {0, 255, 128, 130}};
  const auto d = eval::dequantize(q, eval::Tensor{TensorProto::FLOAT, {2}, {0.5f, 0.25f}, {}},
                                  eval::Tensor{TensorProto::UINT8, {2}, {}, {128, 128}}, 0, &why);
  REQUIRE(d);
  REQUIRE(d->f == std::vector<float>{-64.0f, 63.5f, 0.0f, 0.5f});
}
