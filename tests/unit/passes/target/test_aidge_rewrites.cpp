// The exact rewrite Aidge needs (Magika's classifier, issue 47): global-max-pool-as-reduce-max
// writes a GlobalMaxPool as a ReduceMax over its spatial axes, keeping them; the axes an
// attribute below opset 18 and an input from it; nothing for another target, or without a rank.
#include <catch2/catch.hpp>

#include "model_builder.h"
#include "qconv/ir/tensor.h"

using namespace qtest;

namespace {

/// x [dims] -> GlobalMaxPool -> y; `hidden`: between two Relus, its input and output undeclared;
/// `quantized`: x quantized and dequantized before it, the values between and after undeclared
ModelBuilder globalMaxPool(int64_t opset, const std::vector<int64_t>& dims, bool hidden = false, bool quantized = false) {
  ModelBuilder b(opset);
  b.input("x", TensorProto::FLOAT, dims);
  if (hidden) b.node("Relu", {"x"}, {"r"}, "relu_in");
  if (quantized) {
    b.floats("s", {}, {0.5f});
    b.ints("zp", TensorProto::UINT8, {}, {128});
    b.node("QuantizeLinear", {"x", "s", "zp"}, {"xq"}, "q");
    b.node("DequantizeLinear", {"xq", "s", "zp"}, {"r"}, "dq");
  }
  b.node("GlobalMaxPool", {hidden || quantized ? "r" : "x"}, {hidden || quantized ? "g" : "y"}, "gmp");
  if (hidden || quantized) b.node("Relu", {"g"}, {"y"}, "relu_out");
  b.output("y", TensorProto::FLOAT, std::vector<int64_t>(dims.size(), 1));
  return b;
}

}  // namespace

TEST_CASE("global-max-pool-as-reduce-max: for aidge, a GlobalMaxPool becomes a ReduceMax over its spatial axes") {
  auto m = globalMaxPool(15, {1, 256, 512}).build();
  Reporter r(forTarget("aidge"));
  qconv::globalMaxPoolAsReduceMax(m, r.ctx);
  REQUIRE(nodesOf(m.graph, "GlobalMaxPool").empty());
  const qconv::ir::Node* reduce = only(m.graph, "ReduceMax");
  REQUIRE(reduce->attrInts("axes") == std::vector<int64_t>{2});
  REQUIRE(reduce->attrInt("keepdims", 0) == 1);
  REQUIRE(reduce->output(0)->isGraphOutput());
  // opset 18 on: the axes a constant input
  auto m18 = globalMaxPool(18, {1, 8, 4, 4}).build();
  Reporter r18(forTarget("aidge"));
  qconv::globalMaxPoolAsReduceMax(m18, r18.ctx);
  const qconv::ir::Node* reduce18 = only(m18.graph, "ReduceMax");
  REQUIRE(!reduce18->attribute("axes"));
  REQUIRE(reduce18->input(1)->isConstant());
  std::string why;
  REQUIRE(qconv::ir::readInts(*reduce18->input(1), &why) == std::vector<int64_t>{2, 3});
  // the rank declared only before a QuantizeLinear/DequantizeLinear pair (as quantize_static leaves it)
  auto mq = globalMaxPool(15, {1, 8, 4, 4}, false, true).build();
  Reporter rq(forTarget("aidge"));
  qconv::globalMaxPoolAsReduceMax(mq, rq.ctx);
  REQUIRE(only(mq.graph, "ReduceMax")->attrInts("axes") == std::vector<int64_t>{2, 3});
}

TEST_CASE("global-max-pool-as-reduce-max: another target, or an input of unknown rank, keeps the GlobalMaxPool") {
  auto other = globalMaxPool(15, {1, 8, 16}).build();
  Reporter ro(forTarget("tvm"));
  qconv::globalMaxPoolAsReduceMax(other, ro.ctx);
  REQUIRE(nodesOf(other.graph, "GlobalMaxPool").size() == 1);
  auto unknown = globalMaxPool(15, {1, 8, 16}, true).build();
  Reporter ru(forTarget("aidge"));
  qconv::globalMaxPoolAsReduceMax(unknown, ru.ctx);
  REQUIRE(nodesOf(unknown.graph, "GlobalMaxPool").size() == 1);
  REQUIRE(ru.ctx.reports(qconv::Report::Refused) ==
          std::vector<std::string>{"gmp: GlobalMaxPool kept: the rank of its input is not known"});
}
