// lift-float-form: the seeds' own Aidge form (seed 001's "Aidge quantization", held in float
// tensors) becomes QDQ with absolute scales chained from a quantizer (the input's, one inside
// the graph, or a Q(1) the lift adds at a float graph input), so that fuse-qlinear-conv fuses
// every conv of it.
//
// Before (after fold-producers has folded the weights' Mul(SF) -> Round, and
// lower-primitive-qdq has written each Mul(M) -> Round -> Clip quantizer as Q(1/M) -> Cast):
//   x:float (integers) -> Conv(w:float integers, b:float integers) [-> Relu] -> Q(1/M, zp) -> q
//   q [-> Clip:T] -> Cast(float) -> Conv(...) -> ... -> Cast(float) -> y:float (integers)
// After (s_x = 1 at the graph input; s_w = 1, or a power of two where the chain would leave
// [2^-64, 2^64]: Aidge does not carry the weights' scale; s_acc = s_x * s_w; s_y = s_acc / M):
//   x -> Q(1) -> DQ(1) -> Conv(DQ(w:int8, 1), DQ(b:int32, s_x)) [-> Relu] -> Q(s_x / M, zp) -> q
//   q [-> Clip] -> DQ(s_y, zp) -> Conv(...) -> ... -> q_last -> DQ(1, 0) -> y
// The integers every quantized tensor holds are the form's own, up to the requantization: the
// form computes round(acc * M), QuantizeLinear computes round(acc * s_acc / s_y) with the scales
// rounded to float, which differ on near ties only (one step). The graph output is DQ(q, 1, 0),
// which is Cast(q) exactly: the model's outputs stay in its integer units.
// --format qop does this by default (its promise is one step) and counts it in the summary;
// --format qdq promises bit-for-bit and needs --approximate, each lifted conv listed.
//
// A Conv is lifted when all of these hold; otherwise it stays (still correct) and, when it has
// integer weights, the refusal says which failed:
//   1. its weight is a constant float tensor of integers in [-128, 127];
//   2. its bias, if any, is a constant float tensor of integers that fit int32;
//   3. its input is a float graph input (read as int8 integers: a Q(1) is inserted, and a
//      warning says so), or Cast(to float) of a tensor a lifted conv's QuantizeLinear produced,
//      or any other QuantizeLinear with a constant scalar scale and zero point 0 (an input
//      quantizer, or one inside the graph: the chain starts at its scale), directly or through
//      a Clip on the integers;
//   4. its output's one reader is a QuantizeLinear with a constant scalar float scale and an
//      int8/uint8 zero point, directly or through a Relu that has no other reader (dropped when
//      a Clip on the integers after the Q starts at the zero point or above: Q(Relu(v)) is
//      max(Q(v), zp), which that Clip computes already);
//   5. the chained scales s_acc and s_y are normal floats;
//   6. the model's opset is 10 or more (QuantizeLinear's first).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/driver.h"
#include "qconv/passes/common/qdq_select.h"

