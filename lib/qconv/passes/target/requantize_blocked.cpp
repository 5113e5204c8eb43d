// requantize-blocked (--approximate, for a target that takes no blocked weights: qnn, rknn): a
// constant dequantized in blocks is requantized per channel, at int8, so the target runs it.
//
// Before:
//   w_q [R, C] (any integer type) -> DequantizeLinear(s[..], zp[..], axis a, block_size B) -> w
// After:
//   w_q' [R, C] int8 -> DequantizeLinear(s'[channels], 0, axis 1 - a) -> w'
// per channel along the axis that is not blocked, symmetrically: s'[c] = max |w[.., c]| / 127,
// w_q' = Q(w; s') in [-127, 127]. int8 rather than the input's 4 bits: the finer form both
// runtimes take on weights (QNN HTP runs int8 and int4 per-channel weights), so the error is the
// smallest the target allows. An approximation: each is listed with its worst error in steps of
// the block's own scale.
//
// A DequantizeLinear is requantized when:
//   1. --approximate is given and the target (--target) takes no blocked weights;
//   2. it has a block_size and its input is a 2-D constant; its scale and zero point constant,
//      of the blocked shape (ceil(R / B) x C along axis 0, R x ceil(C / B) along axis 1).
// What this pass does not change (a blocked activation) is refused by check-target.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/driver.h"
#include "qconv/passes/target/qdq_values.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

struct Blocked {
  ir::Node* n;
  QdqValues v;
  int64_t axis, block;
};

struct RequantizeBlocked {
  using Group = Blocked;
  const TargetProfile& t;

  bool root(const ir::Node& n) const { return isDequantize(n) && n.attrInt("block_size", 0) != 0; }
  std::string declined(const ir::Node&) const { return "not requantized per channel"; }

  Match<Group> select(ir::Node& n) {
    using M = Match<Group>;
    if (!(n.input(0) && n.input(0)->isConstant())) return M::refuse("only a constant dequantized in blocks is requantized");
    std::string why;
    auto v = readQdqValues(n, &why);  // (2)
    if (!v) return M::refuse(why);
    if (v->dims.size() != 2) return M::refuse("its constant is not 2-D");
    int64_t axis = n.attrInt("axis", 1);
    if (axis < 0) axis += 2;
    const int64_t block = n.attrInt("block_size", 0);
    if (axis < 0 || axis > 1 || block <= 0) return M::refuse("its axis or block size is out of range");
    std::vector<int64_t> want = v->dims;
    want[static_cast<size_t>(axis)] = (want[static_cast<size_t>(axis)] + block - 1) / block;
    if (v->scale_dims != want) return M::refuse("its scale is not of the blocked shape");
    return Blocked{&n, std::move(*v), axis, block};
  }

  /// Input 0 <- w_q' (int8, same dims), 1 <- s' [channels], 2 <- zeros (int8); block_size goes,
  /// axis <- the channel axis.
  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Node& n = *g.n;
    const int64_t rows = g.v.dims[0], cols = g.v.dims[1];
    const int64_t channel_axis = 1 - g.axis;
    const int64_t channels = g.v.dims[static_cast<size_t>(channel_axis)];
    const int64_t scale_cols = g.v.scale_dims[1];
    auto at = [&](int64_t r, int64_t c) {  // the element's float value and its block's scale
      const int64_t sr = g.axis == 0 ? r / g.block : r, sc = g.axis == 1 ? c / g.block : c;
      const size_t k = static_cast<size_t>(sr * scale_cols + sc);
      const size_t i = static_cast<size_t>(r * cols + c);
      return std::pair<float, float>{static_cast<float>(g.v.q[i] - g.v.zero_point[k]) * g.v.scale[k], g.v.scale[k]};
    };
    auto channel = [&](int64_t r, int64_t c) { return static_cast<size_t>(channel_axis == 0 ? r : c); };
    std::vector<float> s(static_cast<size_t>(channels), 0.0f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) s[channel(r, c)] = std::max(s[channel(r, c)], std::abs(at(r, c).first));
    for (float& x : s) x = x > 0 ? x / 127.0f : 1.0f;
    std::vector<int64_t> q(g.v.q.size());
    double worst = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const float sc = s[channel(r, c)];
        const auto [value, block_scale] = at(r, c);
        const size_t i = static_cast<size_t>(r * cols + c);
        q[i] = std::clamp<int64_t>(quantizeOne(value, sc, 0, onnx::TensorProto::INT8), -127, 127);
        worst = std::max(worst, std::abs(static_cast<double>(static_cast<float>(q[i]) * sc - value)) / block_scale);
      }
    std::vector<ir::Value*> old = n.inputs();
    const std::string name = old[0]->name();
    const int32_t wtype = old[0]->initializer()->data_type();
    graph.setInput(&n, 0, graph.addInitializer(name + "_per_channel", ir::makeIntTensor(onnx::TensorProto::INT8, g.v.dims, q)));
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
                           ir::typeName(wtype), g.block, channel_axis, t.name, worst));
    ctx.count("blocked weights requantized per channel");
  }
};

}  // namespace

void requantizeBlocked(ir::Model& model, PassContext& ctx) {
  if (!ctx.options().approximate || !ctx.options().target || ctx.target().blocked.allowed) return;  // (1)
  RequantizeBlocked rule{ctx.target()};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
