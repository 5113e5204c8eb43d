// lower-qonnx-quant: QONNX Quant / IntQuant become QuantizeLinear [-> Clip] -> DequantizeLinear
// (or an exact float-op emulation); BipolarQuant becomes its float-op emulation.
//
// Before (domains qonnx.custom_op.general, onnx.brevitas, finn.custom_op.general):
//   x -> Quant(scale, zeropt, bitwidth; signed, narrow, rounding_mode) -> y
//        y = (round(clamp(x / scale + zeropt, min, max)) - zeropt) * scale
// After:
//   x -> QuantizeLinear(s, 0:T[, axis]) -> [Clip(min:T, max:T)] -> DequantizeLinear(s, 0:T[, axis]) -> y
//   T = int8 when signed, uint8 when not; the Clip only when [min, max] is narrower than T.
//
// A node is lowered when all of these hold, so the result computes the same bits:
//   1. scale is a constant, positive and finite, per tensor or varying along one axis of x;
//   2. zeropt is constant 0 (a non-zero zero point is added before rounding: not
//      QuantizeLinear's math on ties);
//   3. bitwidth is a constant integer from 2 to 8 (1-bit signed is bipolar);
//   4. rounding_mode is ROUND or HALF_EVEN (ties to even, as QuantizeLinear);
//   5. the default opset is >= 13 (per-axis Q/DQ, integer Clip).
// Why it is exact: for integer bounds, round(clamp(v)) == clamp(round(v)); QuantizeLinear's
// saturation to T then the Clip give [min, max]; DequantizeLinear's float(q) * s is QONNX's
// y_int * scale. Otherwise the node is emulated exactly with standard float ops
// (qonnx_emulation.cpp): still the same numbers, but nothing a QLinear op can fuse, and the
// note says why. A node neither can handle stays, and qconv refuses the model with the reason.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/read/qonnx_emulation.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

bool isQonnxDomain(const std::string& d) {
  return d == "qonnx.custom_op.general" || d == "onnx.brevitas" || d == "finn.custom_op.general";
}

bool isQonnxQuant(const ir::Node& n) {
  return (n.opIs("Quant") || n.opIs("IntQuant")) && isQonnxDomain(n.domain());
}

struct QuantSpec {
  std::vector<float> scale;
  std::vector<int64_t> scale_dims;
  bool per_axis = false;
  int64_t axis = 0;
  int32_t type = 0;
  int64_t lo = 0, hi = 0;
};

std::optional<QuantSpec> matchQuant(const ir::Node& n, int64_t opset, std::string* why) {
  QuantSpec q;
  std::string inner;
  auto floatsOf = [&](size_t slot) -> std::optional<std::vector<float>> {
    const ir::Value* v = n.input(slot);
    return v && v->isConstant() ? ir::readFloats(*v, &inner) : std::nullopt;
  };
  auto scale = floatsOf(1);
  if (!scale || scale->empty() ||
      std::any_of(scale->begin(), scale->end(), [](float f) { return !(std::isfinite(f) && f > 0); })) {  // (1)
    *why = "scale is not a constant positive finite tensor";
    return std::nullopt;
  }
  q.scale = *scale;
  q.scale_dims = ir::dimsOf(*n.input(1)->initializer());
  if (q.scale.size() > 1) {
    const int64_t rank = knownRank(n.input(0));
    const int64_t srank = static_cast<int64_t>(q.scale_dims.size());
    int64_t axes = 0;
    for (int64_t k = 0; k < srank; ++k)
      if (q.scale_dims[k] != 1) {
        ++axes;
        q.axis = rank - srank + k;
      }
    if (axes != 1 || rank < srank) {
      *why = "scale varies along more than one axis, or the input's rank is unknown";
      return std::nullopt;
    }
    q.per_axis = true;
  }
  auto zp = floatsOf(2);  // (2)
  if (!zp || std::any_of(zp->begin(), zp->end(), [](float f) { return f != 0.0f; })) {
    *why = "zero point is not constant 0 (QONNX adds it before rounding, QuantizeLinear after)";
    return std::nullopt;
  }
  const QonnxQuantAttrs attrs = readQonnxQuant(n);
  if (!attrs.bits || *attrs.bits < 2 || *attrs.bits > 8) {  // (3)
    *why = "bit width is not a constant integer from 2 to 8";
    return std::nullopt;
  }
  if (attrs.mode != "ROUND" && attrs.mode != "HALF_EVEN") {  // (4)
    *why = fmt::format("rounding {} has no QuantizeLinear form", attrs.mode);
    return std::nullopt;
  }
  if (opset < 13) {  // (5)
    *why = fmt::format("needs opset 13 (per-axis Q/DQ, integer Clip), the model has {}", opset);
    return std::nullopt;
  }
  q.type = attrs.is_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8;
  q.lo = attrs.lo();
  q.hi = attrs.hi();
  return q;
}

