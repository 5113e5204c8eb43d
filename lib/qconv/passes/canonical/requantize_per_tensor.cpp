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
// (|v' - v| / s[c], largest over the tensor) and its new scale.
//
// A DequantizeLinear is requantized when:
//   1. --approximate is given, and the target (--target) runs no per-channel quantization;
//   2. its input 0 is a constant int8, uint8 or int32 initializer, and its scale a constant
//      float with more than one value (per axis), zero points constant (or absent);
//   3. it is the only reader of that constant (another would keep the per-channel one).
// What the target cannot run and this pass does not change (a per-channel activation) is
// refused by check-target.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/dequantized_constant.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

/// A per-channel constant and its DequantizeLinear.
struct PerChannel {
  ir::Node* dq;
  DequantizedConstant k;
};

struct Requantized {
  float scale;
  int64_t zero_point;
  std::vector<int64_t> q;
  double worst_steps;
};

Requantized requantize(const DequantizedConstant& k) {
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
  if (symmetric) {
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
    if (in->uses().size() != 1) return M::refuse("its constant has other readers");  // (3)
    std::string why;
    auto k = readDequantizedConstant(dq, &why);
    if (!k) return M::refuse(why);
    return PerChannel{&dq, std::move(*k)};
  }

  /// DQ input 0 <- q' (same dims and type), 1 <- s' (scalar float), 2 <- zp' (scalar, q's type);
  /// its axis attribute goes (per tensor).
  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    const Requantized r = requantize(g.k);
    ir::Node& dq = *g.dq;
    std::vector<ir::Value*> old = dq.inputs();
    const int32_t type = g.k.params.elem_type;
    graph.setInput(&dq, 0, graph.addInitializer(old[0]->name() + "_per_tensor", ir::makeIntTensor(type, g.k.dims, r.q)));
    graph.setInput(&dq, 1, graph.addInitializer(old[1]->name() + "_per_tensor", ir::makeFloatTensor({}, {r.scale})));
    graph.setInput(&dq, 2, graph.addInitializer(dq.input(0)->name() + "_zero_point", ir::makeIntTensor(type, {}, {r.zero_point})));
    auto* attrs = dq.mutableProto().mutable_attribute();
    attrs->erase(std::remove_if(attrs->begin(), attrs->end(), [](const auto& a) { return a.name() == "axis"; }), attrs->end());
    for (ir::Value* v : old)
      if (v) graph.pruneIfDead(v);
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
}

}  // namespace qconv
