// Small helpers for the fusion actions (rewrites that never refuse).
#pragma once

#include <string>

#include "qconv/ir/ir.h"
#include "qconv/ir/tensor.h"
#include "qconv/pipeline/pass.h"

namespace qconv {

/// `zp` itself, or (when the Q/DQ omitted it) a new scalar 0 of `type`: QLinear ops require it.
inline ir::Value* zeroPointOr(ir::Graph& graph, ir::Value* zp, int32_t type, const std::string& hint) {
  return zp ? zp : graph.addInitializer(hint, ir::makeIntTensor(type, {}, {0}));
}

/// Copy the attributes, name and doc_string of `from` onto `to`.
inline void inheritAttributes(ir::Node& to, const ir::Node& from) {
  to.mutableProto().mutable_attribute()->CopyFrom(from.proto().attribute());
  to.mutableProto().set_name(from.proto().name());
  if (!from.proto().doc_string().empty()) to.mutableProto().set_doc_string(from.proto().doc_string());
}

/// `replacement` takes over `old`'s single output (its name and readers) and `old`'s node name;
/// `old` goes, and so do the inputs nobody reads any more (e.g. a QONNX bit-width constant).
inline void replaceNode(ir::Graph& graph, ir::Node& old, ir::Node* replacement) {
  replacement->mutableProto().set_name(old.name());
  graph.takeOutput(replacement, 0, old.output(0));
  std::vector<ir::Value*> inputs = old.inputs();
  graph.destroyNode(&old);
  for (ir::Value* v : inputs) graph.pruneIfDead(v);
}

/// The driver every fusion pass shares: for each live node of `op_type`, `select` returns a
/// group or leaves a reason (logged as a refusal naming the node); `rewrite` applies a group.
template <typename Select, typename Rewrite>
void selectAndRewrite(ir::Graph& graph, PassContext& ctx, const char* op_type, const char* counter, Select select,
                      Rewrite rewrite) {
  for (ir::Node* n : graph.nodeSnapshot()) {
    if (!graph.isAlive(n) || !n->is(op_type)) continue;
    std::string why;
    auto group = select(*n, &why);
    if (!group) {
      ctx.refuse(*n, why);
      continue;
    }
    rewrite(graph, *group);
    ctx.count(counter);
  }
}

}  // namespace qconv
