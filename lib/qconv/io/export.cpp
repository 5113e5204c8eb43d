// emit: IR -> ModelProto.
#include <algorithm>
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

/// Names generated names could take: a base (a pass's hint) and the base with "_<k>" after it.
/// Only existing names of that form can collide with them, so only those are collected: a graph
/// of a million values and a few generated names costs a scan, not a million-entry set.
class Candidates {
 public:
  void addBase(const std::string& base) { bases_.insert(base); }
  bool empty() const { return bases_.empty(); }
  /// Whether `name` is a base or a base followed by "_<digits>".
  bool mayCollide(const std::string& name) const {
    if (bases_.count(name)) return true;
    const size_t us = name.find_last_of('_');
    if (us == std::string::npos || us + 1 == name.size()) return false;
    for (size_t i = us + 1; i < name.size(); ++i)
      if (name[i] < '0' || name[i] > '9') return false;
    return bases_.count(name.substr(0, us)) > 0;
  }

 private:
  std::unordered_set<std::string> bases_;
};

void collectSubgraphNames(const onnx::GraphProto& g, const Candidates& c, std::unordered_set<std::string>& names) {
  auto note = [&](const std::string& n) {
    if (c.mayCollide(n)) names.insert(n);
  };
  for (const auto& i : g.input()) note(i.name());
  for (const auto& t : g.initializer()) note(t.name());
  for (const auto& n : g.node()) {
    for (const auto& o : n.output()) note(o);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collectSubgraphNames(a.g(), c, names);
      for (const auto& sg : a.graphs()) collectSubgraphNames(sg, c, names);
    }
  }
}

/// Minimum default-domain opset of the ops qconv creates.
int64_t minOpsetFor(const ir::Node& n) {
  if (!n.domain().empty()) return 0;
  if (n.opIs("QLinearConv") || n.opIs("QLinearMatMul")) return 10;
  if ((n.opIs("QuantizeLinear") || n.opIs("DequantizeLinear")) && n.attribute("axis")) return 13;
  return 0;
}

/// Name each generated item (node or value) its hint, else hint_1, hint_2, ...: the first not
/// in `taken` (the existing names mayCollide kept, and the names given before it).
template <typename Item>
void uniquify(ir::Graph& graph, const std::vector<Item*>& generated, std::unordered_set<std::string>& taken) {
  std::unordered_map<std::string, int> counters;
  for (Item* item : generated) {
    const std::string& hint = item->name();
    std::string name = hint;
    int& k = counters[hint];
    while (taken.count(name)) name = fmt::format("{}_{}", hint, ++k);
    taken.insert(name);
    graph.setName(item, std::move(name));
  }
}

/// Give every generated node and value a name no other node (nor value, nor any subgraph
/// value) uses. Node names are a namespace of their own.
void assignNames(ir::Model& model) {
  ir::Graph& graph = model.graph;
  std::vector<ir::Node*> nodes;
  Candidates nodeBases;
  for (const auto& n : graph.nodes())
    if (n->hasGeneratedName()) {
      nodes.push_back(n);
      nodeBases.addBase(n->name());
    }
  if (!nodes.empty()) {
    std::unordered_set<std::string> taken;
    for (const auto& n : graph.nodes())
      if (!n->hasGeneratedName() && !n->name().empty() && nodeBases.mayCollide(n->name())) taken.insert(n->name());
    uniquify(graph, nodes, taken);
  }

  std::vector<ir::Value*> values;
  Candidates valueBases;
  for (const auto& v : graph.allValues())
    if (!graph.isDropped(v.get()) && v->hasGeneratedName()) {
      values.push_back(v.get());
      valueBases.addBase(v->name());
    }
  if (values.empty()) return;
  std::unordered_set<std::string> taken;
  for (const auto& v : graph.allValues())
    if (!graph.isDropped(v.get()) && !v->hasGeneratedName() && valueBases.mayCollide(v->name())) taken.insert(v->name());
  for (const auto& n : graph.nodes())
    for (const auto& a : n->proto().attribute()) {
      if (a.has_g()) collectSubgraphNames(a.g(), valueBases, taken);
      for (const auto& sg : a.graphs()) collectSubgraphNames(sg, valueBases, taken);
    }
  uniquify(graph, values, taken);
}

}  // namespace

