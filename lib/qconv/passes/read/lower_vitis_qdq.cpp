// lower-vitis-qdq: Vitis AI vai::QuantizeLinear / vai::DequantizeLinear become standard ops.
//
// Before (domain "vai": pytorch_nndct's export with native_onnx=False; the axis input is newer):
//   x -> vai::QuantizeLinear(valmin:int32, valmax:int32, s, z:int8, method:int8[, axis:int8]) -> q
//   q -> vai::DequantizeLinear(s', z'[, axis:int8]) -> y
//   q = round_method(clip(x / s + z, valmin, valmax))   (a float tensor holding integers)
//   y = (q - z') * s'
// After, for a quantize meeting 1-5:
//   x -> QuantizeLinear(s, 0:T[, axis]) -> [Clip(valmin:T, valmax:T)] -> Cast(float) -> q
//   and a dequantize reading such a q reads the integers directly:
//   ints -> DequantizeLinear(s', z':T[, axis]) -> y
// Otherwise the exact emulation of the formula above, one float32 op per step, in its order:
//   x -> Div(s) -> Add(z) -> Clip(valmin, valmax) -> <method> -> q ;  q -> Sub(z') -> Mul(s') -> y
//   (vitis_rounding.h lists the methods)
//
// A quantize becomes QuantizeLinear when:
//   1. valmin, valmax, method (and axis) are constant integers, s is constant positive finite
//      and z constant;
//   2. method rounds half to even (any code but 2..7);
//   3. z is 0 (z is added before rounding: x / s + z is not QuantizeLinear's math on ties);
//   4. [valmin, valmax] fits int8 or uint8 (int16/uint16 at opset >= 21): T;
//   5. the default opset is >= 13 (per-axis Q/DQ, integer Clip).
// Why it is exact: for integer bounds round(clip(v)) == clip(round(v)); x / s is QuantizeLinear's
// division; Cast(float) gives the integer values vai stores. A node neither form can express
// (non-constant parameters, per-axis with an unknown rank) stays, and qconv refuses the model.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/read/float_emitter.h"
#include "qconv/passes/read/vitis_rounding.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

std::optional<std::vector<int64_t>> constInts(const ir::Value* v) {
  std::string why;
  return v && v->isConstant() ? ir::readInts(*v, &why) : std::nullopt;
}

/// A parameter (scale or zero point) as floats, whatever its stored type.
std::optional<std::vector<float>> constNumbers(const ir::Value* v) {
  std::string why;
  if (!v || !v->isConstant()) return std::nullopt;
  if (auto f = ir::readFloats(*v, &why)) return f;
  auto i = ir::readInts(*v, &why);
  if (!i) return std::nullopt;
  return std::vector<float>(i->begin(), i->end());
}

/// The parameters of one vai node, read once. `s_slot`: where the scale is (3 for Q, 1 for DQ).
struct VaiParams {
  std::vector<float> scale, zero_point;  // zero_point: one per scale
  bool per_axis = false;
  int64_t axis = 0;  // normalized when the rank is known (as written otherwise)
  int64_t rank = -1;
  int64_t valmin = 0, valmax = 0;
  int64_t method = -1;
};

std::optional<VaiParams> readVai(const ir::Node& n, bool quantize, std::string* why) {
  const size_t s_slot = quantize ? 3 : 1, axis_slot = quantize ? 6 : 3;
  VaiParams p;
  auto scale = constNumbers(n.input(s_slot));
  auto zp = constNumbers(n.input(s_slot + 1));
  if (!scale || scale->empty() ||
      std::any_of(scale->begin(), scale->end(), [](float f) { return !(std::isfinite(f) && f > 0); })) {
    *why = "scale is not a constant positive finite tensor";
    return std::nullopt;
  }
  if (!zp || (zp->size() != 1 && zp->size() != scale->size())) {
    *why = "zero point is not a constant of the scale's size";
    return std::nullopt;
  }
  p.scale = *scale;
  p.zero_point = zp->size() == scale->size() ? *zp : std::vector<float>(scale->size(), (*zp)[0]);
  p.per_axis = scale->size() > 1;
  p.rank = knownRank(n.input(0));
  if (p.per_axis) {
    auto axis = constInts(n.input(axis_slot));
    if (!axis || axis->size() != 1 || (p.rank >= 0 && ((*axis)[0] < -p.rank || (*axis)[0] >= p.rank))) {
      *why = "per-axis scale without a constant axis inside the input's rank";
      return std::nullopt;
    }
    p.axis = (*axis)[0] < 0 && p.rank >= 0 ? (*axis)[0] + p.rank : (*axis)[0];
  }
  if (!quantize) return p;
  auto lo = constInts(n.input(1)), hi = constInts(n.input(2)), method = constInts(n.input(5));
  if (!lo || !hi || !method || lo->size() != 1 || hi->size() != 1 || method->size() != 1 || (*lo)[0] > (*hi)[0] ||
      std::abs((*lo)[0]) > (int64_t{1} << 24) || std::abs((*hi)[0]) > (int64_t{1} << 24)) {
    *why = "valmin, valmax and method are not constant integers with valmin <= valmax (|bound| <= 2^24)";
    return std::nullopt;
  }
  p.valmin = (*lo)[0];
  p.valmax = (*hi)[0];
  p.method = (*method)[0];
  return p;
}

