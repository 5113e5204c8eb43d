// What became of each node: the report's per-node table (--report's "nodes" and "output_nodes",
// the HTML page's table, --node-data's overlay), traced through the groups the passes recorded.
//
// Before:  the graph after the passes (or after the pass that threw), whose destroyed nodes keep
//          their labels; the groups rewritten (Rewritten: root, made and absorbed by ordinal);
//          what was said (Said, by label); which pass destroyed how many nodes (PassManager)
// After:   one NodeRow per node of the input, in its order; one OutputNode per live node, in
//          the order emit writes them; each row's `became` the output nodes it is part of
//
// Conditions:
// 1. The input's nodes are the graph's first `input_nodes` ordinals (import appends them in order).
// 2. The nodes a group made have later ordinals than its root and the nodes it absorbed, so a
//    node is followed through groups (made, then absorbed again) to an end.
// 3. Emit writes the live nodes in graph order (io::exportModel): output node i is the i-th.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qconv/passes/pass.h"
#include "qconv/pipeline/explorer_ids.h"

namespace onnx {
class GraphProto;
class NodeProto;
}

namespace qconv {

/// A node's outcome; outcomeName() gives the report's word for it.
enum class Outcome { Fused, Rewritten, Moved, Approximated, Refused, WillNotRun, Left, Removed };
/// "fused", "rewritten", "moved", "approximated", "refused", "will-not-run", "left", "removed".
std::string_view outcomeName(Outcome o);
/// Every outcome, in the order a report lists them.
const std::vector<Outcome>& allOutcomes();

/// A node of the input.
struct NodeRow {
  std::string name;     // its label: the name, or "<op_type> #<position>"
  std::string op;       // qualifiedOp()
  Outcome outcome = Outcome::Left;
  std::string passes;   // the passes that rewrote or removed it, in order (", "), or the one that said why
  std::string reason;   // why it is as it is, or what an approximation changed; empty for a node left alone
  std::vector<std::string> became;  // the output nodes it went into (their ids), or itself
  std::vector<size_t> became_at;    // the same by output position (before the ids are known)
};

/// A node of the output.
struct OutputNode {
  std::string id;  // as Model Explorer's ONNX adapter calls it (explorerNodeIds): its name, mostly
  std::string op;
  Outcome outcome = Outcome::Left;
  std::string reason;
  std::vector<std::string> from;  // the input nodes it came from (their labels)
};

struct NodeTrace {
  std::vector<NodeRow> input;
  std::vector<OutputNode> output;  // empty when nothing was emitted
  /// A run that failed wrote nothing: no output node, nor one an input node became (the
  /// outcomes stay: what will not run, and why).
  void forgetOutput();
};

/// A node's operator as the report names it: "<domain>:<op_type>" outside the standard domain.
std::string qualifiedOp(const ir::Node& n);

/// The trace of a pipeline run over `graph`, whose first `input_nodes` nodes were the input's.
/// `removals`: PassManager::removals(); `failing_pass`: the pass that threw, or empty. Output ids
/// are the live nodes' labels until nameOutputNodes() gives them the emitted names.
NodeTrace traceNodes(const ir::Graph& graph, size_t input_nodes, const std::vector<Rewritten>& rewritten,
                     const std::vector<Said>& said, const std::vector<std::pair<std::string_view, size_t>>& removals,
                     std::string_view failing_pass);

/// The output nodes' ids as emitted (condition 3), and the rows' `became` by them.
void nameOutputNodes(NodeTrace& trace, const onnx::GraphProto& emitted);

}  // namespace qconv