namespace qconv {

namespace {

/// The integer values of a constant float tensor, all inside [lo, hi]; else nullopt.
std::optional<std::vector<int64_t>> integers(const ir::Value* v, double lo, double hi) {
  if (!v || !v->isConstant() || v->initializer()->data_type() != onnx::TensorProto::FLOAT) return std::nullopt;
  std::string why;
  auto f = ir::readFloats(*v, &why);
  if (!f) return std::nullopt;
  std::vector<int64_t> out;
  for (float x : *f) {
    if (!std::isfinite(x) || std::nearbyint(x) != x || x < lo || x > hi) return std::nullopt;
    out.push_back(static_cast<int64_t>(x));
  }
  return out;
}

/// Whether `v` is a constant float tensor of integer values, of any size (none is converted:
/// 1e24 is an integer no int64_t holds).
bool integerValued(const ir::Value* v) {
  if (!v || !v->isConstant() || v->initializer()->data_type() != onnx::TensorProto::FLOAT) return false;
  std::string why;
  auto f = ir::readFloats(*v, &why);
  return f && std::all_of(f->begin(), f->end(), [](float x) { return std::isfinite(x) && std::nearbyint(x) == x; });
}

bool normal(float s) { return std::isnormal(s) && s > 0; }

/// The quantized tensor a Cast(float) reads, seen through a Clip on the integers: the
/// QuantizeLinear's output, as the chain records it.
const ir::Value* throughClip(const ir::Value* v) {
  return v->producer() && v->producer()->is("Clip") ? v->producer()->input(0) : v;
}

/// The QuantizeLinear `q`'s one reader is a Clip on its integers whose lower bound is at least
/// the zero point: then a Relu before `q` changes nothing (Q is monotone and Q(0) = zp).
bool clipsAtZeroPoint(const ir::Node& q) {
  if (!hasSingleReader(q.output(0))) return false;
  const ir::Node* clip = q.output(0)->uses()[0].node;
  if (!clip->is("Clip") || clip->inputs().size() < 2 || !clip->input(1) || !clip->input(1)->isConstant()) return false;
  std::string why;
  auto lo = ir::readInts(*clip->input(1), &why);
  auto zp = ir::readInts(*q.input(2), &why);
  return lo && zp && lo->size() == 1 && zp->size() == 1 && (*lo)[0] >= (*zp)[0];
}

struct Chained {
  float scale;
  ir::Value* zero_point;  // the QuantizeLinear's
};

/// A chain's start: `q` made by a QuantizeLinear of any float tensor (an input quantizer, or
/// one inside the graph) with a constant scalar normal scale and a constant int8/uint8 zero
/// point 0: its integers are that tensor at that scale, and Cast(q) = DQ(q, s, 0) / s.
std::optional<Chained> chainStart(const ir::Value* q) {
  ir::Node* quantizer = q->producer();
  if (!quantizer || !isQuantize(*quantizer) || quantizer->inputs().size() < 3) return std::nullopt;
  auto s = constantScalar(quantizer->input(1));
  ir::Value* zp = quantizer->input(2);
  if (!s || !normal(*s) || !zp->isConstant() || !ir::isInt8Like(zp->initializer()->data_type())) return std::nullopt;
  std::string why;
  auto z = ir::readInts(*zp, &why);
  if (!z || z->size() != 1 || (*z)[0] != 0) return std::nullopt;
  return Chained{*s, zp};
}

struct Lift {
  ir::Node* conv;
  std::vector<int64_t> w, b;
  ir::Value* x_int = nullptr;  // null: a graph input, quantized at scale 1
  Chained x{1.0f, nullptr};
  ir::Node* q = nullptr;
  float q_scale = 0;  // the form's 1/M
  ir::Node* relu = nullptr;
  bool relu_redundant = false;  // the Clip after the Q keeps [zp, ...]: Q(Relu(v)) = max(Q(v), zp)
  float w_scale = 1, acc_scale = 0, y_scale = 0;
};

struct LiftFloatForm {
  using Group = Lift;
  int64_t opset;
  bool list;     // --format qdq: each lift is an approximation, listed
  bool allowed;  // --format qop, or --approximate
  std::map<const ir::Value*, Chained> chained;        // integer tensors a lifted conv produced
  std::map<const ir::Value*, ir::Value*> input_dq;    // graph input -> its DQ(Q(x, 1), 1)

  bool root(const ir::Node& n) const {
    if (!n.is("Conv")) return false;  // first: the op type is on the node, the weight is not
    const ir::Value* w = n.input(1);
    return w && w->isConstant() && w->initializer()->data_type() == onnx::TensorProto::FLOAT;
  }
  std::string declined(const ir::Node&) const { return "not lifted from the float Aidge form"; }

