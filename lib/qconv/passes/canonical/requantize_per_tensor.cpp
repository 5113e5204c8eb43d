// requantize-per-tensor (--approximate, for a target without per-channel quantization: Aidge):
// a constant dequantized per channel is requantized per tensor, so that the target runs it.
//
// Before:
//   q [.., C, ..] (int8/uint8/int32 constant) -> DequantizeLinear(s[C], zp[C], axis) -> v
// After:
//   q' (same type and shape) -> DequantizeLinear(s', zp') -> v'
// where v = (q - zp[c]) * s[c] is requantized over the whole tensor: with every zp 0,
// symmetrically (s' = max|v| / the type's largest value, zp' = 0); otherwise over [min(v, 0),
// max(v, 0)] (s' = range / (qmax - qmin), zp' placing 0 on an integer). q' = Q(v; s', zp').
// An approximation: each is listed with its worst error in steps of the channel's own scale
// (|v' - v| / s[c], largest over the tensor) and its new scale. An int32 bias of a Conv or Gemm
// is requantized at x_scale * w_scale' and zero point 0, w_scale' its weight's new scale: the
// bias scale QLinearConv takes, so what this pass writes verifies clean.
//
// A DequantizeLinear is requantized when:
//   1. --approximate is given, and the target (--target) runs no per-channel quantization;
//   2. its input 0 is a constant int8, uint8 or int32 initializer, and its scale a constant
//      float with more than one value (per axis), zero points constant (or absent);
//   3. every reader of that constant is a DequantizeLinear with the same scale, zero point and
//      axis (they share the one requantized constant; another reader would keep the per-channel one).
// (A scale of one element in a 1-D tensor is made a scalar before, exactly: scalarize-one-channel.)
// What the target cannot run and this pass does not change (a per-channel activation) is
// refused by check-target.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <map>
#include <memory>
#include <tuple>

#include "qconv/diag.h"
#include "qconv/ir/tensor.h"
#include "qconv/passes/common/dequantized_constant.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

/// Each constant requantized: what the other DequantizeLinears that read it take too.
struct Made {
  ir::Value *q, *scale, *zero_point;
};

/// A per-channel constant and its DequantizeLinear; `shared`: requantized already, for another;
/// `bias_scale`: the scale a bias must have (biasScale).
struct PerChannel {
  ir::Node* dq;
  DequantizedConstant k;
  const Made* shared;
  std::optional<float> bias_scale;
};

/// The scale `dq`'s int32 constant must take as the bias of the one Conv or Gemm that reads it:
/// x_scale * w_scale', w_scale' the scale its weight has once requantized per tensor (the
/// float32 product, as QLinearConv's contract reads it); nullopt when it is no such bias.
std::optional<float> biasScale(const ir::Node& dq, const std::function<std::optional<float>(const ir::Node&)>& weightScale) {
  const ir::Value* v = dq.output(0);
  if (!v || v->uses().size() != 1) return std::nullopt;
  const ir::Node& op = *v->uses()[0].node;
  if (v->uses()[0].index != 2 || !(op.is("Conv") || op.is("Gemm"))) return std::nullopt;
  const ir::Node* xdq = op.input(0) ? op.input(0)->producer() : nullptr;
  const ir::Node* wdq = op.input(1) ? op.input(1)->producer() : nullptr;
  if (!xdq || !wdq || !isDequantize(*xdq) || !isDequantize(*wdq)) return std::nullopt;
  std::string why;
  const auto x = readConstQuant(*xdq, &why);
  if (!x || x->per_axis) return std::nullopt;
  const auto w = weightScale(*wdq);
  if (!w) return std::nullopt;
  return x->scale[0] * *w;
}

struct Requantized {
  float scale;
  int64_t zero_point;
  std::vector<int64_t> q;
  double worst_steps;
};

