#include "qconv/pipeline/node_trace.h"

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <map>
#include <set>

#include "qconv/diag.h"

namespace qconv {

std::string qualifiedOp(const ir::Node& n) { return n.domain().empty() ? n.opType() : n.domain() + ":" + n.opType(); }

void NodeTrace::forgetOutput() {
  output.clear();
  for (NodeRow& row : input) row.became.clear();
}

std::string_view outcomeName(Outcome o) {
  switch (o) {
    case Outcome::Fused: return "fused";
    case Outcome::Rewritten: return "rewritten";
    case Outcome::Moved: return "moved";
    case Outcome::Approximated: return "approximated";
    case Outcome::Refused: return "refused";
    case Outcome::WillNotRun: return "will-not-run";
    case Outcome::Left: return "left";
    case Outcome::Removed: return "removed";
  }
  return "left";
}

const std::vector<Outcome>& allOutcomes() {
  static const std::vector<Outcome> all = {Outcome::Fused,   Outcome::Rewritten,  Outcome::Moved, Outcome::Approximated,
                                           Outcome::Refused, Outcome::WillNotRun, Outcome::Left,  Outcome::Removed};
  return all;
}

namespace {

/// What a group's pass did to the nodes it took: a fusion, a move, or another rewrite.
Outcome groupOutcome(std::string_view pass) {
  if (pass.substr(0, 5) == "fuse-") return Outcome::Fused;
  if (pass == "move-on-int8" || pass == "dequantize-moves") return Outcome::Moved;
  return Outcome::Rewritten;
}

int rank(Outcome o) { return o == Outcome::Fused ? 3 : o == Outcome::Moved ? 2 : 1; }

void append(std::string& to, std::string_view what, std::string_view sep = "; ") {
  if (what.empty()) return;
  if (!to.empty()) to += sep;
  to += what;
}

class Tracer {
 public:
  Tracer(const ir::Graph& g, const std::vector<Rewritten>& groups) : groups_(groups) {
    size_t i = 0;
    for (const ir::Node* n : g.nodes()) position_[n->ordinal()] = i++;
    for (size_t k = 0; k < groups.size(); ++k) {
      if (!groups[k].kept) took_.emplace(groups[k].root_ordinal, k);
      for (size_t o : groups[k].absorbed_ordinals) took_.emplace(o, k);
      for (size_t o : groups[k].made_ordinals) made_by_.emplace(o, k);
      if (groups[k].kept) kept_root_.emplace(groups[k].root_ordinal, k);
    }
  }

  /// The output positions a node went into, the passes on the way, and the strongest outcome.
  struct Path {
    std::set<size_t> at;
    std::set<size_t> seen;  // the nodes walked: each once (condition 2 ends the walk; this bounds it)
    std::vector<std::string_view> passes;
    Outcome outcome = Outcome::Left;
    bool taken = false;  // went into a group (else: live, or removed outside any group)
  };

  Path follow(size_t ordinal) const {
    Path p;
    walk(ordinal, p);
    return p;
  }

  /// The group that took a node out of the graph, if one did.
  const Rewritten* takenBy(size_t ordinal) const {
    auto it = took_.find(ordinal);
    return it == took_.end() ? nullptr : &groups_[it->second];
  }
  const Rewritten* madeBy(size_t ordinal) const {
    auto it = made_by_.find(ordinal);
    return it == made_by_.end() ? nullptr : &groups_[it->second];
  }
  const Rewritten* keptRootOf(size_t ordinal) const {
    auto it = kept_root_.find(ordinal);
    return it == kept_root_.end() ? nullptr : &groups_[it->second];
  }
  const std::map<size_t, size_t>& positions() const { return position_; }

 private:
  void walk(size_t ordinal, Path& p) const {
    if (!p.seen.insert(ordinal).second) return;
    if (auto at = position_.find(ordinal); at != position_.end()) {
      p.at.insert(at->second);
      return;
    }
    const Rewritten* g = takenBy(ordinal);
    if (!g) return;
    p.taken = true;
    if (std::find(p.passes.begin(), p.passes.end(), g->pass) == p.passes.end()) p.passes.push_back(g->pass);
    const Outcome o = groupOutcome(g->pass);
    if (rank(o) > rank(p.outcome) || p.outcome == Outcome::Left) p.outcome = o;
    for (size_t m : g->made_ordinals) walk(m, p);  // later ordinals (condition 2): this ends
    if (g->kept) walk(g->root_ordinal, p);  // a move's Q/DQ: into the node that now runs on int8
  }

