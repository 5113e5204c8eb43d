// The ids Google's Model Explorer gives an ONNX graph and its nodes (its ONNX adapter,
// model-explorer-onnx 0.4.2): what --node-data keys its values by, so that each lands on its node.
#pragma once

#include <string>
#include <vector>

namespace onnx {
class NodeProto;
}

namespace qconv {

/// The id Model Explorer's ONNX adapter gives the graph: its name, "<main>" when it has none.
std::string graphId(const std::string& graph_name);
/// The ids it gives the graph's nodes, in order. model-explorer-onnx (0.4.2) names them with
/// onnx_ir's NameFixPass first: a name the first time the graph has it; an unnamed node
/// "node", a name seen before "<name>", made unique with "_<k>" (one counter per base, shared
/// with the nodes of subgraphs, which come right after their node and have names of their own).
std::vector<std::string> explorerNodeIds(const std::vector<const onnx::NodeProto*>& nodes);

}  // namespace qconv