/// `scale`, when given: the bias of a Conv or Gemm, requantized at zero point 0 and at its
/// x_scale * w_scale' (the weight's new scale), as QLinearConv takes a bias.
Requantized requantize(const DequantizedConstant& k, std::optional<float> scale = std::nullopt) {
  auto value = [&](size_t i, size_t c) {  // DequantizeLinear, in float
    return static_cast<float>(k.q[i] - k.params.zero_point[c]) * k.params.scale[c];
  };
  const int32_t type = k.params.elem_type;
  int64_t qmin = 0, qmax = 0;  // plain variables: a lambda below captures them
  std::tie(qmin, qmax) = ir::intRange(type);
  if (type == onnx::TensorProto::INT32) qmin = -(qmax = int64_t{1} << 24);  // exact in float
  const bool symmetric = std::all_of(k.params.zero_point.begin(), k.params.zero_point.end(), [](int64_t z) { return z == 0; });
  float lo = 0, hi = 0;
  forEachElement(k, [&](size_t i, size_t c) {
    const float v = value(i, c);
    lo = std::min(lo, v), hi = std::max(hi, v);
  });
  Requantized r{};
  if (scale) {
    r.scale = *scale;
    r.zero_point = 0;
  } else if (symmetric) {
    const float top = type == onnx::TensorProto::UINT8 ? static_cast<float>(qmax) : static_cast<float>(std::min(qmax, -qmin));
    r.scale = std::max(hi, -lo) / top;
    r.zero_point = 0;
  } else {
    r.scale = (hi - lo) / static_cast<float>(qmax - qmin);
    r.zero_point = std::clamp<int64_t>(static_cast<int64_t>(std::nearbyint(static_cast<float>(qmin) - lo / (r.scale > 0 ? r.scale : 1))),
                                       qmin, qmax);
  }
  if (!(r.scale > 0) || !std::isfinite(r.scale)) r.scale = 1;  // all zeros
  r.q.resize(k.q.size());
  std::vector<float> worst(k.params.size(), 0.0f);  // per channel, in its units: divided once at the end
  forEachElement(k, [&](size_t i, size_t c) {
    const float v = value(i, c);
    r.q[i] = std::clamp(quantizeOne(v, r.scale, r.zero_point, type), qmin, qmax);
    worst[c] = std::max(worst[c], std::abs(static_cast<float>(r.q[i] - r.zero_point) * r.scale - v));
  });
  for (size_t c = 0; c < worst.size(); ++c)
    r.worst_steps = std::max(r.worst_steps, static_cast<double>(worst[c]) / k.params.scale[c]);
  return r;
}

/// `dq` reads `m` per tensor: inputs replaced, its axis attribute gone, the old inputs pruned.
void setPerTensor(ir::Graph& graph, ir::Node& dq, const Made& m, const std::vector<ir::Value*>& old) {
  graph.setInput(&dq, 0, m.q);
  graph.setInput(&dq, 1, m.scale);
  graph.setInput(&dq, 2, m.zero_point);
  removeAttribute(dq, "axis");
  for (ir::Value* v : old)
    if (v) graph.pruneIfDead(v);
}

struct RequantizePerTensor {
  using Group = PerChannel;

  bool root(const ir::Node& n) const { return isDequantize(n); }
  std::string declined(const ir::Node&) const { return "not requantized per tensor"; }

