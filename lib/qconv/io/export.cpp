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

void collectSubgraphNames(const onnx::GraphProto& g, std::unordered_set<std::string>& names) {
  for (const auto& i : g.input()) names.insert(i.name());
  for (const auto& t : g.initializer()) names.insert(t.name());
  for (const auto& n : g.node()) {
    for (const auto& o : n.output()) names.insert(o);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collectSubgraphNames(a.g(), names);
      for (const auto& sg : a.graphs()) collectSubgraphNames(sg, names);
    }
  }
}

/// Minimum default-domain opset of the ops qconv creates.
int64_t minOpsetFor(const ir::Node& n) {
  if (!n.domain().empty()) return 0;
  if (n.opType() == "QLinearConv" || n.opType() == "QLinearMatMul") return 10;
  if ((n.opType() == "QuantizeLinear" || n.opType() == "DequantizeLinear") && n.attribute("axis")) return 13;
  return 0;
}

/// Give every generated value a name no other value (nor any subgraph) uses.
void assignNames(ir::Model& model) {
  ir::Graph& graph = model.graph;
  std::unordered_set<std::string> taken;
  for (const auto& v : graph.allValues())
    if (!graph.isDropped(v.get()) && !v->hasGeneratedName()) taken.insert(v->name());
  for (const auto& n : graph.nodes())
    for (const auto& a : n->proto().attribute()) {
      if (a.has_g()) collectSubgraphNames(a.g(), taken);
      for (const auto& sg : a.graphs()) collectSubgraphNames(sg, taken);
    }
  std::unordered_set<std::string> nodeNames;  // node names: a namespace of their own
  for (const auto& n : graph.nodes())
    if (!n->hasGeneratedName() && !n->name().empty()) nodeNames.insert(n->name());
  std::map<std::string, int> nodeCounters;
  for (const auto& n : graph.nodes()) {
    if (!n->hasGeneratedName()) continue;
    std::string name = n->name();
    int& k = nodeCounters[n->name()];
    while (nodeNames.count(name)) name = fmt::format("{}_{}", n->name(), ++k);
    nodeNames.insert(name);
    graph.setName(n.get(), std::move(name));
  }
  std::map<std::string, int> counters;
  for (const auto& v : graph.allValues()) {
    if (graph.isDropped(v.get()) || !v->hasGeneratedName()) continue;
    std::string name = v->name();
    int& k = counters[v->name()];
    while (taken.count(name)) name = fmt::format("{}_{}", v->name(), ++k);
    taken.insert(name);
    graph.setName(v.get(), std::move(name));
  }
}

}  // namespace

onnx::ModelProto exportModel(ir::Model& model, FileBacked* file_backed) {
  assignNames(model);
  ir::Graph& graph = model.graph;
  onnx::ModelProto out = std::move(model.shell);
  onnx::GraphProto* g = out.mutable_graph();

  int64_t needOpset = 0;
  std::set<std::string> domains;
  for (const auto& n : graph.nodes()) {
    needOpset = std::max(needOpset, minOpsetFor(*n));
    domains.insert(n->domain());
    onnx::NodeProto* p = g->add_node();
    *p = std::move(n->mutableProto());
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
  std::unordered_map<const ir::Value*, const onnx::ValueInfoProto*> listed;
  auto addInfo = [&](google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* field, ir::Value* v) {
    if (auto it = listed.find(v); it != listed.end()) {
      *field->Add() = *it->second;
      return;
    }
    auto info = graph.releaseInfo(v);
    if (!info) info = std::make_unique<onnx::ValueInfoProto>();
    info->set_name(v->name());
    // a pass that changed a value's type (e.g. an integer accumulator rebuilt as float) wins
    // over the type the input model declared
    if (v->elemType() != 0 && info->type().has_tensor_type() && info->type().tensor_type().elem_type() != v->elemType())
      info->mutable_type()->mutable_tensor_type()->set_elem_type(v->elemType());
    listed.emplace(v, info.get());
    field->AddAllocated(info.release());
  };
  for (ir::Value* v : graph.inputs()) addInfo(g->mutable_input(), v);
  for (ir::Value* v : graph.outputs()) addInfo(g->mutable_output(), v);
  for (ir::Value* v : graph.valueInfoOrder())
    if (!graph.isDropped(v) && v->info()) addInfo(g->mutable_value_info(), v);

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
  out.set_ir_version(std::max(out.ir_version(), minIrVersionForOpset(defaultOpset)));
  return out;
}

}  // namespace qconv::io
