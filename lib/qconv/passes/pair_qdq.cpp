// pair-qdq: make quantization parameters explicit on values, and drop DQ -> Q identities.
//
// Before:
//   a -> Q1(s, z) -> q1 -> DQ1(s, z) -> f -> Q2(s, z) -> q2 -> DQ2(s, z) -> ...
// After:
//   a -> Q1(s, z) -> q1 -> DQ2(s, z) -> ...      (q1 carries QuantParams{s, z, type, axis})
//
// Every value produced by a QuantizeLinear or read by a DequantizeLinear with constant
// parameters gets QuantParams. A DequantizeLinear shared by several consumers stays shared:
// the fusion passes read through it per consumer and remove it once nobody reads it.
// A Q whose input comes from a DQ is removed (its readers read the DQ's input) when all of:
//   1. both have constant parameters (scale bits, zero points, type, axis) that are identical;
//   2. the Q's output is not a graph output and is not read by a subgraph.
// DQ(Q'(x)) with identical parameters is exactly q: (q - z) * s / s rounds back to q - z
// for every integer |q - z| < 2^16.
#include "qconv/pipeline/pass.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

ir::QuantParams paramsOf(const ir::Node& n, const ConstQuant& q) {
  ir::QuantParams p;
  p.scale = n.input(1);
  p.zero_point = n.input(2);
  p.elem_type = q.elem_type;
  p.per_axis = q.per_axis;
  p.axis = q.axis;
  return p;
}

}  // namespace

void pairQdq(ir::Model& model, PassContext& ctx) {
  ir::Graph& graph = model.graph;
  for (ir::Node* n : graph.nodeSnapshot()) {
    if (!graph.isAlive(n)) continue;
    std::string why;
    if (isDequantize(*n) && n->input(0)) {
      auto q = readConstQuant(*n, &why);
      if (q && !n->input(0)->quant()) n->input(0)->setQuant(paramsOf(*n, *q));
      continue;
    }
    if (!isQuantize(*n) || !n->output(0)) continue;
    auto q = readConstQuant(*n, &why);
    if (!q) continue;
    ir::Value* out = n->output(0);
    out->setQuant(paramsOf(*n, *q));
    if (out->elemType() == 0) out->setElemType(q->elem_type);

    ir::Node* dq = dequantizeFeeding(n->input(0));
    if (!dq) continue;
    auto dqq = readConstQuant(*dq, &why);
    if (!dqq || !sameQuant(*dqq, *q)) continue;  // (1)
    if (out->isGraphOutput() || out->hasImplicitUses()) continue;  // (2)
    ir::Value* source = dq->input(0);
    graph.replaceAllUsesWith(out, source);
    graph.destroyNode(n);
    graph.pruneIfDead(dq->output(0));
    ctx.count("collapsed DQ->Q");
  }
}

}  // namespace qconv
