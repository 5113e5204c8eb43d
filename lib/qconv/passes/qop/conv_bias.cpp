#include "qconv/passes/qop/conv_bias.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "qconv/ir/tensor.h"

namespace qconv {

namespace {

constexpr double kInt32Max = std::numeric_limits<int32_t>::max();
constexpr double kInt32Min = std::numeric_limits<int32_t>::min();

double requantized(float real, float x_scale, float w_scale) {
  return std::nearbyint(static_cast<double>(real) / static_cast<double>(x_scale * w_scale));
}

std::vector<float> expand(const std::vector<float>& v, int64_t m) {
  return v.size() == 1 ? std::vector<float>(static_cast<size_t>(m), v[0]) : v;
}

/// Raise w_scale[c] for each overflowing channel and requantize its weights (condition 2).
bool raise(const ConvGroup& g, const std::vector<int64_t>& channels, BiasPlan& p, std::string* why) {
  for (int64_t z : g.w.params.zero_point)
    if (z != 0) {
      *why = "cannot raise the weight scale: weight zero point is not constant 0";
      return false;
    }
  const onnx::TensorProto& w = *g.w.quantized()->initializer();
  auto wq = ir::readInts(*g.w.quantized(), why);
  if (!wq) return false;
  auto [lo, hi] = ir::intRange(w.data_type());
  const size_t m = p.w_scale.size(), per = wq->size() / m;
  for (int64_t c : channels) {
    const float old = p.w_scale[c];
    float s = static_cast<float>(std::fabs(static_cast<double>(p.real[c])) / (p.x_scale * (kInt32Max - 128.0)));
    s = std::max(s, old);
    while (std::fabs(requantized(p.real[c], p.x_scale, s)) > kInt32Max) s = std::nextafter(s, std::numeric_limits<float>::infinity());
    for (size_t k = 0; k < per; ++k) {
      int64_t& v = (*wq)[static_cast<size_t>(c) * per + k];
      v = static_cast<int64_t>(std::min<double>(hi, std::max<double>(lo, std::nearbyint(static_cast<double>(v) * old / s))));
    }
    p.old_w_scale.push_back(old);
    p.w_scale[c] = s;
  }
  p.raised = channels;
  p.weight = std::move(*wq);
  return true;
}

}  // namespace

std::optional<BiasPlan> planBias(const ConvGroup& g, bool raise_weight_scale, std::string* why) {
  BiasPlan p;
  p.name = g.bias->name() + "_int32";
  const int64_t m = ir::dimsOf(*g.w.quantized()->initializer())[0];
  p.x_scale = g.x.params.scale[0];
  p.w_scale = expand(g.w.params.scale, m);
  std::vector<float> dq_scale;
  if (g.bias_params) {  // DQ(int32, s_b, 0): read and checked by selectConvGroup
    ir::Node* dq = dequantizeFeeding(g.bias);
    dq_scale = expand(g.bias_params->scale, m);
    bool same = true;  // already at x_scale * w_scale[c], bit for bit: used as is, its values unread
    for (int64_t c = 0; same && c < m; ++c) {
      const float want = p.x_scale * p.w_scale[c];
      same = std::memcmp(&want, &dq_scale[c], sizeof(float)) == 0;
    }
    if (same) {
      if (std::string problem = ir::storageProblem(*dq->input(0)); !problem.empty()) {
        *why = "bias cannot be read: " + problem;
        return std::nullopt;
      }
      p.kept = dq->input(0);
      return p;
    }
    std::string inner;
    auto ints = ir::readInts(*dq->input(0), &inner);
    if (!ints) {
      *why = "bias cannot be read: " + inner;
      return std::nullopt;
    }
    p.real.reserve(static_cast<size_t>(m));
    for (int64_t c = 0; c < m; ++c) p.real.push_back(static_cast<float>((*ints)[c]) * dq_scale[c]);
  } else {
    auto f = ir::readFloats(*g.bias, why);
    if (!f) return std::nullopt;
    p.real = std::move(*f);
  }
  std::vector<int64_t> overflow;
  for (int64_t c = 0; c < m; ++c) {
    if (!std::isfinite(p.real[c])) {  // (1)
      *why = fmt::format("bias of output channel {} is {}", c, p.real[c]);
      return std::nullopt;
    }
    const double q = requantized(p.real[c], p.x_scale, p.w_scale[c]);
    if (!(q >= kInt32Min && q <= kInt32Max)) overflow.push_back(c);
  }
  if (!overflow.empty() && !raise_weight_scale) {  // (2)
    const int64_t c = overflow[0];
    *why = fmt::format("bias of output channel {} is {} and does not fit int32 at scale x_scale*w_scale = {} "
                       "({} channel(s) overflow); --raise-weight-scale raises those channels' weight scales "
                       "(an approximation)",
                       c, p.real[c], p.x_scale * p.w_scale[c], overflow.size());
    return std::nullopt;
  }
  if (!overflow.empty() && !raise(g, overflow, p, why)) return std::nullopt;
  p.values.reserve(static_cast<size_t>(m));
  for (int64_t c = 0; c < m; ++c) p.values.push_back(static_cast<int64_t>(requantized(p.real[c], p.x_scale, p.w_scale[c])));
  return p;
}

ir::Value* writeBias(ir::Graph& graph, ir::Node& fused, const BiasPlan& p, PassContext& ctx) {
  if (p.kept) {
    ctx.count("bias kept at x_scale*w_scale");
    return p.kept;
  }
  const int64_t m = static_cast<int64_t>(p.values.size());
  if (!p.raised.empty()) {
    for (size_t k = 0; k < p.raised.size(); ++k) {
      const int64_t c = p.raised[k];
      ctx.report(Report::Approximation, fused,
                 fmt::format("output channel {}: bias {} does not fit int32 at scale x_scale*w_scale = {}; weight scale "
                             "raised from {} to {} and the channel's weights requantized",
                             c, p.real[c], p.x_scale * p.old_w_scale[k], p.old_w_scale[k], p.w_scale[c]));
    }
    ir::Value* old_w = fused.input(3);
    const int32_t wtype = old_w->initializer()->data_type();
    graph.setInput(&fused, 3, graph.addInitializer(old_w->name(), ir::makeIntTensor(wtype, ir::dimsOf(*old_w->initializer()), p.weight)));
    graph.setInput(&fused, 4, graph.addInitializer(fused.input(4)->name(), ir::makeFloatTensor({m}, p.w_scale)));
    graph.setInput(&fused, 5, graph.addInitializer("w_zero_point", ir::makeIntTensor(wtype, {m}, std::vector<int64_t>(m, 0))));
  }
  ctx.report(Report::Detail, fused, "bias requantized to int32 at x_scale*w_scale");
  ctx.count("bias requantized");
  return graph.addInitializer(p.name, ir::makeIntTensor(onnx::TensorProto::INT32, {m}, p.values));
}

}  // namespace qconv
