// requantize-wide (--approximate, for a target that takes no 16-bit quantization: rknn): int16
// and uint16 tensors are requantized to 8 bits, so the target runs them.
//
// Before:
//   x -> QuantizeLinear(s, z) -> q (uint16) -> DequantizeLinear(s, z)
// After:
//   x -> QuantizeLinear(257 s, round(z / 257)) -> q (uint8) -> DequantizeLinear(257 s, round(z / 257))
// (int16 -> int8 the same). 257 = 65535 / 255: the 8-bit range covers the 16-bit one. A 16-bit
// constant behind a DequantizeLinear is requantized value by value at the new parameters. An
// approximation: each node is listed with its worst error in steps of its old scale (a tensor
// computed at run time: 128.5, half an 8-bit step).
//
// A node is requantized when:
//   1. --approximate is given and the target's quant_types leave out int16 or uint16;
//   2. it is a QuantizeLinear or DequantizeLinear of that type, not in blocks, with a constant
//      scale and zero point (per tensor or per axis).
// What this pass does not change is refused by check-target, with the target's reason.
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

int32_t narrower(int32_t type) {
  return type == onnx::TensorProto::UINT16 ? onnx::TensorProto::UINT8 : type == onnx::TensorProto::INT16 ? onnx::TensorProto::INT8 : 0;
}

struct Wide {
  ir::Node* n;
  QdqValues v;
};

struct RequantizeWide {
  using Group = Wide;
  const TargetProfile& t;

  bool root(const ir::Node& n) const { return isQuantize(n) || isDequantize(n); }
  std::string declined(const ir::Node&) const { return "not requantized to 8 bits"; }

  Match<Group> select(ir::Node& n) {
    using M = Match<Group>;
    const int32_t type = quantizedTypeOf(n);
    if (!narrower(type) || takesType(t, type)) return M::none();  // (2)
    if (n.attrInt("block_size", 0)) return M::refuse("it is in blocks");
    std::string why;
    auto v = readQdqValues(n, &why);
    if (!v) return M::refuse(why);
    return Wide{&n, std::move(*v)};
  }

  /// Input 0 <- the requantized constant (a DequantizeLinear of one), 1 <- 257 s, 2 <- round(z /
  /// 257) of the 8-bit type; a QuantizeLinear's output type narrowed, its output_dtype gone.
  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Node& n = *g.n;
    const int32_t from = quantizedTypeOf(n), to = narrower(from);
    const auto [lo, hi] = ir::intRange(to);
    std::vector<float> s(g.v.scale.size());
    std::vector<int64_t> z(s.size());
    for (size_t c = 0; c < s.size(); ++c) {
      s[c] = g.v.scale[c] * 257.0f;
      z[c] = std::clamp<int64_t>(static_cast<int64_t>(std::nearbyint(static_cast<double>(g.v.zero_point[c]) / 257.0)), lo, hi);
    }
    std::vector<ir::Value*> old = n.inputs();
    double worst = 128.5;  // a tensor computed at run time: half an 8-bit step, in 16-bit steps
    if (!g.v.q.empty()) {  // a 16-bit constant: requantized value by value
      const size_t channels = s.size();
      const int64_t rank = static_cast<int64_t>(g.v.dims.size());
      int64_t axis = channels > 1 ? n.attrInt("axis", 1) : 0;
      if (axis < 0) axis += rank;
      size_t inner = 1;
      for (int64_t d = axis + 1; channels > 1 && d < rank; ++d) inner *= static_cast<size_t>(g.v.dims[static_cast<size_t>(d)]);
      std::vector<int64_t> q(g.v.q.size());
      worst = 0;
      for (size_t i = 0; i < q.size(); ++i) {
        const size_t c = channels > 1 ? (i / inner) % channels : 0;
        const float value = static_cast<float>(g.v.q[i] - g.v.zero_point[c]) * g.v.scale[c];
        q[i] = std::clamp(quantizeOne(value, s[c], z[c], to), lo, hi);
        worst = std::max(worst, std::abs(static_cast<double>(static_cast<float>(q[i] - z[c]) * s[c] - value)) / g.v.scale[c]);
      }
      graph.setInput(&n, 0, graph.addInitializer(old[0]->name() + "_8bit", ir::makeIntTensor(to, g.v.dims, q)));
    }
    graph.setInput(&n, 1, graph.addInitializer(old[1]->name() + "_8bit", ir::makeFloatTensor(g.v.scale_dims, s)));
    graph.setInput(&n, 2, graph.addInitializer(old[1]->name() + "_8bit_zero_point", ir::makeIntTensor(to, g.v.scale_dims, z)));
    if (isQuantize(n)) {
      removeAttribute(n, "output_dtype");
      n.output(0)->setElemType(to);
    }
    for (ir::Value* v : old)
      if (v) graph.pruneIfDead(v);
    ctx.report(Report::Approximation, n,
               fmt::format("{} requantized to {} at scale {:.6g} (was {:.6g}), for --target {}: worst error {:.4g} steps of its "
                           "{} scale",
                           ir::typeName(from), ir::typeName(to), s[0], g.v.scale[0], t.name, worst, ir::typeName(from)));
    ctx.count(fmt::format("{} requantized to {}", ir::typeName(from), ir::typeName(to)));
  }
};

}  // namespace

void requantizeWide(ir::Model& model, PassContext& ctx) {
  const TargetProfile& t = ctx.target();
  if (!ctx.options().approximate || !ctx.options().target) return;  // (1)
  if (takesType(t, onnx::TensorProto::UINT16) && takesType(t, onnx::TensorProto::INT16)) return;
  RequantizeWide rule{t};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
