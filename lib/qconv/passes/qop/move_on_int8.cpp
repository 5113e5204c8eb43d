// move-on-int8 (--format qop): an op that only moves, selects or compares values runs on the
// 8-bit tensor itself, with no float island around it.
//
// Before:
//   x_q -> DQ(s, z) -> MaxPool | Reshape | Transpose | Concat | Pad | Resize(nearest) | ... -> Q(s', z') -> y_q
// After, when (s, z) == (s', z'):
//   x_q -> MaxPool | ... -> y_q
// and when they differ, the one requantization stays, after the op (x_q -> op -> DQ(s, z) ->
// Q(s', z') -> y_q), or for Concat before it, on each input whose parameters are not the output's.
// Exact: each output element is an input element (or, for MaxPool, the largest of some: a positive
// scale keeps the order), so op(dequantize(x)) == dequantize(op(x)). A constant Pad's float pad
// value becomes the integer that dequantizes to it exactly (0 -> the zero point).
//
// An op moves when:
//   1. it is one of kOps, at an opset whose version takes 8-bit tensors;
//   2. its data inputs (every input of Concat, input 0 otherwise) come from DequantizeLinear with
//      constant per-tensor int8/uint8 parameters;
//   3. each output has one reader, a QuantizeLinear with constant per-tensor parameters of the
//      inputs' type, and is not a graph output; MaxPool's Indices output is absent;
//   4. Resize is in nearest mode; Pad's pad value, when given, is a constant float scalar that an
//      integer of the type dequantizes to exactly;
//   5. the target (--target) runs data movement on the type the tensor is stored as (IREE and
//      Aidge: int8 only; common/target_fit.h).
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/driver.h"
#include "qconv/passes/common/qdq_select.h"
#include "qconv/passes/common/target_fit.h"

namespace qconv {

namespace {

struct MovingOp {
  const char* op_type;
  int64_t since;  // the first opset whose version takes int8/uint8
};

const MovingOp kOps[] = {
    {"MaxPool", 12},   {"Reshape", 5},     {"Flatten", 9},   {"Transpose", 1},    {"Squeeze", 1},
    {"Unsqueeze", 1},  {"Slice", 1},       {"Gather", 1},    {"Split", 2},        {"Concat", 4},
    {"Pad", 11},       {"Resize", 11},     {"DepthToSpace", 1}, {"SpaceToDepth", 1}, {"Identity", 1},
    {"Tile", 6},       {"Expand", 8},
};

struct MoveGroup {
  ir::Node* op = nullptr;
  std::vector<ir::Node*> dqs;       // per data input
  std::vector<ConstQuant> ins;      // their parameters
  std::vector<ir::Node*> qs;        // per output
  std::vector<ConstQuant> outs;     // their parameters
  std::optional<int64_t> pad_value;
};

std::optional<ConstQuant> perTensor(const ir::Node& qdq, std::string* why) {
  auto p = readConstQuant(qdq, why);
  if (p && p->per_axis) {
    *why = "it is quantized per axis";
    return std::nullopt;
  }
  if (p && !ir::isInt8Like(p->elem_type)) {  // the ops' 8-bit versions; 16-bit types vary by op
    *why = fmt::format("it is {}, not int8 or uint8", ir::typeName(p->elem_type));
    return std::nullopt;
  }
  return p;
}

Match<MoveGroup> selectMove(ir::Node& n) {
  using M = Match<MoveGroup>;
  MoveGroup g;
  g.op = &n;
  std::string why;
  const size_t data = n.is("Concat") ? n.inputs().size() : 1;  // (2)
  for (size_t i = 0; i < data; ++i) {
    ir::Node* dq = dequantizeFeeding(n.input(i));
    if (!dq) return M::none();  // not on a quantized tensor: nothing to say
    auto p = perTensor(*dq, &why);
    if (!p) return M::refuse(fmt::format("input {}: {}", i, why));
    g.ins.push_back(std::move(*p));
    g.dqs.push_back(dq);
  }
  if (n.is("MaxPool") && n.output(1)) return M::refuse("its Indices output is used");  // (3)
  for (ir::Value* out : n.outputs()) {
    if (!out || !hasSingleReader(out) || !isQuantize(*out->uses()[0].node))
      return M::refuse("an output is not read only by a QuantizeLinear");
    ir::Node* q = out->uses()[0].node;
    auto p = perTensor(*q, &why);
    if (!p) return M::refuse("its QuantizeLinear: " + why);
    g.outs.push_back(std::move(*p));
    g.qs.push_back(q);
  }
  for (const ConstQuant& in : g.ins)
    if (in.elem_type != g.outs[0].elem_type) return M::refuse("its input and output types differ");
  if (n.is("Resize")) {  // (4)
    const auto* mode = n.attribute("mode");
    if (mode && mode->s() != "nearest") return M::refuse(fmt::format("Resize mode '{}' computes new values", mode->s()));
  }
  if (n.is("Pad")) {
    if (const auto* mode = n.attribute("mode"); mode && mode->s() != "constant") return g;  // edge/reflect: moves only
    if (!n.input(2)) return g;
    auto v = constantScalar(n.input(2));
    if (!v) return M::refuse("its pad value is not a constant float scalar");
    const ConstQuant& in = g.ins[0];
    const int64_t q = quantizeOne(*v, in.scale[0], in.zero_point[0], in.elem_type);
    if (static_cast<float>(q - in.zero_point[0]) * in.scale[0] != *v)
      return M::refuse(fmt::format("its pad value {} is no integer's dequantized value", *v));
    g.pad_value = q;
  }
  return g;
}

/// DQ(v, params of `dq`) -> Q(params of `q`), before `before`: one requantization.
ir::Value* requantize(ir::Graph& graph, ir::Value* v, const ir::Node& dq, const ir::Node& q, ir::Node* before) {
  ir::Node* d = graph.createNode("DequantizeLinear", "", {v, dq.input(1), dq.input(2)}, 1, before);
  d->output(0)->setElemType(onnx::TensorProto::FLOAT);
  ir::Node* r = graph.createNode("QuantizeLinear", "", {d->output(0), q.input(1), q.input(2)}, 1, before);
  r->output(0)->setElemType(q.output(0)->elemType());
  return r->output(0);
}

struct MoveOnInt8 {
  using Group = MoveGroup;
  int64_t opset;
  const PassContext& ctx;