  Match<Group> select(ir::Node& n) {
    auto w = integers(n.input(1), -128, 127);  // (1), read once
    if (!w && integerValued(n.input(1)))
      return Match<Group>::refuse("its weight holds integers outside int8's [-128, 127]");
    if (!w) return Match<Group>::none();  // a float conv: not this form
    if (opset < 10)  // (6)
      return Match<Group>::refuse(fmt::format("QuantizeLinear needs opset 10, the model has {}", opset));
    if (!allowed)
      return Match<Group>::refuse("--format qdq promises the same bits, and this form's quantizers x * M become "
                                  "x / s only with --approximate");
    Lift g;
    g.conv = &n;
    g.w = std::move(*w);
    if (ir::Value* b = n.inputs().size() > 2 ? n.input(2) : nullptr) {  // (2)
      auto bi = integers(b, -2147483648.0, 2147483647.0);
      if (!bi) return Match<Group>::refuse("its bias is not a constant float tensor of integers that fit int32");
      g.b = *bi;
    }
    ir::Value* x = n.input(0);  // (3)
    if (!x->isGraphInput() || x->elemType() != onnx::TensorProto::FLOAT) {
      ir::Node* cast = x->producer();
      if (!cast || !cast->is("Cast") || cast->attrInt("to", 0) != onnx::TensorProto::FLOAT)
        return Match<Group>::refuse("its input is neither a float graph input nor Cast(to float) of quantized integers");
      ir::Value* src = cast->input(0);
      auto it = chained.find(throughClip(src));
      std::optional<Chained> start;
      if (it == chained.end()) start = chainStart(throughClip(src));
      if (it == chained.end() && !start)
        return Match<Group>::refuse("its input's integers come neither from a lifted conv's QuantizeLinear nor from a "
                                    "quantizer with a constant scalar scale and zero point 0");
      g.x_int = src;
      g.x = start ? *start : it->second;
    }
    ir::Node* next = hasSingleReader(n.output(0)) ? n.output(0)->uses()[0].node : nullptr;  // (4)
    if (next && next->is("Relu")) {
      g.relu = next;
      next = hasSingleReader(next->output(0)) ? next->output(0)->uses()[0].node : nullptr;
    }
    if (!next || !isQuantize(*next) || next->inputs().size() < 3)
      return Match<Group>::refuse("its output does not go to one QuantizeLinear with a zero point (through a Relu at most)");
    auto s = constantScalar(next->input(1));
    if (!s || !normal(*s) || !next->input(2)->isConstant() || !ir::isInt8Like(next->input(2)->initializer()->data_type()))
      return Match<Group>::refuse("its QuantizeLinear has no constant scalar float scale or int8/uint8 zero point");
    g.q = next;
    g.q_scale = *s;
    g.relu_redundant = g.relu && clipsAtZeroPoint(*next);
    // s_w = 1, unless s_y would leave [2^-64, 2^64] (a deep chain: every layer's 1/M multiplies
    // in): then the power of two that brings s_y into [0.5, 1), exact in DQ and bias alike
    // (in double, where the product of two floats cannot overflow)
    g.w_scale = 1.0f;
    if (const double y = static_cast<double>(g.x.scale) * g.q_scale; y > 0x1p64 || y < 0x1p-64) {
      int e = 0;
      std::frexp(y, &e);
      g.w_scale = std::ldexp(1.0f, -e);
    }
    g.acc_scale = g.x.scale * g.w_scale;
    g.y_scale = g.acc_scale * g.q_scale;
    if (!normal(g.acc_scale) || !normal(g.y_scale))  // (5)
      return Match<Group>::refuse(fmt::format("the chained scale {:g} * {:g} is not a normal float", g.acc_scale, g.q_scale));
    return g;
  }

  ir::Value* dq(ir::Graph& graph, ir::Value* q, float scale, ir::Value* zp, ir::Node* before, const std::string& hint) {
    ir::Node* d = graph.createNode("DequantizeLinear", "",
                                   {q, graph.addInitializer(hint + "_scale", ir::makeFloatTensor({}, {scale})), zp}, 1, before);
    d->output(0)->setElemType(onnx::TensorProto::FLOAT);
    graph.setNameHint(d->output(0), hint + "_dequantized");
    return d->output(0);
  }

