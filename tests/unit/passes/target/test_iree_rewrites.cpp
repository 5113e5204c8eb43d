// The exact rewrites IREE needs (Silero VAD, issue 47): trim-padding drops a Conv's end padding
// no window reads; reflect-pad-as-gather writes a reflect Pad as a Gather per padded axis, by the
// indices the specification's reflection gives; neither touches anything for another target.
#include <catch2/catch.hpp>

#include "model_builder.h"
#include "qconv/ir/tensor.h"

using namespace qtest;

namespace {

std::vector<int64_t> intsAttr(const qconv::ir::Node& n, const char* name) {
  const onnx::AttributeProto* a = n.attribute(name);
  REQUIRE(a);
  return {a->ints().begin(), a->ints().end()};
}

/// x [1, 4, length] -> Conv(w [4, 4, 3], pads [1, 1], strides [stride]) -> y
ModelBuilder stridedConv(int64_t length, int64_t stride) {
  ModelBuilder b(13);
  b.input("x", TensorProto::FLOAT, {1, 4, length});
  b.floats("w", {4, 4, 3}, std::vector<float>(48, 0.5f));
  auto& conv = b.node("Conv", {"x", "w"}, {"y"}, "conv");
  setInts(conv, "pads", {1, 1});
  setInts(conv, "strides", {stride});
  setInts(conv, "kernel_shape", {3});
  b.output("y", TensorProto::FLOAT);
  return b;
}

/// x [2, 5] -> Pad(pads, mode) -> y
ModelBuilder pad(const std::vector<int64_t>& pads, const char* mode) {
  ModelBuilder b(13);
  b.input("x", TensorProto::FLOAT, {2, 5});
  b.ints("pads", TensorProto::INT64, {4}, pads);
  auto& p = b.node("Pad", {"x", "pads"}, {"y"}, "pad");
  auto* m = p.add_attribute();
  m->set_name("mode");
  m->set_type(onnx::AttributeProto::STRING);
  m->set_s(mode);
  b.output("y", TensorProto::FLOAT);
  return b;
}

}  // namespace

TEST_CASE("trim-padding: for iree, the end padding a single window does not read goes; other padding stays") {
  // length 2, stride 2: padded to 4, one window [0, 3) reads 3 positions: the last pad is unread
  auto vad = stridedConv(2, 2).build();
  Reporter r(forTarget("iree"));
  qconv::trimPadding(vad, r.ctx);
  REQUIRE(intsAttr(*only(vad.graph, "Conv"), "pads") == std::vector<int64_t>{1, 0});
  REQUIRE(r.ctx.reports(qconv::Report::Done) ==
          std::vector<std::string>{"conv: 1 end padding position no window reads dropped (pads now [1, 0])"});
  // length 3, stride 2: padded to 5, windows at 0 and 2 read all of it
  auto read = stridedConv(3, 2).build();
  Reporter r3(forTarget("iree"));
  qconv::trimPadding(read, r3.ctx);
  REQUIRE(intsAttr(*only(read.graph, "Conv"), "pads") == std::vector<int64_t>{1, 1});
  // length 4, stride 2: padded to 6, windows at 0 and 2 leave 1 unread, but the output has two
  // positions, which IREE compiles: kept
  auto two = stridedConv(4, 2).build();
  Reporter r4(forTarget("iree"));
  qconv::trimPadding(two, r4.ctx);
  REQUIRE(intsAttr(*only(two.graph, "Conv"), "pads") == std::vector<int64_t>{1, 1});
  // another target: nothing
  auto other = stridedConv(2, 2).build();
  Reporter ro(forTarget("tvm"));
  qconv::trimPadding(other, ro.ctx);
  REQUIRE(intsAttr(*only(other.graph, "Conv"), "pads") == std::vector<int64_t>{1, 1});
}

TEST_CASE("reflect-pad-as-gather: for iree, a reflect Pad becomes one Gather per padded axis, reflected") {
  auto m = pad({1, 0, 0, 3}, "reflect").build();  // axis 0: 1 at the begin; axis 1: 3 at the end
  Reporter r(forTarget("iree"));
  qconv::reflectPadAsGather(m, r.ctx);
  REQUIRE(nodesOf(m.graph, "Pad").empty());
  const auto gathers = nodesOf(m.graph, "Gather");
  REQUIRE(gathers.size() == 2);
  REQUIRE(gathers[0]->attrInt("axis", -1) == 0);
  REQUIRE(intsOf(gathers[0]->input(1)) == std::vector<int64_t>{1, 0, 1});  // [x1, x0, x1]
  REQUIRE(gathers[1]->attrInt("axis", -1) == 1);
  REQUIRE(intsOf(gathers[1]->input(1)) == std::vector<int64_t>{0, 1, 2, 3, 4, 3, 2, 1});
  REQUIRE(gathers[1]->input(0) == gathers[0]->output(0));
  REQUIRE(gathers[1]->output(0)->isGraphOutput());
  REQUIRE(r.ctx.counters().at("reflect Pads as Gathers") == 1);
}

TEST_CASE("reflect-pad-as-gather: another mode, another target, or a pad the reflection cannot give stays") {
  auto edge = pad({0, 0, 0, 3}, "edge").build();
  Reporter r(forTarget("iree"));
  qconv::reflectPadAsGather(edge, r.ctx);
  REQUIRE(nodesOf(edge.graph, "Pad").size() == 1);
  auto other = pad({0, 0, 0, 3}, "reflect").build();
  Reporter ro(forTarget("tvm"));
  qconv::reflectPadAsGather(other, ro.ctx);
  REQUIRE(nodesOf(other.graph, "Pad").size() == 1);
  auto wide = pad({0, 0, 0, 5}, "reflect").build();  // 5 > 5 - 1
  Reporter rw(forTarget("iree"));
  qconv::reflectPadAsGather(wide, rw.ctx);
  REQUIRE(nodesOf(wide.graph, "Pad").size() == 1);
  REQUIRE(rw.ctx.reports(qconv::Report::Refused) ==
          std::vector<std::string>{"pad: reflect Pad kept: a pad of axis 1 outside [0, 4]"});
}
