// dequantize-moves (--target whose runtime moves no data on 8-bit tensors: qnn): an op that
// only moves, selects or takes the max of 8-bit integers runs between DQ and Q instead, in float.
//
// Before:
//   x_q (int8/uint8) -> MaxPool | Reshape | Transpose | Concat | Pad | Resize(nearest) | ... -> y_q
// After:
//   x_q -> DQ(s, z) -> op -> Q(s, z) -> y_q          (Concat: one DQ(s, z) per input)
// with (s, z) the parameters y_q is read with (the DequantizeLinear that reads it), else those x_q
// was made or is read with. Exact whichever they are: a DequantizeLinear and a QuantizeLinear at the
// same per-tensor parameters give each integer back (|q - z| * s / s rounds to q - z), the op moves
// or selects values (MaxPool: a positive scale keeps their order), and a constant Pad's integer pad
// value p becomes (p - z) * s, which quantizes back to p. y_q keeps its name, type and readers.
// This is the form a QOp input's data movement takes for those runtimes: onnxruntime's QDQ form.
//
// An op moves off its 8-bit tensor when:
//   1. the target (--target) moves no data on that type (its profile's move_on);
//   2. it is movesData() (quant_slots.h), or a Pad; not a Resize in another mode than nearest,
//      which computes new values from the integers;
//   3. its data inputs (Concat: all; else input 0) and data outputs are int8/uint8 of one type;
//      MaxPool's Indices output is absent;
//   4. one set of constant per-tensor parameters of that type is found on y_q's readers or on x_q's
//      producer or readers (else the op stays, and check-target refuses it with the target's reason);
//   5. a Pad's pad value, when given, is a constant integer scalar.
#include <fmt/format.h>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/quant_slots.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

/// A Q or DQ with constant per-tensor parameters of `type`, or null.
bool fits(const ir::Node& qdq, int32_t type) {
  std::string why;
  const auto p = readConstQuant(qdq, &why);
  return p && !p->per_axis && p->elem_type == type;
}

/// The Q/DQ whose parameters `v` (8-bit, of `type`) is read or made with, or null.
const ir::Node* parametersOf(const ir::Value* v, int32_t type) {
  for (const ir::Use& u : v->uses())
    if (isDequantize(*u.node) && u.index == 0 && fits(*u.node, type)) return u.node;
  if (const ir::Node* p = v->producer(); p && isQuantize(*p) && fits(*p, type)) return p;
  return nullptr;
}


struct Move {
  ir::Node* op;
  const ir::Node* params;  // a Q or DQ: its inputs 1 and 2 are the scale and zero point used
  int32_t type;            // the 8-bit type
  std::optional<float> pad_value;
};

struct DequantizeMoves {
  using Group = Move;
  const TargetProfile& t;

  bool root(const ir::Node& n) const { return computesOnData(n); }
  std::string declined(const ir::Node&) const { return "not moved between DQ and Q"; }

  Match<Group> select(ir::Node& n) {
    using M = Match<Group>;
    const int32_t type = n.input(0) ? ir::elementType(*n.input(0)) : 0;
    if (!ir::isInt8Like(type) || movesDataOn(t, type)) return M::none();  // (1)
    if (!movesData(n) && !n.is("Pad")) return M::refuse(fmt::format("{} computes new values from the integers", n.opType()));
    if (n.is("MaxPool") && n.output(1)) return M::refuse("its Indices output is used");  // (3)
    for (int i : dataInputs(n))
      if (!n.input(static_cast<size_t>(i)) || ir::elementType(*n.input(static_cast<size_t>(i))) != type)
        return M::refuse("its data inputs are not all of one 8-bit type");
    for (int k : dataOutputs(n))
      if (!n.output(static_cast<size_t>(k))) return M::refuse("an output is unnamed");
    const ir::Node* params = nullptr;  // (4)
    for (int k : dataOutputs(n))
      if (!params) params = parametersOf(n.output(static_cast<size_t>(k)), type);
    for (int i : dataInputs(n))
      if (!params) params = parametersOf(n.input(static_cast<size_t>(i)), type);
    if (!params) return M::refuse(fmt::format("no QuantizeLinear or DequantizeLinear with constant per-tensor {} parameters "
                                              "makes or reads its tensors",
                                              ir::typeName(type)));
    Move g{&n, params, type, std::nullopt};
    if (n.is("Pad") && n.input(2)) {  // (5)
      std::string why;
      const auto v = n.input(2)->isConstant() ? ir::readInts(*n.input(2), &why) : std::nullopt;
      if (!v || v->size() != 1) return M::refuse("its pad value is not a constant integer scalar");
      std::string pwhy;
      const auto p = readConstQuant(*params, &pwhy);
      g.pad_value = static_cast<float>((*v)[0] - p->zero_point[0]) * p->scale[0];
    }
    return g;
  }

  /// Data input i <- DQ(x_q i, s, z); Pad input 2 <- (p - z) * s; data output k -> Q(s, z) -> y_q k.
  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Node& n = *g.op;
    ir::Value* s = g.params->input(1);
    ir::Value* z = g.params->input(2);
    for (int i : dataInputs(n)) {
      ir::Node* dq = graph.createNode("DequantizeLinear", "", {n.input(static_cast<size_t>(i)), s, z}, 1, &n);
      dq->output(0)->setElemType(onnx::TensorProto::FLOAT);
      graph.setInput(&n, static_cast<size_t>(i), dq->output(0));
    }
    if (g.pad_value) {
      ir::Value* old = n.input(2);
      graph.setInput(&n, 2, graph.addInitializer("pad_value", ir::makeFloatTensor({}, {*g.pad_value})));
      graph.pruneIfDead(old);
    }
    ir::Node* after = graph.nextNode(&n);
    for (int k : dataOutputs(n)) {
      ir::Value* y = n.output(static_cast<size_t>(k));
      ir::Node* q = graph.createNode("QuantizeLinear", "", {nullptr, s, z}, 1, after);
      graph.takeOutput(q, 0, y);  // the op now makes a fresh value, which q quantizes
      y->setElemType(g.type);
      ir::Value* f = n.output(static_cast<size_t>(k));
      f->setElemType(onnx::TensorProto::FLOAT);
      graph.setNameHint(f, y->name() + "_float");
      graph.setInput(q, 0, f);
    }
    ctx.count(fmt::format("{} moved between DQ and Q", n.opType()));
  }
};

}  // namespace

void dequantizeMoves(ir::Model& model, PassContext& ctx) {
  if (!ctx.options().target) return;
  DequantizeMoves rule{ctx.target()};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
