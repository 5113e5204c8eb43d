// gemm-as-conv: a QDQ Gemm becomes a 1x1 Conv between int8 Unsqueeze and Squeeze, the weight
// laid out [N, K, 1, 1], alpha and beta in the scales; refusals name the condition.
#include <catch2/catch.hpp>

#include "model_builder.h"

using namespace qtest;
using qconv::ir::Node;

namespace {

/// DQ(a u8 [2,3]) , DQ(B s8 [3,2] or [2,3] with transB, per column), C -> Gemm(alpha 0.5, beta 2) -> Q
ModelBuilder qdqGemm(bool trans_b, std::vector<int64_t> c_dims) {
  ModelBuilder b;
  b.input("a", TensorProto::UINT8, {2, 3});
  b.floats("a_s", {}, {0.5f});
  b.ints("a_zp", TensorProto::UINT8, {}, {128});
  b.node("DequantizeLinear", {"a", "a_s", "a_zp"}, {"af"}, "dqa");
  if (trans_b) b.ints("B", TensorProto::INT8, {2, 3}, {1, 2, 3, 4, 5, 6});     // [N, K]
  else b.ints("B", TensorProto::INT8, {3, 2}, {1, 4, 2, 5, 3, 6});             // [K, N]: the same matrix transposed
  b.floats("b_s", {2}, {0.25f, 0.125f});
  b.ints("b_zp", TensorProto::INT8, {2}, {0, 0});
  setInt(b.node("DequantizeLinear", {"B", "b_s", "b_zp"}, {"bf"}, "dqb"), "axis", trans_b ? 0 : 1);
  int64_t n = 1;
  for (int64_t d : c_dims) n *= d;
  b.floats("C", c_dims, std::vector<float>(static_cast<size_t>(n), 1.5f));
  auto& gemm = b.node("Gemm", {"af", "bf", "C"}, {"yf"}, "fc");
  setFloat(gemm, "alpha", 0.5f);
  setFloat(gemm, "beta", 2.0f);
  setInt(gemm, "transB", trans_b ? 1 : 0);
  b.floats("y_s", {}, {0.1f});
  b.ints("y_zp", TensorProto::UINT8, {}, {128});
  b.node("QuantizeLinear", {"yf", "y_s", "y_zp"}, {"y"}, "qy");
  b.output("y", TensorProto::UINT8);
  return b;
}

}  // namespace

TEST_CASE("a Gemm becomes Unsqueeze -> DQ -> Conv(DQ(W [N,K,1,1], alpha*b_s), beta*C) -> Q -> Squeeze") {
  for (bool trans_b : {false, true}) {
    auto m = qdqGemm(trans_b, {2}).build();
    Reporter r;
    qconv::gemmAsConv(m, r.ctx);
    REQUIRE(r.ctx.refusals().empty());
    REQUIRE(nodesOf(m.graph, "Gemm").empty());
    const Node* conv = only(m.graph, "Conv");
    REQUIRE(conv->name() == "fc");
    const Node* dqx = conv->input(0)->producer();
    REQUIRE((dqx->is("DequantizeLinear") && dqx->input(0)->producer()->is("Unsqueeze")));
    REQUIRE(dqx->input(0)->producer()->input(0)->name() == "a");
    const Node* dqw = conv->input(1)->producer();
    REQUIRE(intsOf(dqw->input(0)) == std::vector<int64_t>{1, 2, 3, 4, 5, 6});  // W[n][k], either way B was stored
    REQUIRE(dqw->input(0)->initializer()->dims_size() == 4);
    REQUIRE(floatsOf(dqw->input(1)) == std::vector<float>{0.125f, 0.0625f});  // alpha * b_s
    REQUIRE(dqw->attrInt("axis", -1) == 0);
    REQUIRE(floatsOf(conv->input(2)) == std::vector<float>{3.0f, 3.0f});  // beta * C
    const Node* sq = only(m.graph, "Squeeze");
    REQUIRE(sq->output(0) == m.graph.outputs()[0]);
    REQUIRE(sq->input(0)->producer()->is("QuantizeLinear"));
  }
}

TEST_CASE("a Gemm whose C is not one value per output column stays and says why") {
  auto m = qdqGemm(true, {2, 2}).build();
  Reporter r;
  qconv::gemmAsConv(m, r.ctx);
  REQUIRE(r.ctx.refusals() == std::vector<std::string>{"fc: not fused: C is not one value per output column ([2] or [1, 2])"});
  REQUIRE(only(m.graph, "Gemm"));
}