  /// Input 0 <- DQ(q, s_x, zp) (or the graph input's DQ(Q(x, 1), 1)); 1 <- DQ(w:int8, 1);
  /// 2 <- DQ(b:int32, s_x); the Q's scale <- s_x / M; its integers recorded at that scale.
  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Node& conv = *g.conv;
    const std::string base = conv.name().empty() ? "conv" : conv.name();
    ir::Value* x = conv.input(0);
    if (!g.x_int) {
      if (!input_dq.count(x)) {
        ir::Value* zp = graph.addInitializer(x->name() + "_zero_point", ir::makeIntTensor(onnx::TensorProto::INT8, {}, {0}));
        ir::Node* q = quantizeToRange(graph, &conv, x, graph.addInitializer(x->name() + "_scale", ir::makeFloatTensor({}, {1.0f})),
                                      zp, onnx::TensorProto::INT8, std::nullopt, -128, 127);
        graph.setNameHint(q->output(0), x->name() + "_quantized");
        input_dq[x] = dq(graph, q->output(0), 1.0f, zp, &conv, x->name());
        ctx.report(Report::Warning, x->name(),
                   "taken to hold int8 integers, the Aidge form's input units: QuantizeLinear(x, 1) at the graph input "
                   "rounds and saturates any other value");
      }
      graph.setInput(&conv, 0, input_dq[x]);
    } else {
      graph.setInput(&conv, 0, dq(graph, g.x_int, g.x.scale, g.x.zero_point, &conv, base + "_x"));
    }
    ir::Value* w = conv.input(1);
    ir::Value* w8 = graph.addInitializer(w->name() + "_int8", ir::makeIntTensor(onnx::TensorProto::INT8, ir::dimsOf(*w->initializer()), g.w));
    graph.setInput(&conv, 1, dq(graph, w8, g.w_scale, graph.addInitializer("w_zero_point", ir::makeIntTensor(onnx::TensorProto::INT8, {}, {0})), &conv, base + "_w"));
    if (!g.b.empty()) {
      ir::Value* b = conv.input(2);
      ir::Value* b32 = graph.addInitializer(b->name() + "_int32", ir::makeIntTensor(onnx::TensorProto::INT32, ir::dimsOf(*b->initializer()), g.b));
      graph.setInput(&conv, 2, dq(graph, b32, g.acc_scale, graph.addInitializer("b_zero_point", ir::makeIntTensor(onnx::TensorProto::INT32, {}, {0})), &conv, base + "_b"));
      graph.pruneIfDead(b);
    }
    graph.pruneIfDead(w);
    if (g.relu_redundant) {  // the Clip on the integers does what it did: the conv feeds the Q directly
      graph.setInput(g.q, 0, conv.output(0));
      graph.destroyNode(g.relu);
    }
    ir::Value* old_scale = g.q->input(1);
    graph.setInput(g.q, 1, graph.addInitializer(base + "_y_scale", ir::makeFloatTensor({}, {g.y_scale})));
    graph.pruneIfDead(old_scale);
    chained[g.q->output(0)] = Chained{g.y_scale, g.q->input(2)};
    ctx.count("conv lifted from the float Aidge form (scales chained, x * M as x / s)");
    const std::string what = fmt::format("lifted with chained scales: x_scale {:g}, w_scale {:g}, y_scale {:g}; the form's "
                                         "x * {:g} is now x / {:g}, which can round apart on a near tie (one step)",
                                         g.x.scale, g.w_scale, g.y_scale, 1.0f / g.q_scale, g.y_scale / g.acc_scale);
    ctx.report(list ? Report::Approximation : Report::Done, conv, what);
  }
};

/// Each Cast(to float) of a lifted tensor left (the graph output's, a non-conv reader's) becomes
/// DequantizeLinear(q, 1, 0): float(q), the same numbers.
void castsToDequantize(ir::Graph& graph, const std::map<const ir::Value*, Chained>& chained) {
  if (chained.empty()) return;  // nothing lifted: no walk over the graph
  std::vector<ir::Node*> casts;
  for (ir::Node* n : graph.nodeSnapshot()) {
    if (!n->is("Cast") || n->attrInt("to", 0) != onnx::TensorProto::FLOAT) continue;
    if (chained.count(throughClip(n->input(0)))) casts.push_back(n);
  }
  for (ir::Node* c : casts) {
    ir::Value* q = c->input(0);
    ir::Node* d = graph.createNode("DequantizeLinear", "",
                                   {q, graph.addInitializer("one", ir::makeFloatTensor({}, {1.0f})),
                                    graph.addInitializer("zero", ir::makeIntTensor(q->elemType(), {}, {0}))}, 1, c);
    replaceNode(graph, *c, d);
  }
}

}  // namespace

void liftFloatForm(ir::Model& model, PassContext& ctx) {
  const bool qdq = !ctx.options().one_step;
  LiftFloatForm rule{ir::defaultOpset(model), qdq, !qdq || ctx.options().approximate, {}, {}};
  applyRule(model.graph, ctx, rule);
  castsToDequantize(model.graph, rule.chained);
}

}  // namespace qconv
