// parse: ModelProto -> IR.
//
// The main graph's nodes, initializers, inputs, outputs and value_info move into the IR;
// everything else stays in the shell ModelProto. Subgraph bodies (If/Loop/Scan attributes)
// stay inside their node's proto; the outer values they read become implicit uses.
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "qconv/diag.h"
#include "qconv/io/external_data.h"
#include "qconv/io/model_io.h"
#include "qconv/ir/tensor.h"

namespace qconv::io {

namespace {

using onnx::AttributeProto;
using onnx::GraphProto;
using onnx::NodeProto;

void freeNamesOf(const GraphProto& g, std::set<std::string>& free);

void freeNamesOfNodeAttrs(const NodeProto& n, const std::unordered_set<std::string>& local,
                          std::set<std::string>& free) {
  for (const auto& a : n.attribute()) {
    std::set<std::string> inner;
    if (a.has_g()) freeNamesOf(a.g(), inner);
    for (const auto& g : a.graphs()) freeNamesOf(g, inner);
    for (const auto& name : inner)
      if (!local.count(name)) free.insert(name);
  }
}

/// Names a graph reads but does not define (its outer-scope references).
void freeNamesOf(const GraphProto& g, std::set<std::string>& free) {
  std::unordered_set<std::string> local;
  for (const auto& i : g.input()) local.insert(i.name());
  for (const auto& t : g.initializer()) local.insert(t.name());
  for (const auto& s : g.sparse_initializer()) local.insert(s.values().name());
  for (const auto& n : g.node()) {
    for (const auto& in : n.input())
      if (!in.empty() && !local.count(in)) free.insert(in);
    freeNamesOfNodeAttrs(n, local, free);
    for (const auto& out : n.output()) local.insert(out);
  }
}

bool hasSubgraph(const NodeProto& n) {
  return std::any_of(n.attribute().begin(), n.attribute().end(),
                     [](const AttributeProto& a) { return a.has_g() || a.graphs_size() > 0; });
}

std::string nodeLabel(const NodeProto& n, int index) {
  return n.name().empty() ? fmt::format("{} #{}", n.op_type(), index) : n.name();
}

/// The most bytes of external data qconv reads into an attribute's tensor (a subgraph's or a
/// function's Constant): beyond, the model is refused rather than held in memory.
constexpr uint64_t kMaxInlinedBytes = uint64_t{64} << 20;

/// Tensors inside a node's attributes (Constant values, subgraph initializers, in the graph, its
/// subgraphs and the model's functions) stored as external data: checked like initializers, then
/// read into raw_data, up to kMaxInlinedBytes each (a subgraph or function keeps its protos as
/// they are). Sparse tensors with external data are refused (exit 4), as sparse initializers are.
void inlineAttributeTensors(onnx::NodeProto& n, ExternalFiles& files, const std::string& where) {
  auto inlineOne = [&](onnx::TensorProto& t) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL) return;
    if (const auto bytes = ir::dataBytes(t); bytes && *bytes > kMaxInlinedBytes)
      throw Error(ExitCode::Unsupported,
                  fmt::format("{}: a tensor of {} bytes of external data inside an attribute: qconv reads those into "
                              "the model, up to {} MiB each (a main-graph Constant's stays in its file)",
                              where, *bytes, kMaxInlinedBytes >> 20));
    files.inlineBytes(t, where);
  };
  auto refuseSparse = [&](const onnx::SparseTensorProto& s) {
    if (s.values().data_location() == onnx::TensorProto::EXTERNAL ||
        s.indices().data_location() == onnx::TensorProto::EXTERNAL)
      throw Error(ExitCode::Unsupported, fmt::format("{}: a sparse tensor stored as external data, which qconv does "
                                                     "not read", where));
  };
  std::function<void(onnx::GraphProto&)> graph = [&](onnx::GraphProto& g) {
    for (auto& t : *g.mutable_initializer()) inlineOne(t);
    for (auto& sub : *g.mutable_node()) inlineAttributeTensors(sub, files, where);
  };
  for (auto& a : *n.mutable_attribute()) {
    if (a.has_t()) inlineOne(*a.mutable_t());
    for (auto& t : *a.mutable_tensors()) inlineOne(t);
    if (a.has_sparse_tensor()) refuseSparse(a.sparse_tensor());
    for (const auto& s : a.sparse_tensors()) refuseSparse(s);
    if (a.has_g()) graph(*a.mutable_g());
    for (auto& g : *a.mutable_graphs()) graph(g);
  }
}