  bool root(const ir::Node& n) const {
    for (const MovingOp& m : kOps)
      if (n.is(m.op_type)) return opset >= m.since;  // (1)
    return false;
  }
  std::string declined(const ir::Node&) const { return "stays on float"; }
  Match<Group> select(ir::Node& n) {
    auto m = selectMove(n);
    if (!m.selected()) return m;
    if (auto no = movementFits(ctx, m.group().ins[0].elem_type); !no.empty()) return Match<Group>::refuse(no);  // (5)
    return m;
  }

  /// Concat: input i <- its DQ's input 0, requantized to the output's parameters where they
  /// differ; other ops: input 0 <- its DQ's input 0; Pad 2 <- the integer pad value. Output k <-
  /// Q k's output (same parameters as the input), or -> DQ(input's) -> Q k (a requantization).
  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Node& n = *g.op;
    const bool concat = n.is("Concat");
    std::vector<ir::Value*> old;
    for (size_t i = 0; i < g.dqs.size(); ++i) {
      ir::Value* v = g.dqs[i]->input(0);
      if (concat && !sameQuant(g.ins[i], g.outs[0])) v = requantize(graph, v, *g.dqs[i], *g.qs[0], &n);
      old.push_back(n.input(i));
      graph.setInput(&n, i, v);
    }
    if (g.pad_value) {
      old.push_back(n.input(2));
      graph.setInput(&n, 2, graph.addInitializer("pad_value", ir::makeIntTensor(g.ins[0].elem_type, {}, {*g.pad_value})));
    }
    for (size_t k = 0; k < g.qs.size(); ++k) {
      ir::Value* out = n.output(k);
      out->setElemType(g.outs[k].elem_type);
      ir::Node* q = g.qs[k];
      if (!concat && !sameQuant(g.ins[0], g.outs[k])) {  // the one requantization stays
        ir::Node* dq = graph.createNode("DequantizeLinear", "", {out, g.dqs[0]->input(1), g.dqs[0]->input(2)}, 1, q);
        dq->output(0)->setElemType(onnx::TensorProto::FLOAT);
        graph.setInput(q, 0, dq->output(0));
        continue;
      }
      graph.setInput(q, 0, nullptr);
      graph.takeOutput(&n, k, q->output(0));
      std::vector<ir::Value*> in = q->inputs();
      graph.destroyNode(q);
      for (ir::Value* v : in) graph.pruneIfDead(v);
    }
    for (ir::Value* v : old) graph.pruneIfDead(v);
    ctx.count(fmt::format("{} on int8", n.opType()));
  }
};

}  // namespace

void moveOnInt8(ir::Model& model, PassContext& ctx) {
  MoveOnInt8 rule{ir::defaultOpset(model), ctx};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