onnx::ModelProto exportModel(ir::Model& model, FileBacked* file_backed, ValueTypes* untyped) {
  assignNames(model);
  ir::Graph& graph = model.graph;
  onnx::ModelProto out = std::move(model.shell);
  onnx::GraphProto* g = out.mutable_graph();

  int64_t needOpset = 0;
  std::set<std::string> domains;
  const std::string* lastDomain = nullptr;
  g->mutable_node()->Reserve(static_cast<int>(graph.nodes().size()));
  for (const auto& n : graph.nodes()) {
    needOpset = std::max(needOpset, minOpsetFor(*n));
    if (!lastDomain || n->domain() != *lastDomain) lastDomain = &*domains.insert(n->domain()).first;
    onnx::NodeProto* p = graph.releaseProto(n).release();
    g->mutable_node()->AddAllocated(p);
    size_t count = n->inputs().size();
    while (count > 0 && !n->inputs()[count - 1]) --count;  // trailing optional inputs
    for (size_t i = 0; i < count; ++i) p->add_input(n->inputs()[i] ? n->inputs()[i]->name() : std::string());
    for (ir::Value* o : n->outputs()) p->add_output(o ? o->name() : std::string());
  }
  for (ir::Value* v : graph.initializers()) {
    auto t = graph.releaseInitializer(v);
    t->set_name(v->name());
    if (const ir::FileBytes& bytes = v->fileBytes()) {
      const auto* files = dynamic_cast<const ExternalFiles*>(bytes.source);
      if (file_backed && files) {
        file_backed->emplace(t.get(), files->range(bytes));
      } else {  // the caller wants every byte in the model (or the source is not a file io opened)
        t->set_raw_data(ir::loadBytes(bytes));
        t->clear_external_data();
        t->clear_data_location();
      }
    }
    g->mutable_initializer()->AddAllocated(t.release());
  }
  // A value listed more than once (an input that is also an output, an output listed twice)
  // gets a copy of its first entry: its type too, which the checker requires of each.
  auto addInfo = [&](google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* field, ir::Value* v) {
    if (const onnx::ValueInfoProto* first = graph.listedAs(v)) {
      *field->Add() = *first;
      return;
    }
    auto info = graph.releaseInfo(v);
    if (!info) info = std::make_unique<onnx::ValueInfoProto>();
    info->set_name(v->name());
    // a pass that changed a value's type (e.g. an integer accumulator rebuilt as float) wins
    // over the type the input model declared
    if (v->elemType() != 0 && info->type().has_tensor_type() && info->type().tensor_type().elem_type() != v->elemType())
      info->mutable_type()->mutable_tensor_type()->set_elem_type(v->elemType());
    graph.setListedAs(v, info.get());
    field->AddAllocated(info.release());
  };
  for (ir::Value* v : graph.inputs()) addInfo(g->mutable_input(), v);
  for (ir::Value* v : graph.outputs()) addInfo(g->mutable_output(), v);
  for (ir::Value* v : graph.valueInfoOrder())
    if (!graph.isDropped(v) && v->info()) addInfo(g->mutable_value_info(), v);
  if (untyped)
    for (const auto& n : graph.nodes())
      for (ir::Value* v : n->outputs())
        if (v && !graph.listedAs(v) && !v->isGraphOutput()) untyped->emplace_back(v->name(), v->elemType());

  // Quantization annotations of tensors that no longer exist would be stale.
  if (g->quantization_annotation_size() > 0) {
    std::unordered_set<std::string> live;
    for (const auto& v : graph.allValues())
      if (!graph.isDropped(v.get())) live.insert(v->name());
    auto* qa = g->mutable_quantization_annotation();
    qa->erase(std::remove_if(qa->begin(), qa->end(),
                             [&](const onnx::TensorAnnotation& a) { return !live.count(a.tensor_name()); }),
              qa->end());
  }

  // opset_import: every node domain present, the default domain at least what we emitted.
  std::map<std::string, onnx::OperatorSetIdProto*> imports;
  for (auto& op : *out.mutable_opset_import()) {
    if (op.domain() == "ai.onnx") op.set_domain("");
    imports[op.domain()] = &op;
  }
  for (const auto& d : domains) {
    if (imports.count(d)) continue;
    auto* op = out.add_opset_import();
    op->set_domain(d);
    op->set_version(d.empty() ? std::max<int64_t>(needOpset, 1) : 1);
    imports[d] = op;
  }
  if (imports.count("") && imports[""]->version() < needOpset) imports[""]->set_version(needOpset);
  const int64_t defaultOpset = imports.count("") ? imports[""]->version() : 0;
  // IR 3 brought opset_import: a model without one (IR 1 or 2, opset 1 implied) keeps its version
  if (out.opset_import_size() > 0) out.set_ir_version(std::max(out.ir_version(), minIrVersionForOpset(defaultOpset)));
  return out;
}

}  // namespace qconv::io
