// redeclare-opset: with --opset N, declare the output's default-domain opset as N; with --target
// and no --opset, the nearest opset that target reads when the model's is outside its range.
// With a --target whose runtime refuses com.microsoft ops (rknn, qnn), an import of that domain
// no node uses (in the graph, a subgraph or a local function) is dropped.
//
// Before:  opset_import { "": 11 }   After:  opset_import { "": 13 }
//           Softmax(x) axis=1 (x: rank 2)           Softmax(x) axis=1 (explicit)
// The conditions each node must meet are in opset_history.h, with the crossings of changed
// versions a node makes keeping its meaning (and the rewrite each takes) in opset_crossings.h.
// A node that fails them is unconvertible (its text names the version in the way), so
// refuse-foreign-ops, right after, refuses the model with it (exit 4) and the opset stays as declared.
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "qconv/diag.h"
#include "qconv/passes/common/element_types.h"
#include "qconv/passes/common/opset_history.h"
#include "qconv/passes/driver.h"

namespace qconv {

namespace {

struct RedeclareOpset {
  struct Group {};
  int64_t target, declared, lo, hi;
  const ElementTypes& known;
  std::string_view for_target;  // the --target whose range asked for it, or empty (--opset)
  bool blocked = false;  // the first node in the way is the one named

  bool root(const ir::Node& n) const { return n.domain().empty(); }
  std::string declined(const ir::Node&) const {
    if (!for_target.empty())
      return fmt::format("cannot declare opset {}, the {} --target {} reads (the model declares {})", target,
                         target < declared ? "highest" : "lowest", for_target, declared);
    return fmt::format("cannot declare opset {} (the model declares {})", target, declared);
  }
  Match<Group> select(ir::Node& n) {
    if (blocked) return Match<Group>::none();
    std::string why = opsetBlocker(n, lo, hi, known, declared);
    if (why.empty()) return Match<Group>::none();
    blocked = true;
    return Match<Group>::unconvertible(why);
  }
  void rewrite(ir::Graph&, Group&, PassContext&) {}
};

bool usesDomain(const onnx::GraphProto& g, const std::string& domain);

bool usesDomain(const onnx::NodeProto& n, const std::string& domain) {
  if (n.domain() == domain) return true;
  for (const auto& a : n.attribute()) {
    if (a.has_g() && usesDomain(a.g(), domain)) return true;
    for (const auto& g : a.graphs())
      if (usesDomain(g, domain)) return true;
  }
  return false;
}

bool usesDomain(const onnx::GraphProto& g, const std::string& domain) {
  return std::any_of(g.node().begin(), g.node().end(), [&](const onnx::NodeProto& n) { return usesDomain(n, domain); });
}

/// Drop the import of `domain` when no node of `model` uses it.
void dropUnusedImport(ir::Model& model, const std::string& domain, PassContext& ctx) {
  for (const ir::Node* n : model.graph.nodes())
    if (usesDomain(n->proto(), domain)) return;
  for (const auto& f : model.shell.functions())
    if (f.domain() == domain ||
        std::any_of(f.node().begin(), f.node().end(), [&](const onnx::NodeProto& n) { return usesDomain(n, domain); }))
      return;
  auto* imports = model.shell.mutable_opset_import();
  for (int i = 0; i < imports->size(); ++i)
    if (imports->Get(i).domain() == domain) {
      imports->DeleteSubrange(i, 1);
      ctx.report(Report::Done, model.path, fmt::format("the unused import of domain {} dropped: --target {} refuses it",
                                                       domain, ctx.target().name));
      return;
    }
}

}  // namespace

void redeclareOpset(ir::Model& model, PassContext& ctx) {
  if (ctx.options().target && !ctx.target().contrib.allowed) dropUnusedImport(model, "com.microsoft", ctx);
  const int64_t declared = ir::defaultOpset(model);
  int64_t target = ctx.options().opset;
  std::string_view for_target;
  if (!target) {  // --target: the nearest opset its runtime reads
    const TargetProfile& t = ctx.target();
    if (const int64_t floor = targetOpsetMin(t, model); declared < floor) target = floor;
    else if (t.opset_max && declared > t.opset_max) target = t.opset_max;
    for_target = t.name;
  }
  if (!target || declared == target || declared == 0) return;
  checkOpsetFlag(target);
  const size_t before = ctx.reports(Report::Unconvertible).size();
  const ElementTypes known(model.graph, declared);  // what no value_info declares, inferred
  RedeclareOpset rule{target, declared, std::min(declared, target), std::max(declared, target), known, for_target, false};
  applyRule(model.graph, ctx, rule);
  if (ctx.reports(Report::Unconvertible).size() != before) return;  // refuse-foreign-ops refuses the model
  declareOpset(model, target);
}

}  // namespace qconv
