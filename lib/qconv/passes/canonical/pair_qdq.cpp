// pair-qdq: drop DQ -> Q identities, and give every quantized output its element type.
//
// Before:
//   a -> Q1(s, z) -> q1 -> DQ1(s, z) -> f -> Q2(s, z) -> q2 -> DQ2(s, z) -> ...
// After:
//   a -> Q1(s, z) -> q1 -> DQ2(s, z) -> ...
//
// A DequantizeLinear shared by several consumers stays shared: the fusion passes read through
// it per consumer and remove it once nobody reads it. A Q whose input comes from a DQ is removed
// (its readers read the DQ's input) when all of:
//   1. both have constant parameters (scale bits, zero points, type, axis) that are identical;
//   2. the Q's output is not a graph output and is not read by a subgraph.
// DQ(Q'(x)) with identical parameters is exactly q: (q - z) * s / s rounds back to q - z
// for every integer |q - z| < 2^16.
// A Q with constant parameters whose output has no known element type gets its zero point's
// (or uint8): later passes and the dump read it.
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

struct PairQdq {
  struct Group {
    ir::Node* q;
    int32_t elem_type;        // to set on the Q's output; 0: it has one
    ir::Node* dq = nullptr;   // the identical DQ before it: collapse
  };

  bool root(const ir::Node& n) const { return isQuantize(n); }
  std::string declined(const ir::Node&) const { return "not paired"; }

  Match<Group> select(ir::Node& n) {
    std::string why;
    auto q = readConstQuant(n, &why);
    if (!q) return Match<Group>::none();
    const ir::Value* out = n.output(0);
    Group g{&n, out->elemType() == 0 ? q->elem_type : 0};
    ir::Node* dq = dequantizeFeeding(n.input(0));
    auto dqq = dq ? readConstQuant(*dq, &why) : std::nullopt;
    if (dqq && sameQuant(*dqq, *q) && !out->isGraphOutput() && !out->hasImplicitUses()) g.dq = dq;  // (1), (2)
    if (!g.elem_type && !g.dq) return Match<Group>::none();
    return g;
  }

  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Value* out = g.q->output(0);
    if (g.elem_type) out->setElemType(g.elem_type);
    if (!g.dq) return;
    graph.replaceAllUsesWith(out, g.dq->input(0));
    graph.destroyNode(g.q);
    graph.pruneIfDead(g.dq->output(0));
    ctx.count("collapsed DQ->Q");
  }
};

}  // namespace

void pairQdq(ir::Model& model, PassContext& ctx) {
  PairQdq rule;
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
