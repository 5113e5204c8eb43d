// lower-contrib-qdq: com.microsoft QuantizeLinear / DequantizeLinear become standard ones.
//
// Before:
//   x -> com.microsoft::QuantizeLinear(s, z[, axis]) -> q -> com.microsoft::DequantizeLinear(s, z[, axis]) -> y
// After:
//   x -> QuantizeLinear(s, z[, axis]) -> q -> DequantizeLinear(s, z[, axis]) -> y
//
// Same formula, same inputs; only the attribute semantics differ: com.microsoft has no default
// axis (absent = per tensor) where the standard op defaults to axis 1. A node is lowered when:
//   1. its quantized type (the zero point's, else the DQ input's, else uint8 for a Q) is int8 or
//      uint8; or int16/uint16 in a model whose default opset is >= 21 (where the standard op
//      takes them); or int32 into a DequantizeLinear whose zero point is absent or 0 (a bias);
//   2. its scale is per tensor, or 1-D per axis with an explicit axis attribute, and per axis
//      needs a default opset >= 13 (the first standard op with `axis`);
//   3. it has no attribute but `axis`.
// A node that fails stays com.microsoft (onnxruntime runs it) and the reason is noted.
#include <fmt/format.h>

#include <algorithm>

#include "qconv/ir/tensor.h"
#include "qconv/pipeline/pass.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

int32_t quantizedType(const ir::Node& n) {
  if (const ir::Value* zp = n.input(2); zp && zp->elemType()) return zp->elemType();
  if (n.opType() == "QuantizeLinear") return onnx::TensorProto::UINT8;
  return n.input(0) ? n.input(0)->elemType() : 0;
}

bool lowerable(const ir::Node& n, int64_t opset, std::string* why) {
  const int32_t t = quantizedType(n);
  const bool wide = t == onnx::TensorProto::INT16 || t == onnx::TensorProto::UINT16;
  if (t == onnx::TensorProto::INT32 && n.opType() == "DequantizeLinear") {  // (1) a bias
    const ir::Value* zp = n.input(2);
    std::string inner;
    auto z = zp && zp->isConstant() ? ir::readInts(*zp->initializer(), &inner) : std::nullopt;
    if (zp && (!z || std::any_of(z->begin(), z->end(), [](int64_t v) { return v != 0; }))) {
      *why = "an int32 DequantizeLinear needs zero point 0";
      return false;
    }
  } else if (!ir::isInt8Like(t) && !(wide && opset >= 21)) {  // (1)
    *why = fmt::format("{} has no standard form at opset {}", ir::typeName(t), opset);
    return false;
  }
  for (const auto& a : n.proto().attribute())  // (3)
    if (a.name() != "axis") {
      *why = fmt::format("attribute '{}' has no standard meaning", a.name());
      return false;
    }
  const ir::Value* s = n.input(1);
  const int64_t count = s && s->isConstant() ? ir::numElements(*s->initializer()).value_or(-1) : -1;
  if (count == 1) return true;  // (2) per tensor, whatever the axis says
  if (!n.attribute("axis")) {
    *why = "scale is not a constant scalar and there is no axis (com.microsoft has no default axis)";
    return false;
  }
  if (opset < 13) {
    *why = fmt::format("per-axis quantization needs opset 13, the model has {}", opset);
    return false;
  }
  return true;
}

}  // namespace

void lowerContribQdq(ir::Model& model, PassContext& ctx) {
  ir::Graph& graph = model.graph;
  const int64_t opset = ir::defaultOpset(model);
  for (ir::Node* n : graph.nodeSnapshot()) {
    if (!graph.isAlive(n) || n->domain() != "com.microsoft" ||
        (n->opType() != "QuantizeLinear" && n->opType() != "DequantizeLinear"))
      continue;
    std::string why;
    if (!lowerable(*n, opset, &why)) {
      ctx.keep(*n, "stays com.microsoft: " + why);
      continue;
    }
    ir::Node* standard = graph.createNode(n->opType(), "", n->inputs(), 1, n);
    standard->mutableProto().set_name(n->name());
    const ir::Value* s = n->input(1);
    const bool perTensor = s && s->isConstant() && ir::numElements(*s->initializer()).value_or(-1) == 1;
    if (const auto* axis = n->attribute("axis"); axis && !perTensor) *standard->mutableProto().add_attribute() = *axis;
    ir::Value* out = n->output(0);
    if (out->elemType() == 0 && n->opType() == "QuantizeLinear") out->setElemType(quantizedType(*n));
    graph.takeOutput(standard, 0, out);
    graph.destroyNode(n);
    ctx.count("com.microsoft " + standard->opType() + " lowered");
  }
}

}  // namespace qconv