  const std::vector<Rewritten>& groups_;
  std::map<size_t, size_t> position_;         // live node's ordinal -> its output position
  std::multimap<size_t, size_t> took_;        // ordinal -> the group that removed it
  std::map<size_t, size_t> made_by_;          // ordinal -> the group that made it
  std::map<size_t, size_t> kept_root_;        // ordinal -> a group that kept it as its root
};

/// What was said about each label: the outcome it implies and the text.
struct SaidOf {
  std::vector<const Said*> refused, unconvertible, approximated, warned;
};

/// Apply what was said to a node's outcome and reason.
void judge(const SaidOf* s, Outcome& outcome, std::string& reason, std::string& passes) {
  if (!s) return;
  auto say = [&](const std::vector<const Said*>& list) {
    for (const Said* x : list) append(reason, x->text);
  };
  if (!s->approximated.empty()) {
    outcome = Outcome::Approximated;
    say(s->approximated);
    for (const Said* x : s->approximated) append(passes, x->pass, ", ");
  } else if (outcome == Outcome::Left && !s->unconvertible.empty()) {
    outcome = Outcome::WillNotRun;
    say(s->unconvertible);
    append(passes, s->unconvertible.front()->pass, ", ");
  } else if (outcome == Outcome::Left && !s->refused.empty()) {
    outcome = Outcome::Refused;
    say(s->refused);
    append(passes, s->refused.front()->pass, ", ");
  }
  say(s->warned);
}

}  // namespace

NodeTrace traceNodes(const ir::Graph& graph, size_t input_nodes, const std::vector<Rewritten>& rewritten,
                     const std::vector<Said>& said, const std::vector<std::pair<std::string_view, size_t>>& removals,
                     std::string_view failing_pass) {
  std::map<std::string, SaidOf, std::less<>> by_label;
  for (const Said& s : said) {
    SaidOf& of = by_label[s.subject];
    if (s.kind == Report::Refused) of.refused.push_back(&s);
    if (s.kind == Report::Unconvertible) of.unconvertible.push_back(&s);
    if (s.kind == Report::Approximation) of.approximated.push_back(&s);
    if (s.kind == Report::Warning || s.kind == Report::Advisory) of.warned.push_back(&s);
  }
  auto saidOf = [&](const std::string& label) -> const SaidOf* {
    auto it = by_label.find(label);
    return it == by_label.end() ? nullptr : &it->second;
  };
  // which pass destroyed the i-th destroyed node: the first checkpoint past i
  std::map<size_t, std::string_view> destroyed_by;
  for (size_t i = 0, k = 0; i < graph.nodesDestroyed(); ++i) {
    while (k < removals.size() && removals[k].second <= i) ++k;
    destroyed_by[graph.destroyedNode(i)->ordinal()] = k < removals.size() ? removals[k].first : failing_pass;
  }

  const Tracer tracer(graph, rewritten);
  NodeTrace trace;
  trace.output.resize(tracer.positions().size());
  QCONV_ASSERT(input_nodes <= graph.nodesMade(), "{} input nodes of {} made", input_nodes, graph.nodesMade());
  trace.input.reserve(input_nodes);
  for (size_t o = 0; o < input_nodes; ++o) {
    const ir::Node& n = *graph.madeNode(o);
    NodeRow row{n.label(), qualifiedOp(n), Outcome::Left, "", "", {}, {}};
    const Tracer::Path path = tracer.follow(o);
    row.became_at.assign(path.at.begin(), path.at.end());
    if (path.taken) {
      row.outcome = path.outcome;
      for (std::string_view p : path.passes) append(row.passes, p, ", ");
      const Rewritten* g = tracer.takenBy(o);
      if (g->root_ordinal != o) row.reason = fmt::format("taken into {}'s group", g->node);
    } else if (!graph.isAlive(&n)) {
      row.outcome = Outcome::Removed;
      auto by = destroyed_by.find(o);
      row.passes = by == destroyed_by.end() ? std::string() : std::string(by->second);
      row.reason = row.passes.empty() ? "not in the output" : fmt::format("removed by {}", row.passes);
    } else if (const Rewritten* g = tracer.keptRootOf(o)) {
      row.outcome = groupOutcome(g->pass);
      row.passes = g->pass;
      row.reason = fmt::format("{}: {} node{} around it taken", g->pass, g->absorbed.size(), g->absorbed.size() == 1 ? "" : "s");
    }
    judge(saidOf(row.name), row.outcome, row.reason, row.passes);
    for (size_t at : row.became_at) trace.output[at].from.push_back(row.name);
    trace.input.push_back(std::move(row));
  }
  for (const auto& [ordinal, at] : tracer.positions()) {
    const ir::Node& n = *graph.madeNode(ordinal);
    OutputNode& out = trace.output[at];
    out.id = n.label();
    out.op = qualifiedOp(n);
    std::string passes;
    if (ordinal < input_nodes) {  // an input node, there still: its row says what it is
      out.outcome = trace.input[ordinal].outcome;
      out.reason = trace.input[ordinal].reason;
      continue;
    }
    if (const Rewritten* g = tracer.madeBy(ordinal)) {
      out.outcome = groupOutcome(g->pass);
      out.reason = g->absorbed.empty() ? fmt::format("{}: from {} {}", g->pass, g->op, g->node)
                                       : fmt::format("{}: from {} {} and {} node{}", g->pass, g->op, g->node,
                                                     g->absorbed.size(), g->absorbed.size() == 1 ? "" : "s");
    } else {
      out.outcome = Outcome::Rewritten;  // made outside a recorded group (a pass's own bookkeeping)
    }
    judge(saidOf(out.id), out.outcome, out.reason, passes);
  }
  for (NodeRow& row : trace.input)  // by label until nameOutputNodes names them as emitted
    for (size_t at : row.became_at) row.became.push_back(trace.output[at].id);
  return trace;
}

void nameOutputNodes(NodeTrace& trace, const onnx::GraphProto& emitted) {
  QCONV_ASSERT(static_cast<size_t>(emitted.node_size()) == trace.output.size(), "{} nodes emitted, {} traced",
               emitted.node_size(), trace.output.size());
  std::vector<const onnx::NodeProto*> nodes;
  for (const auto& n : emitted.node()) nodes.push_back(&n);
  std::vector<std::string> ids = explorerNodeIds(nodes);
  for (size_t i = 0; i < trace.output.size(); ++i) trace.output[i].id = std::move(ids[i]);
  for (NodeRow& row : trace.input) {
    row.became.clear();
    for (size_t at : row.became_at) row.became.push_back(trace.output[at].id);
  }
}

}  // namespace qconv