/// The storage type T for [lo, hi], or 0 (condition 4).
int32_t storageFor(int64_t lo, int64_t hi, int64_t opset) {
  std::vector<int32_t> types{onnx::TensorProto::INT8, onnx::TensorProto::UINT8};
  if (opset >= 21) types.insert(types.end(), {onnx::TensorProto::INT16, onnx::TensorProto::UINT16});
  for (int32_t t : types)
    if (auto [a, b] = ir::intRange(t); lo >= a && hi <= b) return t;
  return 0;
}

std::optional<int64_t> axisOf(const VaiParams& p) { return p.per_axis ? std::optional<int64_t>(p.axis) : std::nullopt; }

int64_t count(const VaiParams& p) { return static_cast<int64_t>(p.scale.size()); }

/// Scale and zero point as standard Q/DQ operands: [] or [C] (float scale, T zero point).
std::pair<ir::Value*, ir::Value*> standardParams(ir::Graph& g, const VaiParams& p, int32_t t) {
  std::vector<int64_t> dims = p.per_axis ? std::vector<int64_t>{count(p)} : std::vector<int64_t>{};
  std::vector<int64_t> zp(p.zero_point.begin(), p.zero_point.end());
  if (!p.per_axis) zp.resize(1);
  return {g.addInitializer("vai_scale", ir::makeFloatTensor(dims, p.per_axis ? p.scale : std::vector<float>{p.scale[0]})),
          g.addInitializer("vai_zero_point", ir::makeIntTensor(t, dims, zp))};
}

/// Scale and zero point as float constants that broadcast against the input.
std::pair<ir::Value*, ir::Value*> floatParams(FloatEmitter& e, const VaiParams& p) {
  std::vector<int64_t> dims = p.per_axis ? broadcastDims(count(p), p.axis, p.rank) : std::vector<int64_t>{};
  auto first = [&](const std::vector<float>& v) { return p.per_axis ? v : std::vector<float>{v[0]}; };
  return {e.constant("vai_scale", dims, first(p.scale)), e.constant("vai_zero_point", dims, first(p.zero_point))};
}

/// Operands, one line per input:
///   QuantizeLinear  0 x <- vai.input 0; 1 new s ([C] per axis); 2 new 0:T
///   Clip (narrower) 0 the integers; 1 new valmin:T; 2 new valmax:T
///   Cast(float)     0 the integers; output <- vai.output 0
void quantizeToStandard(ir::Graph& g, ir::Node& n, const VaiParams& p, int32_t t) {
  auto [s, zp] = standardParams(g, p, t);
  ir::Node* ints = quantizeToRange(g, &n, n.input(0), s, zp, t, axisOf(p), p.valmin, p.valmax);
  replaceNode(g, n, castToFloat(g, ints->output(0), &n));
}

void quantizeEmulated(ir::Graph& g, ir::Node& n, const VaiParams& p) {
  FloatEmitter e{g, &n};
  auto [s, zp] = floatParams(e, p);
  ir::Value* v = e.op("Add", {e.op("Div", {n.input(0), s}), zp});
  v = e.op("Clip", {v, e.constant("valmin", static_cast<float>(p.valmin)), e.constant("valmax", static_cast<float>(p.valmax))});
  ir::Value* rounded = emitVitisRounding(e, v, p.method);
  replaceNode(g, n, rounded->producer());
}

/// The integers behind q when q is the Cast(float) quantizeToStandard made, else null.
ir::Value* integersBehind(const ir::Value* q) {
  const ir::Node* cast = q ? q->producer() : nullptr;
  if (!cast || !cast->is("Cast") || cast->attrInt("to", 0) != onnx::TensorProto::FLOAT) return nullptr;
  ir::Value* ints = cast->input(0);
  return ints && ir::isIntegerType(ints->elemType()) && ints->producer() &&
                 (ints->producer()->is("QuantizeLinear") || ints->producer()->is("Clip"))
             ? ints
             : nullptr;
}

bool isVai(const ir::Node& n, const char* op) { return n.domain() == "vai" && n.opIs(op); }

/// vai::QuantizeLinear: standard Q/DQ when 1-5 hold, else the exact emulation.
struct VaiQuantize {
  struct Group {
    ir::Node* node;
    VaiParams params;
    int32_t type;        // the standard form's storage type; 0: emulated
    std::string reason;  // why emulated
  };
  int64_t opset;

