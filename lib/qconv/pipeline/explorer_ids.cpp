// The ids Model Explorer's ONNX adapter gives a graph and its nodes (explorer_ids.h).
#include "qconv/pipeline/explorer_ids.h"

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <map>
#include <set>

namespace qconv {

std::string graphId(const std::string& graph_name) { return graph_name.empty() ? "<main>" : graph_name; }

namespace {

using Used = std::set<std::string, std::less<>>;

void nameNodes(const std::vector<const onnx::NodeProto*>& nodes, Used& used, std::map<std::string, size_t>& counter,
               std::vector<std::string>* ids);

/// One node: its id in `used` (its graph's), then its subgraphs' nodes, each graph with names of its own.
std::string nameNode(const onnx::NodeProto& n, Used& used, std::map<std::string, size_t>& counter) {
  std::string id = n.name();
  if (id.empty() || used.count(id)) {
    const std::string base = id.empty() ? "node" : id;
    id = base;
    while (used.count(id)) id = fmt::format("{}_{}", base, ++counter[base]);
  }
  used.insert(id);
  auto sub = [&](const onnx::GraphProto& g) {
    std::vector<const onnx::NodeProto*> inner;
    for (const auto& m : g.node()) inner.push_back(&m);
    Used own;
    nameNodes(inner, own, counter, nullptr);
  };
  for (const auto& a : n.attribute()) {
    if (a.type() == onnx::AttributeProto::GRAPH && a.has_g()) sub(a.g());
    if (a.type() == onnx::AttributeProto::GRAPHS)
      for (const auto& g : a.graphs()) sub(g);
  }
  return id;
}

void nameNodes(const std::vector<const onnx::NodeProto*>& nodes, Used& used, std::map<std::string, size_t>& counter,
               std::vector<std::string>* ids) {
  for (const onnx::NodeProto* n : nodes) {
    std::string id = nameNode(*n, used, counter);
    if (ids) ids->push_back(std::move(id));
  }
}

}  // namespace

std::vector<std::string> explorerNodeIds(const std::vector<const onnx::NodeProto*>& nodes) {
  Used used;
  std::map<std::string, size_t> counter;
  std::vector<std::string> ids;
  ids.reserve(nodes.size());
  nameNodes(nodes, used, counter, &ids);
  return ids;
}

}  // namespace qconv
