// lower-integer-ops: Aidge's integer exports (PTQ with fold_graph, or set_to_qop) become QDQ.
//
// Before (not runnable standard ONNX: Conv on integer tensors):
//   x -[QuantizeLinear(s_in)]-> xq:int8 -> Conv(xq, w:int8, b:int32) -> acc -> QuantizeLinear(acc, S) -> yq:int8
//   yq -> Relu / MaxPool / GlobalAveragePool / Reshape ... (on int8) -> ...
//   acc is the integer accumulator; S is a requantization divisor, not an absolute scale.
// After, by default (integer units: bit-exact):
//   xq -> DQ(1) -> Conv(DQ(w, 1), DQ(b, 1)) -> acc -> QuantizeLinear(acc, S) -> yq
//   yq -> DQ(1) -> Relu / MaxPool / ... -> QuantizeLinear(1) -> ...
//   Every DQ is exact, the float Conv of integers is exact while no partial sum can pass 2^24
//   (checked: sum|w| * max|x| + |b| per output channel), and QuantizeLinear(acc, S) is the
//   export's own node, so every integer tensor holds the integers the export computes.
// After, with --approximate (absolute scales chained from the input quantizer, as onnxruntime's
// QDQ models carry them: s_acc = s_x * s_w, s_y = s_acc * S):
//   xq -> DQ(s_x) -> Conv(DQ(w, s_w = 1), DQ(b, s_x * s_w)) -> QuantizeLinear(s_x * s_w * S) -> yq
//   yq -> DQ(s_y) -> Relu / MaxPool / ... -> QuantizeLinear(s_y) -> ...
//   The float products s_x * q round, so a value on a near-tie of acc / S can move by one step:
//   each rebuilt conv is listed as an approximation. The weights' own scale is not in the export
//   (it was folded into S), so s_w = 1: the real values up to one positive factor per layer.
// A float input read by an integer Conv directly (rescale_inputs=False) has s_x = 1.
//
// The pass runs only on a model with an integer Conv/Gemm/MatMul: input 1 a constant int8 or
// uint8 initializer (after fold-producers has folded Aidge's QuantizeLinear weight producers).
// A conv is rebuilt when:
//   1. its input 0 is float, or an integer tensor: in integer units any int8/uint8 (read at
//      scale 1), with --approximate one whose scale is chained from a QuantizeLinear;
//   2. its bias, if any, is a constant int32 initializer;
//   3. its readers are QuantizeLinear with a constant scalar divisor, or a Cast to float (dropped:
//      the rebuilt accumulator is float already) read, with --approximate, only by such;
//   4. integer units only: on an integer input, no partial sum can pass 2^24 (exact in float).
// An op reading a tracked integer tensor is wrapped in DQ -> op -> Q at that tensor's scale when
// it has one data input and is one of kWrapped (exact: these ops commute with a positive scale;
// a constant-0 Pad stays on the integers, at its input's scale, or folds into the Conv it feeds;
// GlobalAveragePool/AveragePool on int8 round the mean half away from
// zero in Aidge's CPU backend, measured, so they are rebuilt on the integers with that rounding).
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <string_view>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/read/float_emitter.h"
#include "qconv/passes/read/integer_conv.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

constexpr std::string_view kWrapped[] = {"Relu", "MaxPool", "GlobalMaxPool", "AveragePool", "GlobalAveragePool", "Reshape",
                                "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Identity"};

bool isIntegerConv(const ir::Node& n) {
  if (!(n.is("Conv") || n.is("Gemm") || n.is("MatMul"))) return false;
  const ir::Value* w = n.input(1);
  return w && w->isConstant() && ir::isInt8Like(w->initializer()->data_type());
}

ir::Value* scalarScale(ir::Graph& g, float s) { return g.addInitializer("chained_scale", ir::makeFloatTensor({}, {s})); }

ir::Value* dequantize(ir::Graph& g, ir::Node& before, ir::Value* q, float s, int32_t type) {
  ir::Node* dq = g.createNode("DequantizeLinear", "", {q, scalarScale(g, s), g.addInitializer("zero_point", ir::makeIntTensor(type, {}, {0}))},
                              1, &before);
  dq->output(0)->setElemType(onnx::TensorProto::FLOAT);
  return dq->output(0);
}

bool isCastToFloat(const ir::Node& n) { return n.is("Cast") && n.attrInt("to", 0) == onnx::TensorProto::FLOAT; }

struct Chain {
  ir::Graph& g;
  bool absolute;  // --approximate: chain absolute scales; else integer units (scale 1)
  std::unordered_map<const ir::Value*, float> int_scale;  // integers whose real value is q * scale
  std::unordered_map<const ir::Value*, float> acc_scale;  // rebuilt conv outputs: real = acc * scale

  int32_t typeOf(const ir::Value* v) const {
    if (v->elemType()) return v->elemType();
    const ir::Node* p = v->producer();
    return p && p->is("Cast") ? static_cast<int32_t>(p->attrInt("to", 0)) : onnx::TensorProto::INT8;
  }

