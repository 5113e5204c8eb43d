// lower-primitive-qdq: quantize and dequantize written as primitive ops become Q / DQ nodes.
//
// Before (quantize, seed 001's order; Mul by a power of two may stand for Div):
//   x -> Div(s) -> Round -> [Add(zp)] -> Clip(lo, hi) -> Cast(to=T) -> q
// After:
//   x -> QuantizeLinear(s, zp:T) -> q                      when [lo, hi] is T's whole range
//   x -> QuantizeLinear(s, zp:T) -> Clip(lo:T, hi:T) -> q  when it is narrower (narrow range)
// Aidge's float form has no Cast: its integers stay floats (T: uint8 for a clip inside
// [0, 255] that passes 127, else int8, Aidge's own type; // [0, 255], else int8):
//   x -> Mul(f) -> Round -> [Add(zp)] -> Clip(lo, hi) -> q:float
//   becomes x -> QuantizeLinear(1/f, zp:T) [-> Clip] -> Cast(to=float) -> q:float
// Before (dequantize):
//   q -> Cast(to=float) -> [Sub(zp)] -> Mul(s) -> y
// After:
//   q -> DequantizeLinear(s, zp:T) -> y
//
// A chain is lowered when all of these hold, so the result computes the same bits:
//   1. s (Div), 2^k (Mul), zp, lo and hi are constant float scalars; s > 0 and finite;
//      zp, lo, hi are integers with lo <= hi inside T's range, and zp inside it;
//   2. T is int8 or uint8 (what Q/DQ take at every opset);
//   3. every intermediate value has exactly one reader and is not a graph output;
//   4. a narrower [lo, hi] needs opset >= 12 (Clip on integers);
//   5. the model's opset is 10 or more (the first standard Q/DQ): below, nothing is looked at.
// Why it is exact: Round is ties-to-even like QuantizeLinear; r + zp and the clip act on
// integers; Cast of an in-range integer is exact; x * 2^k and x / 2^-k are the same correctly
// rounded number; (float(q) - zp) * s is DequantizeLinear's float(q - zp) * s.
// With --approximate, Mul by any positive factor f becomes QuantizeLinear(x, 1/f), listed as an
// approximation: x * f and x / fl(1/f) can round apart on a near-tie (Aidge's quantizers).
// --format qop does it without the flag, since its promise is one step: counted in the summary.
// Anything else stays as the primitive ops it is (standard ONNX, still correct), with a note.
#include <fmt/format.h>

#include <cmath>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/common/qdq_select.h"
#include "qconv/passes/driver.h"

