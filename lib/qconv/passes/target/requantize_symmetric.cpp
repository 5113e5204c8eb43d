// requantize-symmetric (--approximate, for a target that takes zero points 0 only: TensorRT): an
// activation quantized at a zero point other than 0 is requantized symmetrically, so that the
// target takes it.
//
// Before:  x -> QuantizeLinear(s, z) -> t -> DequantizeLinear(s, z) [-> ...each reader]
// After:   x -> Clip(lo, hi) -> QuantizeLinear(s', 0) -> t -> DequantizeLinear(s', 0)
// where [lo, hi] = [s * (qmin - z), s * (qmax - z)], the range t stood for, fits
// [-127 s', 127 s']: s' = s * max(z - qmin, qmax - z) / 127. The Clip keeps the old range's
// saturation (a Relu a producer dropped because Q(zero point qmin) did its work, say), so only
// the rounding changes. An approximation (a coarser step where z was not in the middle): each
// tensor is listed with its new scale and its worst rounding error, s' / 2, in steps of s.
//
// A tensor is requantized when:
//   1. --approximate is given, and the target takes zero points 0 only;
//   2. it is the output of a QuantizeLinear with constant per-tensor int8 parameters (after
//      shift-types: the target's type) and a zero point other than 0;
//   3. every reader is a DequantizeLinear with the same parameters, and it is not a graph output
//      (whose integers a reader outside would read with the old zero point);
//   4. its scale is float (so x is float) and the opset is 11 or more (Clip's bounds as inputs).
// Constants (weights) at a zero point other than 0 are not changed: check-target refuses them.
#include <fmt/format.h>

#include <algorithm>

#include "qconv/ir/tensor.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

struct Asymmetric {
  ir::Node* q;
  std::vector<ir::Node*> dqs;
  ConstQuant params;
};

struct RequantizeSymmetric {
  using Group = Asymmetric;
  int64_t opset;
  int requantized = 0;

  bool root(const ir::Node& n) const { return isQuantize(n); }
  std::string declined(const ir::Node&) const { return "not requantized symmetrically"; }

  Match<Group> select(ir::Node& q) {
    using M = Match<Group>;
    std::string why;
    auto p = readConstQuant(q, &why);  // (2)
    if (!p || p->per_axis || p->elem_type != onnx::TensorProto::INT8 || p->zero_point[0] == 0) return M::none();
    const ir::Value* t = q.output(0);
    if (t->isGraphOutput()) return M::refuse("its integers are a graph output");  // (3)
    if (p->scale_type != onnx::TensorProto::FLOAT) return M::refuse("its scale is not float");  // (4)
    if (opset < 11) return M::refuse(fmt::format("the Clip it needs takes its bounds as inputs from opset 11; the model has {}", opset));
    Group g{&q, {}, std::move(*p)};
    for (const ir::Use& u : t->uses()) {
      auto r = u.index != ir::kImplicitUse && isDequantize(*u.node) ? readConstQuant(*u.node, &why) : std::nullopt;
      if (!r || !sameQuant(*r, g.params)) return M::refuse("a reader is not a DequantizeLinear with its parameters");
      g.dqs.push_back(u.node);
    }
    return g;
  }

  /// Clip(x <- Q's input 0, lo, hi) before Q; Q input 0 <- Clip's output; Q and each DQ: input
  /// 1 <- s' (scalar float), input 2 <- 0 (scalar int8).
  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    const float s = g.params.scale[0];
    const int64_t z = g.params.zero_point[0];
    const float scale = s * static_cast<float>(std::max(z + 128, 127 - z)) / 127.0f;
    const float lo = static_cast<float>(-128 - z) * s, hi = static_cast<float>(127 - z) * s;
    ir::Node* clip = graph.createNode("Clip", "",
                                      {g.q->input(0), graph.addInitializer("clip_min", ir::makeFloatTensor({}, {lo})),
                                       graph.addInitializer("clip_max", ir::makeFloatTensor({}, {hi}))},
                                      1, g.q);
    clip->output(0)->setElemType(onnx::TensorProto::FLOAT);
    graph.setInput(g.q, 0, clip->output(0));
    ir::Value* sv = graph.addInitializer(g.q->output(0)->name() + "_scale", ir::makeFloatTensor({}, {scale}));
    ir::Value* zv = graph.addInitializer(g.q->output(0)->name() + "_zero_point",
                                         ir::makeIntTensor(onnx::TensorProto::INT8, {}, {0}));
    std::vector<ir::Node*> all = g.dqs;
    all.push_back(g.q);
    std::vector<ir::Value*> old;
    for (ir::Node* n : all) {
      old.push_back(n->input(1));
      old.push_back(n->input(2));
      graph.setInput(n, 1, sv);
      graph.setInput(n, 2, zv);
    }
    for (ir::Value* v : old)
      if (v) graph.pruneIfDead(v);
    ctx.report(Report::Approximation, g.q->output(0)->name(),
               fmt::format("zero point {} at scale {:.6g} requantized symmetrically at scale {:.6g} for --target {}: "
                           "worst rounding error {:.3g} steps",
                           z, s, scale, ctx.target().name, scale / s / 2));
    ctx.count("activations requantized symmetrically");
    ++requantized;
  }
};

}  // namespace

void requantizeSymmetric(ir::Model& model, PassContext& ctx) {
  if (!ctx.options().approximate || ctx.target().nonzero_zero_point.allowed) return;  // (1)
  RequantizeSymmetric rule{ir::defaultOpset(model), 0};
  applyRule(model.graph, ctx, rule);
  if (rule.requantized)  // what the per-tensor list does not say (docs/targets.md, "What --approximate's figures mean")
    ctx.report(Report::Warning, model.path,
               fmt::format("{} activations requantized symmetrically: each is within the steps listed, of its own old "
                           "scale, but the errors add up through the layers (2 to 5 output steps on qconv's test models, "
                           "tens on deep ones); quantizing activations symmetrically at the source (onnxruntime: "
                           "extra_options={{'ActivationSymmetric': True}}) converts exactly, with no approximation",
                           rule.requantized));
}

}  // namespace qconv
