// requantize-shared-bias (--approximate): a QOperator node that reads an int32 bias another one
// was quantized for, at another scale, gets its own: the first reader's bias at its scale.
//
// Before (onnxruntime's quantize_static, QOperator format, a float bias B two Gemms share:
// it quantizes B once, for the first; shared_bias.h):
//   QGemm_0(a0, a0_s, .., b, b_s, .., B_q, ..)    B_q at a0_s * b_s     (the model's B)
//   QGemm_1(a1, a1_s, .., b, b_s, .., B_q, ..)    B_q at a1_s * b_s     (another bias)
// After:
//   QGemm_0(.., B_q, ..)
//   QGemm_1(.., B_q', ..)    B_q'[i] = round(B_q[i] * s0[c] / s1[c]), c the channel of i
// The input computes QGemm_1 with B_q * s1, which is not the bias the float model has; qconv
// keeps that math unless asked (verify names it, convert says the output carries it). With
// --approximate each later reader is given B_q * s0 at its own scale s1, listed with its worst
// error in steps of s1 (0 where every value lands on an integer; at most 0.5).
//
// A reader is given its own bias when:
//   1. --approximate is given;
//   2. it is a QOp node with an int32 constant bias whose scales are constant and positive
//      (shared_bias.h: biasReadOf), read by an earlier QOp node at another scale;
//   3. each value at its scale fits int32 (else refused, naming the node).
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <optional>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/shared_bias.h"
#include "qconv/passes/driver.h"

namespace qconv {

namespace {

struct OwnBias {
  ir::Node* node;
  size_t slot;
  const ir::Value* shared;
  std::vector<int64_t> values;  // the first reader's bias at this node's scale
  std::vector<int64_t> dims;
  double worst;                 // steps of this node's scale
  std::string first, from, to;  // for the listing: the first reader, its scale, this one's
};

struct RequantizeSharedBias {
  using Group = OwnBias;
  std::map<const ir::Node*, std::pair<const SharedBias*, size_t>> later;  // reader -> (its bias, its read)
  const std::vector<SharedBias>* shared;

  bool root(const ir::Node& n) const { return later.count(&n) > 0; }
  std::string declined(const ir::Node&) const { return "bias not requantized"; }

  Match<Group> select(ir::Node& n) {
    const auto [b, k] = later.at(&n);
    const BiasRead& first = b->reads.front();
    const BiasRead& read = b->reads[k];
    std::string why;
    const auto q = ir::readInts(*b->bias, &why);
    if (!q) return Match<Group>::refuse(fmt::format("its int32 bias '{}' cannot be read: {}", b->bias->name(), why));
    auto at = [](const std::vector<float>& s, size_t i) { return static_cast<double>(s[s.size() == 1 ? 0 : i % s.size()]); };
    OwnBias own{&n, read.slot, b->bias, {}, ir::dimsOf(*b->bias->initializer()), 0.0, first.node->label(),
                biasScaleText(first.scale), biasScaleText(read.scale)};
    for (size_t i = 0; i < q->size(); ++i) {
      const double value = static_cast<double>((*q)[i]) * at(first.scale, i);  // the model's bias
      const double steps = value / at(read.scale, i);
      const double r = std::nearbyint(steps);
      if (!(std::fabs(r) <= 2147483647.0))  // (3)
        return Match<Group>::refuse(fmt::format("the bias '{}' of {} is {:.6g} steps of this node's x_scale * "
                                                "w_scale {}: outside int32",
                                                b->bias->name(), first.node->label(), steps, own.to));
      own.values.push_back(static_cast<int64_t>(r));
      own.worst = std::max(own.worst, std::fabs(r - steps));
    }
    return own;
  }

  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Value* mine = graph.addInitializer(g.shared->name() + "_" + g.node->label(),
                                           ir::makeIntTensor(onnx::TensorProto::INT32, g.dims, g.values));
    graph.setInput(g.node, g.slot, mine);
    ctx.report(Report::Approximation, *g.node,
               fmt::format("its int32 bias '{}' was quantized for {} (x_scale * w_scale {}), and it reads it at {}: "
                           "given its own, that bias at its own scale (worst {:.2f} steps of it)",
                           g.shared->name(), g.first, g.from, g.to, g.worst));
    ctx.count("bias requantized for its own scale");
  }
};

}  // namespace

void requantizeSharedBias(ir::Model& model, PassContext& ctx) {
  if (!ctx.options().approximate) return;  // (1)
  const std::vector<SharedBias> shared = sharedBiases(model.graph);  // (2)
  if (shared.empty()) return;
  RequantizeSharedBias rule{{}, &shared};
  for (const SharedBias& b : shared)
    for (size_t k = 1; k < b.reads.size(); ++k) rule.later[b.reads[k].node] = {&b, k};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
