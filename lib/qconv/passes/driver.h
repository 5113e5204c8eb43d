// The one driver every pass runs on: rules, each a selector and an action.
//
// A rule is a small struct (see fuse_qlinear_conv.cpp for the worked example):
//
//   struct MyRule {
//     using Group = ...;                                         // what the selector found
//     bool root(const ir::Node& n) const;                        // the nodes it looks at
//     Match<Group> select(ir::Node& n);                          // reads the graph, never writes
//     void rewrite(ir::Graph& g, Group& group, PassContext& c);  // never refuses
//     std::string declined(const ir::Node& n) const;             // prefix of refusals: "not fused"
//                                                                // (empty: the reason says it all)
//     static constexpr bool kSeveralPerNode = false;             // optional: see below
//     static constexpr bool kNeedsOutput = true;                 // optional: see below
//   };
//
// applyRule() sweeps the graph once in node order (a snapshot: nodes the action creates are not
// visited; nodes it destroys are skipped). For each live root it asks the selector, and
//   - Match::none():            not this rule's business; nothing is said;
//   - Match::refuse(reason):    the node stays as it is, still correct; reported as
//                               "<node>: <declined>: <reason>" (Report::Refused, or the kind given;
//                               refuseAbout() names a value instead of the node);
//   - Match::unconvertible(r):  the node stays and has no standard form: reported as
//                               Report::Unconvertible, which refuse-foreign-ops turns into exit 4;
//   - a group:                  the action rewrites it, and may report what it did.
// A root whose first output is missing or unnamed is never offered to the selector: it is
// refused ("it has no output"; unconvertible in a foreign quantization domain). Only a rule
// that rewrites nothing (validate), or only the node's inputs (fold-constant-weights), sets
// kNeedsOutput = false to see such nodes too.
// A selector that finds bad input (not a node it declines, a model no runtime may run) throws
// qconv::Error naming file and node: validate and redeclare-opset do.
// With kSeveralPerNode the selector is asked again at the same node after each answer but none():
// for rules that find several groups around one node (shift-types: one per tensor it touches).
// A pass is one or more rules applied in turn; state a rule keeps (a scale chain, the values
// already seen) lives in the rule object, never in the graph or a global.
#pragma once

#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "qconv/ir/ir.h"
#include "qconv/passes/pass.h"
#include "qconv/quant.h"

namespace qconv {

template <typename Group>
class Match {
 public:
  Match(Group g) : group_(std::move(g)) {}  // NOLINT: a group converts to its match
  static Match none() { return Match(); }
  static Match refuse(std::string reason, Report kind = Report::Refused) { return Match(std::move(reason), kind); }
  /// A refusal about a value rather than the node (subject: the value's name).
  static Match refuseAbout(std::string subject, std::string reason, Report kind) {
    Match m(std::move(reason), kind);
    m.subject_ = std::move(subject);
    return m;
  }
  static Match unconvertible(std::string reason) { return Match(std::move(reason), Report::Unconvertible); }

  bool selected() const { return group_.has_value(); }
  bool isNone() const { return !group_ && reason_.empty(); }
  Group& group() { return *group_; }
  const std::string& reason() const { return reason_; }
  Report kind() const { return kind_; }
  const std::string& subject() const { return subject_; }

 private:
  Match() = default;
  Match(std::string reason, Report kind) : reason_(std::move(reason)), kind_(kind) {}
  std::optional<Group> group_;
  std::string reason_;
  std::string subject_;
  Report kind_ = Report::Refused;
};

namespace detail {
template <typename R, typename = void>
struct SeveralPerNode : std::false_type {};
template <typename R>
struct SeveralPerNode<R, std::void_t<decltype(R::kSeveralPerNode)>> : std::bool_constant<R::kSeveralPerNode> {};
template <typename R, typename = void>
struct NeedsOutput : std::true_type {};
template <typename R>
struct NeedsOutput<R, std::void_t<decltype(R::kNeedsOutput)>> : std::bool_constant<R::kNeedsOutput> {};
}  // namespace detail

inline std::string prefixed(const std::string& declined, const std::string& reason) {
  return declined.empty() ? reason : declined + ": " + reason;
}

/// The action, and the group in ctx.rewritten() when it changed the nodes: made one, or
/// destroyed one (an action that only warns, as check-saturation's, or changes constants, as
/// shift-types', records nothing).
template <typename Rule, typename Group>
void rewriteAndRecord(ir::Graph& graph, ir::Node& root, Group& group, PassContext& ctx, Rule& rule) {
  const size_t made = graph.nodesMade(), live = graph.nodes().size(), destroyed = graph.nodesDestroyed();
  rule.rewrite(graph, group, ctx);
  if (graph.nodesMade() == made && graph.nodes().size() == live) return;  // nothing to record: no label made
  // a destroyed root keeps its proto (and so its label) until emit
  Rewritten record{ctx.pass(), root.label(), root.opType(), {}, graph.isAlive(&root), {}, root.ordinal(), {}, {}};
  for (size_t i = made; i < graph.nodesMade(); ++i)
    if (const ir::Node* n = graph.madeNode(i); graph.isAlive(n)) {
      record.became.push_back(n->opType());
      record.made_ordinals.push_back(i);
    }
  for (size_t i = destroyed; i < graph.nodesDestroyed(); ++i)  // not the root, nor a node the action made
    if (const ir::Node* n = graph.destroyedNode(i); n != &root && n->ordinal() < made) {
      record.absorbed.push_back(n->label());
      record.absorbed_ordinals.push_back(n->ordinal());
    }
  ctx.rewrote(std::move(record));
}

template <typename Rule>
void applyRule(ir::Graph& graph, PassContext& ctx, Rule& rule) {
  for (ir::Node* n : graph.nodeSnapshot()) {
    if (!graph.isAlive(n) || !rule.root(*n)) continue;
    if (detail::NeedsOutput<Rule>::value && !n->output(0)) {
      const Report kind = isForeignQuantDomain(n->domain()) ? Report::Unconvertible : Report::Refused;
      ctx.report(kind, *n, prefixed(rule.declined(*n), "it has no output"));
      continue;
    }
    do {
      auto m = rule.select(*n);
      if (m.isNone()) break;
      if (m.selected()) rewriteAndRecord(graph, *n, m.group(), ctx, rule);
      else ctx.report(m.kind(), m.subject().empty() ? n->label() : m.subject(), prefixed(rule.declined(*n), m.reason()));
    } while (detail::SeveralPerNode<Rule>::value && graph.isAlive(n));
  }
}

}  // namespace qconv