  /// The scale an integer tensor is read at: tracked, or (integer units) 1 for any int8/uint8.
  std::optional<float> scaleOf(const ir::Value* v) const {
    if (!v) return std::nullopt;
    if (auto it = int_scale.find(v); it != int_scale.end()) return it->second;
    if (!absolute && !v->isConstant() && ir::isInt8Like(typeOf(v)) && (v->elemType() || v->producer())) return 1.0f;
    return std::nullopt;
  }

  void quantize(ir::Node& q) {
    auto it = acc_scale.find(q.input(0));
    auto divisor = constantScalar(q.input(1));
    if (!absolute) {  // the export's own QuantizeLinear stays; its integers are read at scale 1
      if (divisor) int_scale[q.output(0)] = 1.0f;
      return;
    }
    if (it == acc_scale.end()) {
      if (divisor) int_scale[q.output(0)] = *divisor;
      return;
    }
    const float s = it->second * *divisor;  // checked by rebuild (3)
    g.setInput(&q, 1, scalarScale(g, s));
    int_scale[q.output(0)] = s;
  }

  static bool readsDivisor(const ir::Node& q) { return isQuantize(q) && constantScalar(q.input(1)).has_value(); }

  /// Conditions 1-4 for rebuilding `n` reading `x` (its input 0, or the input of a Pad that
  /// folds into it). Empty when they hold, else the first that fails.
  std::string whyNotRebuilt(const ir::Node& n, const ir::Value* x) const {
    if (!x) return "it has no data input";  // an empty input name (found by the fuzzer)
    const std::optional<float> sx = scaleOf(x);
    if (!sx && x->elemType() != onnx::TensorProto::FLOAT && x->elemType() != 0)  // (1)
      return "its input is an integer tensor whose scale is not known";
    const ir::Value* b = n.input(2);
    if (b && !(b->isConstant() && b->initializer()->data_type() == onnx::TensorProto::INT32))  // (2)
      return "its bias is not a constant int32";
    for (const auto& u : n.output(0)->uses()) {  // (3)
      const ir::Node& r = *u.node;
      const bool ok = readsDivisor(r) || (isCastToFloat(r) && !r.output(0)->isGraphOutput() && !r.output(0)->hasImplicitUses() &&
                                          !r.output(0)->uses().empty() &&
                                          (!absolute || std::all_of(r.output(0)->uses().begin(), r.output(0)->uses().end(),
                                                                    [](const auto& v) { return readsDivisor(*v.node); })));
      if (!ok)
        return fmt::format("{} reads its accumulator and is not a QuantizeLinear with a constant scalar divisor{}", r.label(),
                           absolute ? " (or a Cast to float read only by such)" : " or a Cast to float");
    }
    if (sx && !absolute) {  // (4)
      const double xmax = typeOf(x) == onnx::TensorProto::UINT8 ? 255.0 : 128.0;
      auto bound = accumulatorBound(n, xmax);
      if (!bound || *bound >= 16777216.0)
        return bound ? fmt::format("a partial sum can reach {:.0f}, past 2^24, where a float Conv of the integers rounds "
                                   "(--approximate rebuilds it with absolute scales)", *bound)
                     : "its weights cannot be read";
    }
    return "";
  }

  /// Operands: 0 x <- DQ(x, s_x) (x as is when float); 1 w <- DQ(w, 1, 0:w's type);
  /// 2 b <- DQ(b, s_x, 0:int32). Output: real values at acc scale s_x (1 in integer units).
  void rebuild(ir::Node& n) {
    ir::Value* x = n.input(0);
    const std::optional<float> sx = scaleOf(x);
    const float s_x = sx.value_or(1.0f);
    if (sx) g.setInput(&n, 0, dequantize(g, n, x, s_x, typeOf(x)));
    ir::Value* w = n.input(1);
    g.setInput(&n, 1, dequantize(g, n, w, 1.0f, w->initializer()->data_type()));
    if (ir::Value* b = n.input(2)) g.setInput(&n, 2, dequantize(g, n, b, s_x, onnx::TensorProto::INT32));
    ir::Value* acc = n.output(0);
    acc->setElemType(onnx::TensorProto::FLOAT);
    for (ir::Node* cast : readersOf(acc))  // the accumulator is float already: its Cast goes
      if (isCastToFloat(*cast)) {
        g.replaceAllUsesWith(cast->output(0), acc);
        g.destroyNode(cast);
      }
    acc_scale[acc] = s_x;
  }

  static std::vector<ir::Node*> readersOf(const ir::Value* v) {
    std::vector<ir::Node*> out;
    for (const auto& u : v->uses()) out.push_back(u.node);
    return out;
  }

