#include "qconv/passes/common/element_types.h"

#include <onnx/defs/schema.h>

#include <string>

namespace qconv {

namespace {

/// The one type a type variable or a fixed type string of `schema` allows, or 0.
int32_t onlyType(const onnx::OpSchema& schema, const std::string& type_str) {
  for (const auto& c : schema.typeConstraintParams())
    if (c.type_param_str == type_str && c.allowed_type_strs.size() == 1) {
      const std::string& t = c.allowed_type_strs.front();
      if (t.rfind("tensor(", 0) != 0) return 0;
      onnx::TypeProto proto = onnx::Utils::DataTypeUtils::ToTypeProto(&t);
      return proto.tensor_type().elem_type();
    }
  if (type_str.rfind("tensor(", 0) == 0) {  // a fixed type, e.g. Shape's tensor(int64)
    onnx::TypeProto proto = onnx::Utils::DataTypeUtils::ToTypeProto(&type_str);
    return proto.tensor_type().elem_type();
  }
  return 0;
}

/// The formal parameter of actual slot `i`: the last one when it is variadic.
const onnx::OpSchema::FormalParameter* formal(const std::vector<onnx::OpSchema::FormalParameter>& params, size_t i) {
  if (i < params.size()) return &params[i];
  if (!params.empty() && params.back().GetOption() == onnx::OpSchema::Variadic) return &params.back();
  return nullptr;
}

int32_t attributeType(const ir::Node& n, int32_t fallback) {
  if (n.is("Cast")) return static_cast<int32_t>(n.attrInt("to", 0));
  if (n.is("QuantizeLinear") || n.is("DequantizeLinear")) return static_cast<int32_t>(n.attrInt("output_dtype", 0));
  if (n.is("Constant") || n.is("ConstantOfShape")) {
    if (const onnx::AttributeProto* a = n.attribute("value")) return a->has_t() ? a->t().data_type() : 0;
    if (n.is("ConstantOfShape")) return onnx::TensorProto::FLOAT;
    for (const char* name : {"value_float", "value_floats"})
      if (n.attribute(name)) return onnx::TensorProto::FLOAT;
    for (const char* name : {"value_int", "value_ints"})
      if (n.attribute(name)) return onnx::TensorProto::INT64;
  }
  return fallback;
}

}  // namespace

ElementTypes::ElementTypes(const ir::Graph& graph, int64_t opset) {
  for (const ir::Node* n : graph.nodes()) {
    if (!n->domain().empty() && n->domain() != "ai.onnx") continue;
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(n->opType(), static_cast<int>(opset), "");
    if (!schema) continue;
    for (size_t o = 0; o < n->outputs().size(); ++o) {
      const ir::Value* out = n->outputs()[o];
      if (!out || out->elemType()) continue;
      int32_t type = attributeType(*n, 0);
      if (n->is("QuantizeLinear") && !type && o == 0) {  // no output_dtype: its zero point's type, else uint8
        type = n->inputs().size() > 2 && n->input(2) ? of(n->input(2)) : onnx::TensorProto::UINT8;
      }
      if (n->is("DequantizeLinear") && !type && o == 0 && n->input(1))  // no output_dtype: its scale's type (every
        type = of(n->input(1));  // version; from opset 23 the schema gives y a type variable of its own)
      const onnx::OpSchema::FormalParameter* param = formal(schema->outputs(), o);
      if (!type && param) {
        const std::string& var = param->GetTypeStr();
        for (size_t i = 0; i < n->inputs().size() && !type; ++i) {
          const onnx::OpSchema::FormalParameter* in = formal(schema->inputs(), i);
          if (in && in->GetTypeStr() == var && n->input(i)) type = of(n->input(i));
        }
        if (!type) type = onlyType(*schema, var);
      }
      if (type) inferred_[out] = type;
    }
  }
}

int32_t ElementTypes::of(const ir::Value* v) const {
  if (!v) return 0;
  if (v->elemType()) return v->elemType();
  const auto it = inferred_.find(v);
  return it == inferred_.end() ? 0 : it->second;
}

}  // namespace qconv
