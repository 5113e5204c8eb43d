// requantize-narrower (--approximate, for a target without blocked weights (qnn) or without
// 16-bit quantization (rknn)): what the target cannot run is requantized into what it can.
//
// Before / After, blocked weights (the target's profile: blocked not allowed):
//   w_q [R, C] (any integer type) -> DequantizeLinear(s[..], zp[..], axis a, block_size B) -> w
//   w_q' [R, C] int8 -> DequantizeLinear(s'[C'], 0, axis 1 - a) -> w'
// per channel along the other axis, symmetrically: s'[c] = max |w[.., c]| / 127, w_q' = Q(w; s').
// Before / After, 16-bit tensors (the profile's quant_types without int16/uint16):
//   x -> QuantizeLinear(s, z) -> q (uint16) -> DequantizeLinear(s, z)
//   x -> QuantizeLinear(257 s, round(z / 257)) -> q (uint8) -> DequantizeLinear(257 s, round(z / 257))
// (int16 -> int8 the same); a 16-bit constant behind a DequantizeLinear is requantized at those
// parameters. 257 = 65535 / 255: the 8-bit type's range covers the 16-bit one's.
// Each is an approximation, listed with its worst error in steps of its own old scale.
//
// A node is requantized when:
//   1. --approximate is given and the target takes no blocked weights, or no 16-bit type;
//   2. blocked: it is a DequantizeLinear with block_size of a 2-D constant, scale and zero point
//      constant (its integers and parameters readable);
//   3. 16-bit: it is a QuantizeLinear or DequantizeLinear of int16/uint16 with constant scale and
//      zero point, per tensor or per axis (not in blocks).
// What this pass does not change is refused by check-target, with the target's reason.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

bool takes(const TargetProfile& t, int32_t type) {
  return t.quant_types.empty() || std::find(t.quant_types.begin(), t.quant_types.end(), type) != t.quant_types.end();
}

int32_t narrower(int32_t type) {
  return type == onnx::TensorProto::UINT16 ? onnx::TensorProto::UINT8 : type == onnx::TensorProto::INT16 ? onnx::TensorProto::INT8 : 0;
}

struct Narrow {
  ir::Node* n;
  bool blocked;
  std::vector<float> scale;
  std::vector<int64_t> zero_point;
  std::vector<int64_t> q;      // a constant's integers (blocked, or a 16-bit DequantizeLinear of a constant)
  std::vector<int64_t> dims;   // its dims; for a 16-bit Q/DQ, the scale's
};

struct RequantizeNarrower {
  using Group = Narrow;
  const TargetProfile& t;

  bool root(const ir::Node& n) const { return isQuantize(n) || isDequantize(n); }
  std::string declined(const ir::Node&) const { return "not requantized"; }

  Match<Group> select(ir::Node& n) {
    using M = Match<Group>;
    const bool blocked = n.attrInt("block_size", 0) != 0;
    const int32_t type = quantizedTypeOf(n);
    if (blocked ? t.blocked.allowed : (!narrower(type) || takes(t, type))) return M::none();
    if (blocked && !(isDequantize(n) && n.input(0) && n.input(0)->isConstant()))
      return M::refuse("only a constant dequantized in blocks is requantized per channel");
    std::string why;
    const ir::Value* s = n.input(1);
    if (!s || !s->isConstant()) return M::refuse("its scale is not a constant");
    if (n.input(2) && !n.input(2)->isConstant()) return M::refuse("its zero point is not a constant");
    auto scale = ir::readFloats(*s->initializer(), &why);
    if (!scale) scale = ir::readWidenedFloats(*s, &why);
    if (!scale) return M::refuse("its scale cannot be read: " + why);
    std::vector<int64_t> zp(scale->size(), 0);
    if (n.input(2) && !ir::isFloatQuantType(n.input(2)->initializer()->data_type())) {
      auto z = ir::readInts(*n.input(2), &why);
      if (!z || z->size() != zp.size()) return M::refuse("its zero point cannot be read");
      zp = *z;
    }
    Narrow g{&n, blocked, std::move(*scale), std::move(zp), {}, ir::dimsOf(*s->initializer())};
    if (isDequantize(n) && n.input(0) && n.input(0)->isConstant()) {
      auto q = ir::readInts(*n.input(0), &why);
      if (!q) return M::refuse("its constant cannot be read: " + why);
      g.q = std::move(*q);
      g.dims = ir::dimsOf(*n.input(0)->initializer());
    } else if (blocked) {
      return M::none();
    }
    if (blocked && g.dims.size() != 2) return M::refuse("its constant is not 2-D");
    if (!blocked && n.attrInt("block_size", 0)) return M::refuse("it is in blocks");
    return g;
  }