namespace qconv {

namespace {

bool isInteger(float f) { return std::isfinite(f) && std::nearbyint(f) == f; }

/// The single node reading `v`, when `v` has one explicit reader and is not a graph output.
ir::Node* soleReader(const ir::Value* v) { return hasSingleReader(v) ? v->uses()[0].node : nullptr; }

/// For a binary op whose other operand is a constant scalar: the non-constant operand's slot.
std::optional<std::pair<size_t, float>> withScalar(const ir::Node& n) {
  for (size_t k : {1, 0})
    if (auto f = constantScalar(n.input(k)); f && n.input(1 - k) && !n.input(1 - k)->isConstant())
      return std::make_pair(1 - k, *f);
  return std::nullopt;
}

struct QuantizeChain {
  ir::Node* first = nullptr;  // Div or Mul
  ir::Node* cast = nullptr;  // null in the float form
  ir::Value* x = nullptr;
  ir::Value* scale = nullptr;  // the Div's scale value, or null: make 2^-k
  float scale_value = 0;
  int64_t zp = 0, lo = 0, hi = 0;
  int32_t type = 0;
  bool approximated = false;  // x * f written as x / (1/f), f not a power of two
};

/// `last` is the chain's Cast(to=T), or its Clip when no Cast follows (Aidge's float form,
/// integers held as floats: T is int8 or uint8 by the clip range).
std::optional<QuantizeChain> matchQuantize(ir::Node& last, int64_t opset, bool approximate, std::string* why) {
  QuantizeChain c;
  ir::Node* clip = &last;
  if (last.is("Cast")) {
    c.cast = &last;
    c.type = static_cast<int32_t>(last.attrInt("to", 0));
    if (!ir::isInt8Like(c.type)) return std::nullopt;  // (2): not a quantizer's Cast
    clip = last.input(0) ? last.input(0)->producer() : nullptr;
    if (!clip || !clip->is("Clip") || soleReader(clip->output(0)) != &last) return std::nullopt;
  } else if (ir::Node* r = soleReader(last.output(0)); r && r->is("Cast") && ir::isInt8Like(static_cast<int32_t>(r->attrInt("to", 0)))) {
    return std::nullopt;  // matched at its Cast
  }
  if (!c.cast) {  // a plain Clip is no quantizer: it needs Round [-> Add(zp)] before it
    auto made = [](const ir::Value* v, const char* op) { return v && v->producer() && v->producer()->is(op); };
    const ir::Node* p = clip->input(0) ? clip->input(0)->producer() : nullptr;
    if (!p || !(p->is("Round") || (p->is("Add") && (made(p->input(0), "Round") || made(p->input(1), "Round")))))
      return std::nullopt;
  }
  auto bounds = clipBounds(*clip);
  const float lo = bounds ? bounds->first : NAN, hi = bounds ? bounds->second : NAN;
  if (!c.cast) c.type = lo >= 0 && hi <= 255 && hi > 127 ? onnx::TensorProto::UINT8 : onnx::TensorProto::INT8;
  auto [tmin, tmax] = ir::intRange(c.type);
  if (!isInteger(lo) || !isInteger(hi) || lo > hi || lo < tmin || hi > tmax) {
    *why = c.cast ? "Clip bounds are not constant integers inside the Cast type's range"
                  : "Clip bounds are not constant integers inside int8's or uint8's range";
    return std::nullopt;
  }
  c.lo = static_cast<int64_t>(lo);
  c.hi = static_cast<int64_t>(hi);
  if ((c.lo != tmin || c.hi != tmax) && opset < 12) {
    *why = fmt::format("a narrow range needs Clip on integers (opset 12), the model has {}", opset);
    return std::nullopt;
  }
  ir::Node* n = clip->input(0) ? clip->input(0)->producer() : nullptr;
  if (n && n->is("Add") && soleReader(n->output(0)) == clip) {
    auto zp = withScalar(*n);
    if (!zp || !isInteger(zp->second) || zp->second < tmin || zp->second > tmax) {
      *why = "the zero point Add is not a constant integer inside the Cast type's range";
      return std::nullopt;
    }
    c.zp = static_cast<int64_t>(zp->second);
    n = n->input(zp->first)->producer();
  }
  if (!n || !n->is("Round") || !soleReader(n->output(0))) {
    *why = "no Round (ties to even) before the zero point and clip";
    return std::nullopt;
  }
  ir::Node* first = n->input(0) ? n->input(0)->producer() : nullptr;
  if (!first || soleReader(first->output(0)) != n || !(first->is("Div") || first->is("Mul"))) {
    *why = "Round does not read a Div or Mul by a constant scale";
    return std::nullopt;
  }
  // (x slot, scale): Div divides input 0 by input 1; Mul is commutative
  std::optional<std::pair<size_t, float>> s;
  if (first->is("Mul")) s = withScalar(*first);
  else if (auto d = constantScalar(first->input(1))) s = std::make_pair(size_t{0}, *d);
  if (!s || !(std::isfinite(s->second) && s->second > 0)) {
    *why = "the scale is not a constant positive finite scalar";
    return std::nullopt;
  }
  if (first->is("Mul")) {
    int exp = 0;
    c.approximated = std::frexp(s->second, &exp) != 0.5f;
    if (c.approximated && !approximate) {
      *why = fmt::format("x * {} is not x / s for any float s (only a power of two is; --approximate writes x / {:g})",
                         s->second, 1.0f / s->second);
      return std::nullopt;
    }
    c.scale_value = 1.0f / s->second;  // exact for a power of two
  } else {
    c.scale = first->input(1);
    c.scale_value = s->second;
  }
  c.first = first;
  c.x = first->input(s->first);
  return c;
}

/// Rewrite: QuantizeLinear(x, s, zp:T) [-> Clip(lo:T, hi:T)] takes over the Cast's output;
/// without a Cast, [-> Cast(to=float)] takes over the Clip's (the integers stay floats).
void lowerQuantize(ir::Graph& graph, const QuantizeChain& c, ir::Node& anchor) {
  ir::Value* s = c.scale ? c.scale : graph.addInitializer("scale", ir::makeFloatTensor({}, {c.scale_value}));
  ir::Value* zp = graph.addInitializer("zero_point", ir::makeIntTensor(c.type, {}, {c.zp}));
  ir::Node* last = quantizeToRange(graph, &anchor, c.x, s, zp, c.type, std::nullopt, c.lo, c.hi);
  if (!c.cast) last = castToFloat(graph, last->output(0), &anchor);
  anchor.output(0)->setElemType(c.cast ? c.type : onnx::TensorProto::FLOAT);
  replaceNode(graph, anchor, last);
}

struct DequantizeChain {
  ir::Node* mul = nullptr;
  ir::Value* q = nullptr;
  ir::Value* scale = nullptr;
  int64_t zp = 0;
  int32_t type = 0;
};

std::optional<DequantizeChain> matchDequantize(ir::Node& mul, std::string* why) {
  DequantizeChain c;
  c.mul = &mul;
  auto s = withScalar(mul);
  if (!s) return std::nullopt;
  ir::Node* n = mul.input(s->first)->producer();
  float zp = 0;
  ir::Node* sub = nullptr;
  if (n && n->is("Sub") && soleReader(n->output(0)) == &mul) {
    auto z = constantScalar(n->input(1));
    if (!z || n->input(0)->isConstant()) return std::nullopt;
    zp = *z;
    sub = n;
    n = n->input(0)->producer();
  }
  if (!n || !n->is("Cast") || n->attrInt("to", 0) != onnx::TensorProto::FLOAT || soleReader(n->output(0)) != (sub ? sub : &mul))
    return std::nullopt;  // not a dequantizer
  c.q = n->input(0);
  c.type = c.q ? c.q->elemType() : 0;
  if (!ir::isInt8Like(c.type)) {
    *why = fmt::format("the Cast reads {}, not int8 or uint8", ir::typeName(c.type));
    return std::nullopt;
  }
  auto [tmin, tmax] = ir::intRange(c.type);
  if (!isInteger(zp) || zp < tmin || zp > tmax) {
    *why = "the zero point is not an integer inside the quantized type's range";
    return std::nullopt;
  }
  if (!(std::isfinite(s->second) && s->second > 0)) {
    *why = "the scale is not positive and finite";
    return std::nullopt;
  }
  c.zp = static_cast<int64_t>(zp);
  c.scale = mul.input(1 - s->first);
  return c;
}

void lowerDequantize(ir::Graph& graph, const DequantizeChain& c) {
  ir::Value* zp = graph.addInitializer("zero_point", ir::makeIntTensor(c.type, {}, {c.zp}));
  replaceNode(graph, *c.mul, graph.createNode("DequantizeLinear", "", {c.q, c.scale, zp}, 1, c.mul));
}

struct LowerPrimitiveQdq {
  struct Group {
    ir::Node* anchor;                       // the chain's last node
    std::optional<QuantizeChain> quantize;  // else dequantize
    std::optional<DequantizeChain> dequantize;
  };
  int64_t opset;
  bool approximate;
  bool one_step;

