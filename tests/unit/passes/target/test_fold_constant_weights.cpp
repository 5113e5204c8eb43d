// fold-constant-weights (openvino): an LSTM weight the model computes from constants (Silero VAD's
// gates reordered by Slices and a Concat, then quantized at run time) becomes the floats that chain
// computes; layout_eval's data-movement ops and const_eval's DequantizeLinear compute each step as
// the specification does.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

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