/// Whether an attribute of `n` holds a tensor or a graph (which inlineAttributeTensors looks into).
bool holdsTensors(const NodeProto& n) {
  return std::any_of(n.attribute().begin(), n.attribute().end(), [](const AttributeProto& a) {
    return a.has_t() || a.tensors_size() > 0 || a.has_sparse_tensor() || a.sparse_tensors_size() > 0 || a.has_g() ||
           a.graphs_size() > 0;
  });
}

/// A main-graph Constant whose value is external data becomes a file-backed initializer of its
/// output's name, under the rules and bounds of any initializer (nothing is read); null when `n`
/// is not one.
template <typename Label>
ir::Value* externalConstant(NodeProto& n, ir::Graph& graph, const std::unordered_map<std::string, ir::Value*>& byName,
                            ExternalFiles& files, const Label& label) {
  if (n.op_type() != "Constant" || !(n.domain().empty() || n.domain() == "ai.onnx") || n.output_size() != 1 ||
      n.output(0).empty() || byName.count(n.output(0)) || n.attribute_size() != 1)
    return nullptr;
  AttributeProto& a = *n.mutable_attribute(0);
  if (a.name() != "value" || !a.has_t() || a.t().data_location() != onnx::TensorProto::EXTERNAL) return nullptr;
  auto t = std::make_unique<onnx::TensorProto>(std::move(*a.mutable_t()));
  t->set_name(n.output(0));
  const ir::FileBytes bytes = files.resolve(*t, fmt::format("node '{}' (Constant)", label()));
  ir::Value* v = graph.addValue(n.output(0));
  graph.setInitializer(v, std::move(t), bytes);
  return v;
}

/// Take every element out of `field`, owned at once: an exception part-way leaks nothing.
template <typename T>
std::vector<std::unique_ptr<T>> extractAll(google::protobuf::RepeatedPtrField<T>* field) {
  std::vector<T*> raw(static_cast<size_t>(field->size()));
  if (!raw.empty()) field->ExtractSubrange(0, field->size(), raw.data());
  return {raw.begin(), raw.end()};
}

}  // namespace

