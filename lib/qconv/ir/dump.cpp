#include "qconv/ir/dump.h"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <unordered_map>

#include "qconv/ir/tensor.h"

namespace qconv::ir {

namespace {

std::string shapeOf(const Value* v) {
  if (const auto* t = v->initializer()) {
    std::string s = "[";
    for (int i = 0; i < t->dims_size(); ++i) s += (i ? "," : "") + std::to_string(t->dims(i));
    return s + "]";
  }
  return "";
}

std::string attrText(const onnx::AttributeProto& a) {
  switch (a.type()) {
    case onnx::AttributeProto::INT: return std::to_string(a.i());
    case onnx::AttributeProto::FLOAT: return fmt::format("{}", a.f());
    case onnx::AttributeProto::STRING: return "\"" + a.s() + "\"";
    case onnx::AttributeProto::INTS: {
      std::string s = "[";
      for (int i = 0; i < a.ints_size(); ++i) s += (i ? "," : "") + std::to_string(a.ints(i));
      return s + "]";
    }
    case onnx::AttributeProto::GRAPH: return "<graph>";
    case onnx::AttributeProto::GRAPHS: return "<graphs>";
    case onnx::AttributeProto::TENSOR: return "<tensor>";
    default: return "<...>";
  }
}

}  // namespace

void dump(const Graph& graph, std::ostream& os) {
  // Generated values have no final name yet: show them with a "#k" suffix that is unique.
  std::unordered_map<const Value*, std::string> names;
  size_t k = 0;
  for (const auto& v : graph.allValues())
    names[v.get()] = v->hasGeneratedName() ? fmt::format("{}#{}", v->name(), k++) : v->name();
  auto ref = [&](const Value* v) { return v ? "%" + names[v] : std::string("_"); };
  auto typed = [&](const Value* v) {
    return ref(v) + ": " + typeName(v->elemType()) + shapeOf(v);
  };

  for (const Value* v : graph.inputs()) fmt::print(os, "input  {}\n", typed(v));
  for (const Value* v : graph.initializers()) fmt::print(os, "init   {}\n", typed(v));
  for (const auto& n : graph.nodes()) {
    std::string outs, ins, attrs;
    for (const Value* v : n->outputs()) outs += (outs.empty() ? "" : ", ") + (v ? typed(v) : "_");
    for (const Value* v : n->inputs()) ins += (ins.empty() ? "" : ", ") + ref(v);
    for (const auto& a : n->proto().attribute()) attrs += (attrs.empty() ? " {" : ", ") + a.name() + "=" + attrText(a);
    if (!attrs.empty()) attrs += "}";
    const std::string op = n->domain().empty() ? n->opType() : n->domain() + "::" + n->opType();
    fmt::print(os, "{} = {}({}){}    # {}\n", outs, op, ins, attrs, n->label());
  }
  for (const Value* v : graph.outputs()) fmt::print(os, "output {}\n", ref(v));
}

}  // namespace qconv::ir