  Match<Group> select(ir::Node& dq) {
    using M = Match<Group>;
    const ir::Value* s = dq.input(1);
    if (!s || !s->isConstant() || ir::numElements(*s->initializer()).value_or(1) <= 1) return M::none();  // (2)
    const ir::Value* in = dq.input(0);
    if (!in || !in->isConstant()) return M::refuse("its input is not a constant: only weights and biases are requantized");
    const int32_t type = in->initializer()->data_type();
    if (type != onnx::TensorProto::INT8 && type != onnx::TensorProto::UINT8 && type != onnx::TensorProto::INT32)
      return M::refuse(fmt::format("its input is {}, not int8, uint8 or int32", ir::typeName(type)));
    for (const ir::Use& u : in->uses())  // (3)
      if (u.node != &dq && !(isDequantize(*u.node) && u.index == 0 && u.node->input(1) == s && u.node->input(2) == dq.input(2) &&
                             u.node->attrInt("axis", 1) == dq.attrInt("axis", 1)))
        return M::refuse(fmt::format("its constant is also read by {}, with other parameters", u.node->label()));
    if (auto it = made.find(in); it != made.end()) return PerChannel{&dq, {}, &it->second, std::nullopt};  // requantized already
    std::string why;
    auto k = readDequantizedConstant(dq, &why);
    if (!k) return M::refuse(why);
    std::optional<float> bias;
    if (type == onnx::TensorProto::INT32) bias = biasScale(dq, [](const ir::Node& w) { return weightScale(w); });
    return PerChannel{&dq, std::move(*k), nullptr, bias};
  }

  /// The per-tensor scale the weight `wdq` dequantizes at after this pass: its own when per
  /// tensor, else the one requantize() gives it (the same function, so the same number).
  static std::optional<float> weightScale(const ir::Node& wdq) {
    std::string why;
    const auto p = readConstQuant(wdq, &why);
    if (!p) return std::nullopt;
    if (!p->per_axis) return p->scale[0];
    const auto k = readDequantizedConstant(wdq, &why);
    if (!k) return std::nullopt;
    return requantize(*k).scale;
  }

  std::map<const ir::Value*, Made> made;  // each constant requantized, for its other readers (3)

  /// DQ input 0 <- q' (same dims and type), 1 <- s' (scalar float), 2 <- zp' (scalar, q's type);
  /// its axis attribute goes (per tensor).
  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Node& dq = *g.dq;
    std::vector<ir::Value*> old = dq.inputs();
    if (g.shared) {  // another reader of the constant made it: the same values, listed once
      setPerTensor(graph, dq, *g.shared, old);
      return;
    }
    const Requantized r = requantize(g.k, g.bias_scale);
    const int32_t type = g.k.params.elem_type;
    const Made m{graph.addInitializer(old[0]->name() + "_per_tensor", ir::makeIntTensor(type, g.k.dims, r.q)),
                 graph.addInitializer(old[1]->name() + "_per_tensor", ir::makeFloatTensor({}, {r.scale})),
                 graph.addInitializer(old[0]->name() + "_zero_point", ir::makeIntTensor(type, {}, {r.zero_point}))};
    made.emplace(old[0], m);
    setPerTensor(graph, dq, m, old);
    const auto [smin, smax] = std::minmax_element(g.k.params.scale.begin(), g.k.params.scale.end());
    ctx.report(Report::Approximation, dq,
               fmt::format("{} per-channel scales ({:.6g} to {:.6g}) requantized per tensor at scale {:.6g}, zero point "
                           "{}, for --target {}: worst error {:.3g} steps of a channel's own scale",
                           g.k.params.size(), *smin, *smax, r.scale, r.zero_point, ctx.target().name, r.worst_steps));
    ctx.count("constants requantized per tensor");
  }
};

}  // namespace

void requantizePerTensor(ir::Model& model, PassContext& ctx) {
  if (!ctx.options().approximate || ctx.target().per_axis.allowed) return;  // (1)
  RequantizePerTensor rule;
  applyRule(model.graph, ctx, rule);
  if (!rule.made.empty())  // what the per-tensor list does not say (docs/targets.md, "What --approximate's figures mean")
    ctx.report(Report::Warning, model.path,
               fmt::format("{} constants requantized per tensor: each is within the steps listed, of a channel's own "
                           "scale, but the errors add up through the layers (2 to 6 output steps on qconv's test models); "
                           "quantizing per tensor at the source (onnxruntime: per_channel=False) converts exactly, with no "
                           "approximation", rule.made.size()));
}

}  // namespace qconv