  /// Input 0 <- w_q' (a constant), 1 <- s', 2 <- zp'; axis / block_size as above; a Q's output
  /// type narrowed.
  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    if (g.blocked) return perChannel(graph, g, ctx);
    ir::Node& n = *g.n;
    const int32_t from = quantizedTypeOf(n), to = narrower(from);
    const auto [lo, hi] = ir::intRange(to);
    std::vector<float> s(g.scale.size());
    std::vector<int64_t> z(g.zero_point.size());
    for (size_t c = 0; c < s.size(); ++c) {
      s[c] = g.scale[c] * 257.0f;
      z[c] = std::clamp<int64_t>(static_cast<int64_t>(std::nearbyint(static_cast<double>(g.zero_point[c]) / 257.0)), lo, hi);
    }
    std::vector<ir::Value*> old = n.inputs();
    double worst = 128.5;  // a tensor computed at run time: half an 8-bit step, in 16-bit steps
    if (!g.q.empty()) {  // a 16-bit constant: requantized value by value
      const size_t channels = s.size();
      const int64_t axis = channels > 1 ? n.attrInt("axis", 1) : 0;
      const size_t a = static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(g.dims.size()) : axis);
      size_t inner = 1;
      for (size_t d = a + 1; channels > 1 && d < g.dims.size(); ++d) inner *= static_cast<size_t>(g.dims[d]);
      std::vector<int64_t> q(g.q.size());
      worst = 0;
      for (size_t i = 0; i < q.size(); ++i) {
        const size_t c = channels > 1 ? (i / inner) % channels : 0;
        const float v = static_cast<float>(g.q[i] - g.zero_point[c]) * g.scale[c];
        q[i] = std::clamp(quantizeOne(v, s[c], z[c], to), lo, hi);
        worst = std::max(worst, std::abs(static_cast<double>(static_cast<float>(q[i] - z[c]) * s[c] - v)) / g.scale[c]);
      }
      graph.setInput(&n, 0, graph.addInitializer(old[0]->name() + "_8bit", ir::makeIntTensor(to, g.dims, q)));
    }
    std::vector<int64_t> sdims = n.input(1)->initializer() ? ir::dimsOf(*n.input(1)->initializer()) : std::vector<int64_t>{};
    graph.setInput(&n, 1, graph.addInitializer(old[1]->name() + "_8bit", ir::makeFloatTensor(sdims, s)));
    graph.setInput(&n, 2, graph.addInitializer(old[1]->name() + "_8bit_zero_point", ir::makeIntTensor(to, sdims, z)));
    if (isQuantize(n)) {
      removeAttribute(n, "output_dtype");
      n.output(0)->setElemType(to);
    }
    for (ir::Value* v : old)
      if (v) graph.pruneIfDead(v);
    ctx.report(Report::Approximation, n,
               fmt::format("{} requantized to {} at scale {:.6g} (was {:.6g}), for --target {}: worst error {:.4g} steps of its "
                           "{} scale",
                           ir::typeName(from), ir::typeName(to), s[0], g.scale[0], t.name, worst, ir::typeName(from)));
    ctx.count(fmt::format("{} requantized to {}", ir::typeName(from), ir::typeName(to)));
  }

  void perChannel(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Node& n = *g.n;
    const int64_t rank = 2;
    int64_t axis = n.attrInt("axis", 1);
    if (axis < 0) axis += rank;
    const int64_t block = n.attrInt("block_size", 0);
    const int64_t rows = g.dims[0], cols = g.dims[1];
    const int64_t channel_axis = 1 - axis;
    const int64_t channels = g.dims[static_cast<size_t>(channel_axis)];
    const int64_t scale_cols = axis == 1 ? (cols + block - 1) / block : cols;
    auto at = [&](int64_t r, int64_t c) {  // the element's float value and its block's scale
      const int64_t sr = axis == 0 ? r / block : r, sc = axis == 1 ? c / block : c;
      const size_t k = static_cast<size_t>(sr * scale_cols + sc);
      const size_t i = static_cast<size_t>(r * cols + c);
      return std::pair<float, float>{static_cast<float>(g.q[i] - g.zero_point[k]) * g.scale[k], g.scale[k]};
    };
    std::vector<float> s(static_cast<size_t>(channels), 0.0f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t ch = channel_axis == 0 ? r : c;
        s[static_cast<size_t>(ch)] = std::max(s[static_cast<size_t>(ch)], std::abs(at(r, c).first));
      }
    for (float& v : s) v = v > 0 ? v / 127.0f : 1.0f;
    std::vector<int64_t> q(g.q.size());
    double worst = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const float sc = s[static_cast<size_t>(channel_axis == 0 ? r : c)];
        const auto [v, block_scale] = at(r, c);
        const size_t i = static_cast<size_t>(r * cols + c);
        q[i] = std::clamp<int64_t>(quantizeOne(v, sc, 0, onnx::TensorProto::INT8), -127, 127);
        worst = std::max(worst, std::abs(static_cast<double>(static_cast<float>(q[i]) * sc - v)) / block_scale);
      }
    std::vector<ir::Value*> old = n.inputs();
    const std::string name = old[0]->name();
    const int32_t wtype = old[0]->initializer()->data_type();
    graph.setInput(&n, 0, graph.addInitializer(name + "_per_channel", ir::makeIntTensor(onnx::TensorProto::INT8, g.dims, q)));
    graph.setInput(&n, 1, graph.addInitializer(name + "_per_channel_scale", ir::makeFloatTensor({channels}, s)));
    graph.setInput(&n, 2, graph.addInitializer(name + "_per_channel_zero_point",
                                               ir::makeIntTensor(onnx::TensorProto::INT8, {channels},
                                                                 std::vector<int64_t>(static_cast<size_t>(channels), 0))));
    removeAttribute(n, "block_size");
    removeAttribute(n, "axis");
    setIntAttribute(n, "axis", channel_axis);
    for (ir::Value* v : old)
      if (v) graph.pruneIfDead(v);
    ctx.report(Report::Approximation, n,
               fmt::format("{} weights in blocks of {} requantized per channel (axis {}) as int8, for --target {}: worst "
                           "error {:.3g} steps of a block's own scale",
                           ir::typeName(wtype),
                           block, channel_axis, t.name, worst));
    ctx.count("blocked weights requantized per channel");
  }
};

}  // namespace

void requantizeNarrower(ir::Model& model, PassContext& ctx) {
  const TargetProfile& t = ctx.target();
  if (!ctx.options().approximate || !ctx.options().target) return;  // (1)
  if (t.blocked.allowed && takes(t, onnx::TensorProto::UINT16) && takes(t, onnx::TensorProto::INT16)) return;
  RequantizeNarrower rule{t};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