/// The rewrite. Operands, one line per input:
///   QuantizeLinear   0 x <- Quant.input 0; 1 s <- Quant.input 1 (1-D copy when per axis);
///                    2 new 0:T (scalar, or [N] zeros when per axis)
///   Clip (narrow)    0 q; 1 new min:T; 2 new max:T
///   DequantizeLinear 0 q or clipped q; 1 s; 2 the same 0:T; output <- Quant.output 0
void lowerQuant(ir::Graph& graph, ir::Node& n, const QuantSpec& q) {
  ir::Value* s = q.per_axis ? graph.addInitializer(n.input(1)->name() + "_1d",
                                                   ir::makeFloatTensor({static_cast<int64_t>(q.scale.size())}, q.scale))
                            : n.input(1);
  // the zero point has the scale's shape (the standard ops require it)
  const int64_t count = static_cast<int64_t>(q.scale.size());
  ir::Value* zp = graph.addInitializer("zero_point", q.per_axis ? ir::makeIntTensor(q.type, {count}, std::vector<int64_t>(count, 0))
                                                                : ir::makeIntTensor(q.type, {}, {0}));
  replaceWithQdq(graph, n, s, zp, q.type, q.per_axis, q.axis, q.lo, q.hi);
}

struct LowerQonnxQuant {
  struct Group {
    ir::Node* node;
    std::optional<QuantSpec> lowered;  // Q [-> Clip] -> DQ; else the emulation
    QonnxQuantAttrs attrs;
    std::string why;                   // why emulated
  };
  int64_t opset;

  bool root(const ir::Node& n) const { return isQonnxQuant(n) || (n.opIs("BipolarQuant") && isQonnxDomain(n.domain())); }
  std::string declined(const ir::Node& n) const { return n.domain() + "::" + n.opType() + " not converted"; }

  Match<Group> select(ir::Node& n) {
    std::string why;
    if (n.opIs("BipolarQuant")) {
      if (!canEmulateBipolarQuant(n, opset, &why)) return Match<Group>::unconvertible(why);
      return Group{&n, std::nullopt, {}, "bipolar values"};
    }
    Group g{&n, matchQuant(n, opset, &why), readQonnxQuant(n), why};
    if (g.lowered) return g;
    if (std::string inner; !canEmulateQonnxQuant(g.attrs, opset, &inner)) return Match<Group>::unconvertible(inner);
    return g;
  }

  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Node& n = *g.node;
    if (g.lowered) {
      lowerQuant(graph, n, *g.lowered);
      ctx.count("QONNX Quant lowered");
      return;
    }
    ctx.report(Report::Done, n, fmt::format("{}::{} emulated exactly with float ops (no Q/DQ form: {})", n.domain(), n.opType(), g.why));
    if (n.opIs("BipolarQuant")) {
      emulateBipolarQuant(graph, n);
      ctx.count("QONNX BipolarQuant emulated");
    } else {
      emulateQonnxQuant(graph, n, g.attrs);
      ctx.count("QONNX Quant emulated");
    }
  }
};

}  // namespace

void lowerQonnxQuant(ir::Model& model, PassContext& ctx) {
  LowerQonnxQuant rule{ir::defaultOpset(model)};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