  /// DQ(x, s) -> op (a copy of n) -> Q(s): n's output 0 keeps its name and readers.
  /// An averaging pool works on the integers (scale 1) and rounds the mean half away from zero,
  /// as Aidge's CPU backend does: DQ(x, 1) -> op -> Sign(v) * Floor(Abs(v) + 0.5) -> Q(1).
  void wrap(ir::Node& n, float s) {
    ir::Value* x = n.input(0);
    const int32_t t = typeOf(x);
    const bool averaging = n.opIs("GlobalAveragePool") || n.opIs("AveragePool");
    const float view = averaging ? 1.0f : s;
    std::vector<ir::Value*> in = n.inputs();
    in[0] = dequantize(g, n, x, view, t);
    ir::Node* op = g.createNode(n.opType(), "", in, n.outputs().size(), &n);
    inheritAttributes(*op, n);
    op->mutableProto().set_name(n.name().empty() ? "" : n.name() + "_float");
    op->output(0)->setElemType(onnx::TensorProto::FLOAT);
    ir::Value* v = op->output(0);
    if (averaging) {
      FloatEmitter e{g, &n};
      v = e.op("Mul", {e.op("Sign", {v}), e.op("Floor", {e.op("Add", {e.op("Abs", {v}), e.constant("half", 0.5f)})})});
    }
    ir::Node* q = g.createNode("QuantizeLinear", "", {v, scalarScale(g, view), g.addInitializer("zero_point", ir::makeIntTensor(t, {}, {0}))},
                               1, &n);
    ir::Value* y = n.output(0);
    g.takeOutput(q, 0, y);
    q->mutableProto().set_name(n.name());
    for (size_t k = 1; k < n.outputs().size(); ++k)
      if (n.output(k)) g.takeOutput(op, k, n.output(k));
    g.destroyNode(&n);
    y->setElemType(t);
    int_scale[y] = s;
  }
};

/// The rule: in node order, so that a tensor's scale is known before its readers are visited.
struct LowerIntegerOps {
  enum class Kind { Quantize, Conv, ZeroPad, Wrap };
  struct Group {
    Kind kind;
    ir::Node* node;
    float scale = 1.0f;             // Wrap, ZeroPad: the input's scale
    std::optional<PadFold> pad;     // Conv: a Pad folding into it
  };
  Chain chain;

  bool root(const ir::Node& n) const {
    return isQuantize(n) || isIntegerConv(n) || (!isDequantize(n) && !n.is("Cast") && chain.scaleOf(n.input(0)));
  }
  std::string declined(const ir::Node& n) const {
    if (!isIntegerConv(n)) return n.opType() + " on an integer tensor is not rebuilt";
    return fmt::format("integer {} not rebuilt (standard {} takes no {} input)", n.opType(), n.opType(),
                       ir::typeName(n.input(1)->initializer()->data_type()));
  }

  Match<Group> select(ir::Node& n) {
    if (isQuantize(n)) return Group{Kind::Quantize, &n, 1.0f, std::nullopt};
    if (isIntegerConv(n)) {
      Group g{Kind::Conv, &n, 1.0f, padFold(n)};
      if (std::string why = chain.whyNotRebuilt(n, g.pad ? g.pad->input : n.input(0)); !why.empty())
        return Match<Group>::unconvertible(why);
      return g;
    }
    const float s = *chain.scaleOf(n.input(0));
    if (n.is("Pad") && padsWithZero(n)) return Group{Kind::ZeroPad, &n, s, std::nullopt};
    const bool wrappable = n.domain().empty() && padsWithZero(n) &&
                           std::any_of(std::begin(kWrapped), std::end(kWrapped), [&](std::string_view op) { return n.opIs(op); }) &&
                           std::none_of(n.inputs().begin() + 1, n.inputs().end(), [&](const ir::Value* v) { return chain.scaleOf(v).has_value(); });
    if (!wrappable) return Match<Group>::refuse("qconv wraps only Relu, MaxPool, pools, reshapes and similar one-input ops");
    return Group{Kind::Wrap, &n, s, std::nullopt};
  }

  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Node& n = *g.node;
    switch (g.kind) {
      case Kind::Quantize:
        chain.quantize(n);
        return;
      case Kind::ZeroPad:  // zero padding on the integers is zero padding of the reals
        chain.int_scale[n.output(0)] = g.scale;
        return;
      case Kind::Conv:
        if (g.pad) applyPadFold(graph, n, *g.pad);
        chain.rebuild(n);
        ctx.count("integer conv rebuilt as QDQ");
        if (chain.absolute)
          ctx.report(Report::Approximation, n, "integer " + n.opType() + " rebuilt with absolute scales chained from the input "
                                               "quantizer (float products of the scales can move a near-tie of acc / divisor by one step)");
        return;
      case Kind::Wrap:
        if (n.opIs("GlobalAveragePool") || n.opIs("AveragePool"))
          ctx.report(Report::Done, n, n.opType() + " on int8 rebuilt on the integers: the mean is rounded half away from zero, as Aidge's CPU backend does");
        chain.wrap(n, g.scale);
        ctx.count("integer op wrapped in DQ/Q");
        return;
    }
  }
};

}  // namespace

void lowerIntegerOps(ir::Model& model, PassContext& ctx) {
  const std::vector<ir::Node*> nodes = model.graph.nodeSnapshot();  // the graph's kept snapshot: no walk of the list
  if (std::none_of(nodes.begin(), nodes.end(), [](const auto& n) { return isIntegerConv(*n); })) return;
  LowerIntegerOps rule{Chain{model.graph, ctx.options().approximate, {}, {}}};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
