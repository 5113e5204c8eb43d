#include "qconv/passes/common/computed_dims.h"

#include <fmt/format.h>

#include <unordered_map>

namespace qconv {

std::vector<ComputedDimsJoin> computedDimsJoins(const ir::Graph& graph) {
  std::unordered_map<const ir::Value*, const ir::Node*> after;  // tensor -> the Reshape it comes after
  std::vector<ComputedDimsJoin> joins;
  for (const ir::Node* n : graph.nodes()) {
    const ir::Node* behind = nullptr;
    bool known = false;  // an input whose dims are forwarded
    for (const ir::Value* v : n->inputs()) {
      if (!v || v->isConstant()) continue;
      auto it = after.find(v);
      if (it == after.end()) known = true;
      else if (!behind) behind = it->second;
    }
    if (n->is("Concat") && behind && known) joins.push_back({n, behind});
    if (n->is("Reshape") && n->input(1) && !n->input(1)->isConstant()) behind = n;
    if (!behind || n->is("Shape")) continue;  // a Shape's dims are its input's rank: forwarded
    for (const ir::Value* out : n->outputs())
      if (out) after.emplace(out, behind);
  }
  return joins;
}

std::string computedDimsWhy(const ComputedDimsJoin& j, const TargetProfile& t) {
  return fmt::format("it joins a tensor computed after {} (a Reshape to a shape the model computes) with one that is "
                     "not: {}; convert --target {} computes such a shape to a constant where the model's input shapes "
                     "are static",
                     j.reshape->label(), t.computed_dims_concat, t.name);
}

}  // namespace qconv
