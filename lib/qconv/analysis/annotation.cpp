#include "qconv/analysis/annotation.h"

#include <fmt/format.h>

#include <unordered_map>
#include <unordered_set>

#include "qconv/analysis/representation.h"

namespace qconv::analysis {

std::vector<AnnotationProblem> annotationProblems(const ir::Model& model, const std::vector<QuantSite>& sites) {
  std::vector<AnnotationProblem> out;
  const auto& annotations = model.shell.graph().quantization_annotation();
  if (annotations.empty()) return out;
  std::unordered_map<std::string, const ir::Value*> byName;
  for (const auto& v : model.graph.allValues())
    if (!model.graph.isDropped(v.get())) byName.emplace(v->name(), v.get());
  std::unordered_map<const ir::Value*, const QuantSite*> firstSite;
  for (const QuantSite& s : sites) firstSite.emplace(s.tensor, &s);
  const std::string where = "quantization_annotation";
  for (const onnx::TensorAnnotation& a : annotations) {
    auto t = byName.find(a.tensor_name());
    if (t == byName.end()) {
      out.push_back({where, a.tensor_name(), fmt::format("annotates '{}', which no node, initializer or graph input "
                                                         "of the graph is", a.tensor_name())});
      continue;
    }
    const ir::Value* scale = nullptr;
    const ir::Value* zp = nullptr;
    bool named = true;
    for (const auto& e : a.quant_parameter_tensor_names()) {
      if (e.key() != kScaleKey && e.key() != kZeroPointKey) {
        out.push_back({where, a.tensor_name(),
                       fmt::format("key '{}' is not one ONNX defines ({} or {})", e.key(), kScaleKey, kZeroPointKey)});
        continue;
      }
      auto p = byName.find(e.value());
      if (p == byName.end()) {
        out.push_back({where, a.tensor_name(), fmt::format("{} '{}' names no tensor of the graph", e.key(), e.value())});
        named = false;
        continue;
      }
      (e.key() == kScaleKey ? scale : zp) = p->second;
    }
    if (!scale) {
      if (named) out.push_back({where, a.tensor_name(), fmt::format("has no {}", kScaleKey)});
      continue;
    }
    auto site = firstSite.find(t->second);
    if (site == firstSite.end() || !named) continue;  // a tensor no op quantizes: nothing to compare
    QuantSite claimed = *site->second;
    claimed.scale = scale;
    claimed.zero_point = zp;
    std::string why;
    if (!sameRepresentation(claimed, *site->second, &why))
      out.push_back({site->second->node->label(), a.tensor_name(),
                     fmt::format("the annotation ({} '{}', {} '{}') disagrees with {}'s {}: {}", kScaleKey,
                                 scale->name(), kZeroPointKey, zp ? zp->name() : "absent", site->second->node->label(),
                                 site->second->role, why)});
  }
  return out;
}

std::vector<TensorQuant> quantizedTensors(const ir::Graph& graph) {
  std::vector<TensorQuant> out;
  std::unordered_set<const ir::Value*> seen;
  for (const ir::Node* n : graph.nodes())
    for (const QuantSite& s : quantSites(*n))
      if (seen.insert(s.tensor).second) out.push_back({s.tensor, s.scale, s.zero_point});
  return out;
}

namespace {

void setParameters(onnx::TensorAnnotation* a, const TensorQuant& t) {
  a->clear_quant_parameter_tensor_names();
  a->set_tensor_name(t.tensor->name());
  auto* s = a->add_quant_parameter_tensor_names();
  s->set_key(kScaleKey);
  s->set_value(t.scale->name());
  if (t.zero_point) {
    auto* z = a->add_quant_parameter_tensor_names();
    z->set_key(kZeroPointKey);
    z->set_value(t.zero_point->name());
  }
}

}  // namespace

void writeAnnotations(onnx::ModelProto& out, const std::vector<TensorQuant>& tensors) {
  auto* list = out.mutable_graph()->mutable_quantization_annotation();
  list->Clear();
  for (const TensorQuant& t : tensors) setParameters(list->Add(), t);
  if (!tensors.empty() && out.ir_version() < 5) out.set_ir_version(5);  // TensorAnnotation came with IR 5
}

void refreshAnnotations(onnx::ModelProto& out, const std::vector<TensorQuant>& tensors) {
  const onnx::GraphProto& g = out.graph();
  std::unordered_set<std::string> live;
  for (const auto& t : g.initializer()) live.insert(t.name());
  for (const auto& i : g.input()) live.insert(i.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) live.insert(o);
  std::unordered_map<std::string, const TensorQuant*> now;
  for (const TensorQuant& t : tensors) now.emplace(t.tensor->name(), &t);
  auto* list = out.mutable_graph()->mutable_quantization_annotation();
  google::protobuf::RepeatedPtrField<onnx::TensorAnnotation> kept;
  for (onnx::TensorAnnotation& a : *list) {
    if (auto it = now.find(a.tensor_name()); it != now.end()) {
      setParameters(&a, *it->second);
    } else {
      bool whole = live.count(a.tensor_name()) > 0;
      for (const auto& e : a.quant_parameter_tensor_names()) whole = whole && live.count(e.value());
      if (!whole) continue;
    }
    *kept.Add() = std::move(a);
  }
  list->Swap(&kept);
}

}  // namespace qconv::analysis