  bool root(const ir::Node& n) const { return n.is("Cast") || n.is("Clip") || n.is("Mul"); }
  std::string declined(const ir::Node& n) const {
    return n.is("Mul") ? "dequantizer left as primitive ops" : "quantizer left as primitive ops";
  }

  Match<Group> select(ir::Node& n) {
    std::string why;
    Group g{&n, std::nullopt, std::nullopt};
    if (opset < 10) return Match<Group>::none();  // no standard QuantizeLinear / DequantizeLinear before opset 10
    if (n.is("Mul")) g.dequantize = matchDequantize(n, &why);
    else g.quantize = matchQuantize(n, opset, approximate || one_step, &why);
    if (g.quantize || g.dequantize) return g;
    return why.empty() ? Match<Group>::none() : Match<Group>::refuse(why);
  }

  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    if (g.dequantize) {
      lowerDequantize(graph, *g.dequantize);
      ctx.count("primitive dequantize lowered");
      return;
    }
    const QuantizeChain& c = *g.quantize;
    if (c.approximated && !approximate) {  // --format qop: inside its one-step promise
      ctx.count("quantizer x * M written as QuantizeLinear(x, 1/M) (--format qop: one step on near ties)");
      ctx.report(Report::Done, *g.anchor,
                 fmt::format("quantizer x * {} written as QuantizeLinear(x, {:g}): a near-tie can round by one step",
                             1.0f / c.scale_value, c.scale_value));
    } else if (c.approximated) {
      ctx.report(Report::Approximation, *g.anchor,
                 fmt::format("quantizer x * {} written as QuantizeLinear(x, {:g}): a near-tie can round by one step",
                             1.0f / c.scale_value, c.scale_value));
    }
    lowerQuantize(graph, c, *g.anchor);
    ctx.count("primitive quantize lowered");
  }
};

}  // namespace

void lowerPrimitiveQdq(ir::Model& model, PassContext& ctx) {
  LowerPrimitiveQdq rule{ir::defaultOpset(model), ctx.options().approximate, ctx.options().one_step};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