  bool root(const ir::Node& n) const { return isVai(n, "QuantizeLinear"); }
  std::string declined(const ir::Node&) const { return "vai::QuantizeLinear not converted"; }

  Match<Group> select(ir::Node& n) {
    if (opset < 13) return Match<Group>::unconvertible(fmt::format("needs opset 13, the model has {}", opset));
    std::string why;
    auto p = readVai(n, true, &why);
    if (!p) return Match<Group>::unconvertible(why);
    const int32_t t = storageFor(p->valmin, p->valmax, opset);
    const bool zero = std::all_of(p->zero_point.begin(), p->zero_point.end(), [](float z) { return z == 0.0f; });
    if (vitisRoundsHalfEven(p->method) && zero && t != 0) return Group{&n, *p, t, ""};
    std::string reason = !vitisRoundsHalfEven(p->method) ? fmt::format("rounding method {} ({})", p->method, vitisMethodName(p->method))
                         : !zero ? std::string("a zero point added before rounding")
                                 : fmt::format("range [{}, {}] fits no standard integer type", p->valmin, p->valmax);
    if (p->per_axis && (p->rank < 0 || p->axis < 0))
      return Match<Group>::unconvertible(fmt::format("no Q/DQ form ({}), and a per-axis emulation needs the input's rank", reason));
    return Group{&n, *p, 0, std::move(reason)};
  }

  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    if (g.type) {
      quantizeToStandard(graph, *g.node, g.params, g.type);
      ctx.count("vai::QuantizeLinear lowered");
      return;
    }
    ctx.report(Report::Done, *g.node, fmt::format("vai::QuantizeLinear emulated exactly with float ops (no Q/DQ form: {})", g.reason));
    quantizeEmulated(graph, *g.node, g.params);
    ctx.count("vai::QuantizeLinear emulated");
  }
};

/// vai::DequantizeLinear: a standard DQ of the integers behind a lowered quantize, else the
/// exact emulation (q - z) * s.
struct VaiDequantize {
  struct Group {
    ir::Node* node;
    VaiParams params;
    ir::Value* ints;  // the integers a lowered quantize made; null: emulated
  };

  bool root(const ir::Node& n) const { return isVai(n, "DequantizeLinear"); }
  std::string declined(const ir::Node&) const { return "vai::DequantizeLinear not converted"; }

  Match<Group> select(ir::Node& n) {
    std::string why;
    auto p = readVai(n, false, &why);
    if (!p) return Match<Group>::unconvertible(why);
    if (ir::Value* ints = integersBehind(n.input(0))) {
      const auto range = ir::intRange(ints->elemType());
      const int64_t a = range.first, b = range.second;  // (a lambda cannot capture a structured binding in C++17)
      if (std::all_of(p->zero_point.begin(), p->zero_point.end(), [&](float z) { return z == std::nearbyint(z) && z >= a && z <= b; }))
        return Group{&n, *p, ints};
    }
    if (p->per_axis && (p->rank < 0 || p->axis < 0))
      return Match<Group>::unconvertible("its input is not a lowered quantize, and a per-axis emulation needs the input's rank");
    return Group{&n, *p, nullptr};
  }

  /// Operands: DequantizeLinear 0 <- the integers; 1 new s; 2 new z:T; axis when per axis.
  /// Emulated: Mul(Sub(q, z), s), z and s float constants that broadcast.
  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Node& n = *g.node;
    if (g.ints) {
      auto [s, zp] = standardParams(graph, g.params, g.ints->elemType());
      ir::Node* dq = graph.createNode("DequantizeLinear", "", {g.ints, s, zp}, 1, &n);
      if (auto axis = axisOf(g.params)) setIntAttribute(*dq, "axis", *axis);
      replaceNode(graph, n, dq);
      ctx.count("vai::DequantizeLinear lowered");
      return;
    }
    ctx.report(Report::Done, n, "vai::DequantizeLinear emulated exactly with float ops (its input is not a lowered quantize)");
    FloatEmitter e{graph, &n};
    auto [s, zp] = floatParams(e, g.params);
    replaceNode(graph, n, graph.createNode("Mul", "", {e.op("Sub", {n.input(0), zp}), s}, 1, &n));
    ctx.count("vai::DequantizeLinear emulated");
  }
};

}  // namespace

void lowerVitisQdq(ir::Model& model, PassContext& ctx) {
  VaiQuantize quantizers{ir::defaultOpset(model)};  // first: dequantizers look behind them
  applyRule(model.graph, ctx, quantizers);
  VaiDequantize dequantizers;
  applyRule(model.graph, ctx, dequantizers);
}

}  // namespace qconv