ir::Model importModel(InputModel input, const std::string& path) {
  ir::Model model;
  model.path = path;
  model.shell = std::move(input.proto);
  GraphProto* g = model.shell.mutable_graph();
  ir::Graph& graph = model.graph;
  auto bad = [&](const std::string& what) { return Error(ExitCode::BadInput, fmt::format("{}: {}", path, what)); };

  std::unordered_map<std::string, ir::Value*> byName;
  byName.reserve(static_cast<size_t>(g->node_size() * 2 + g->initializer_size() + g->input_size()));

  std::shared_ptr<ExternalFiles> files = input.files ? input.files : std::make_shared<ExternalFiles>(path);
  model.byte_source = files;
  model.byte_keeper = files;
  auto span = input.spans.begin();
  int initializer = 0;
  for (auto& t : extractAll(g->mutable_initializer())) {
    if (t->name().empty()) throw bad("an initializer has no name");
    ir::FileBytes bytes;
    if (span != input.spans.end() && span->index == initializer) {  // bytes the reader left in the model file
      bytes = files->pointIntoModelFile(*t, span->offset, span->length);
      ++span;
    } else if (t->data_location() == onnx::TensorProto::EXTERNAL) {
      bytes = files->resolve(*t, fmt::format("initializer '{}'", t->name()));
    } else if (std::string why = ir::storageProblem(*t); !why.empty()) {
      throw bad(fmt::format("initializer '{}': {}", t->name(), why));
    }
    ++initializer;
    if (byName.count(t->name())) throw bad(fmt::format("initializer '{}' is defined twice", t->name()));
    ir::Value* v = graph.addValue(t->name());
    byName.emplace(t->name(), v);
    graph.setInitializer(v, std::move(t), bytes);
  }
  for (const auto& s : g->sparse_initializer()) {
    const std::string& name = s.values().name();
    if (s.values().data_location() == onnx::TensorProto::EXTERNAL ||
        s.indices().data_location() == onnx::TensorProto::EXTERNAL)
      throw Error(ExitCode::Unsupported,
                  fmt::format("{}: sparse initializer '{}' is stored as external data, which qconv does not read",
                              path, name));
    if (byName.count(name)) throw bad(fmt::format("sparse initializer '{}' is defined twice", name));
    byName.emplace(name, graph.addOpaqueValue(name));
  }

  std::set<std::string> seenInputs;
  for (auto& info : extractAll(g->mutable_input())) {
    if (info->name().empty()) throw bad("a graph input has no name");
    if (!seenInputs.insert(info->name()).second)
      throw bad(fmt::format("graph input '{}' is listed twice", info->name()));
    ir::Value*& v = byName[info->name()];
    if (!v) v = graph.addValue(info->name());
    graph.markGraphInput(v);
    graph.setInfo(v, std::move(info), false);
  }

  std::vector<std::unique_ptr<NodeProto>> owned = extractAll(g->mutable_node());
  // Names every node defines, to tell "defined later" (out of order) from "never defined".
  std::unordered_set<std::string> producedAnywhere;
  for (const auto& n : owned)
    for (const auto& o : n->output()) producedAnywhere.insert(o);

  for (auto& f : *model.shell.mutable_functions())
    for (auto& fn : *f.mutable_node())
      inlineAttributeTensors(fn, *files, fmt::format("function '{}' node '{}' ({})", f.name(), fn.name(), fn.op_type()));

  int index = 0;
  for (auto& n : owned) {
    const int at = index++;
    auto label = [&] { return nodeLabel(*n, at); };  // for a message: most nodes never need one
    // refused here, not by validate after the whole graph is built: a hostile file of empty
    // nodes (2 bytes each) then costs its parse only (docs/robustness.md, "Memory")
    if (n->op_type().empty()) throw bad(fmt::format("node '{}': no op_type (every ONNX node names its operator)", label()));
    if (ir::Value* v = externalConstant(*n, graph, byName, *files, label)) {  // read as an initializer is
      byName.emplace(v->name(), v);
      n.reset();
      continue;
    }
    if (holdsTensors(*n)) inlineAttributeTensors(*n, *files, fmt::format("node '{}' ({})", label(), n->op_type()));
    auto resolve = [&](const std::string& name, const char* what) -> ir::Value* {
      auto it = byName.find(name);
      if (it != byName.end()) return it->second;
      if (producedAnywhere.count(name))
        throw bad(fmt::format("node '{}' ({}): {} '{}' is produced by a later node; nodes must be in "
                              "topological order (or the graph has a cycle)",
                              label(), n->op_type(), what, name));
      throw bad(fmt::format("node '{}' ({}): {} '{}' is not produced by any node, initializer or graph input",
                            label(), n->op_type(), what, name));
    };
    std::vector<ir::Value*> inputs;
    inputs.reserve(static_cast<size_t>(n->input_size()));
    for (const auto& name : n->input()) inputs.push_back(name.empty() ? nullptr : resolve(name, "input"));
    std::vector<ir::Value*> implicit;
    if (hasSubgraph(*n)) {
      std::set<std::string> free;
      freeNamesOfNodeAttrs(*n, {}, free);
      for (const auto& name : free) implicit.push_back(resolve(name, "subgraph reference"));
    }
    std::vector<ir::Value*> outputs;
    outputs.reserve(static_cast<size_t>(n->output_size()));
    for (const auto& name : n->output()) {
      if (name.empty()) {
        outputs.push_back(nullptr);
        continue;
      }
      if (byName.count(name))
        throw bad(fmt::format("node '{}' ({}): output '{}' is already defined (values must have one producer)",
                              label(), n->op_type(), name));
      ir::Value* v = graph.addValue(name);
      byName.emplace(name, v);
      outputs.push_back(v);
    }
    ir::Node* node = graph.appendNode(std::move(n), inputs, outputs, implicit);
    // A Cast says its output type: record it where value_info did not.
    if (node->is("Cast") && node->output(0) && node->output(0)->elemType() == 0)
      node->output(0)->setElemType(static_cast<int32_t>(node->attrInt("to", 0)));
  }

  for (auto& info : extractAll(g->mutable_output())) {
    auto it = byName.find(info->name());
    if (it == byName.end())
      throw bad(fmt::format("graph output '{}' is not produced by any node, initializer or graph input",
                            info->name()));
    graph.markGraphOutput(it->second);
    graph.setInfo(it->second, std::move(info), false);
  }

  // value_info for known values moves onto them; an entry naming no value of the graph (a
  // producer's leftover) or one already named is dropped: no output describes a tensor it lacks.
  auto* vi = g->mutable_value_info();
  std::vector<std::unique_ptr<onnx::ValueInfoProto>> infos = extractAll(vi);
  for (auto& info : infos) {
    auto it = byName.find(info->name());
    if (it != byName.end() && !it->second->info()) graph.setInfo(it->second, std::move(info), true);
  }
  return model;
}

}  // namespace qconv::io
