// Small helpers for the fusion actions (rewrites that never refuse).
#pragma once

#include <algorithm>

#include <optional>
#include <string>
#include <vector>

#include "qconv/diag.h"

#include "qconv/ir/ir.h"
#include "qconv/ir/tensor.h"
#include "qconv/quant.h"

namespace qconv {

/// `zp` itself, or (when the Q/DQ omitted it) a new scalar 0 of `type`: QLinear ops require it.
inline ir::Value* zeroPointOr(ir::Graph& graph, ir::Value* zp, int32_t type, const std::string& hint) {
  return zp ? zp : graph.addInitializer(hint, ir::makeIntTensor(type, {}, {0}));
}

/// One row of an operand layout: the new node's input comes from input `slot` of the group's
/// source node `from` (an index into the action's list of sources). A zero point the source
/// omits becomes a new scalar 0 of that source's quantized type (QLinear ops require it).
struct OperandRow {
  const char* name;
  int from;
  size_t slot;
  bool zero_point;
};

/// The new node's inputs, row by row.
template <size_t N>
std::vector<ir::Value*> gatherOperands(ir::Graph& graph, const OperandRow (&rows)[N], const std::vector<ir::Node*>& from,
                                       const std::vector<int32_t>& types) {
  std::vector<ir::Value*> in;
  for (const OperandRow& r : rows) {
    ir::Value* v = from[static_cast<size_t>(r.from)]->input(r.slot);
    in.push_back(r.zero_point ? zeroPointOr(graph, v, types[static_cast<size_t>(r.from)], r.name) : v);
  }
  return in;
}

/// For each (slot, params) whose scale is float16/bfloat16: input `slot` of `n` becomes a float
/// initializer of the same values (params.scale holds them widened, exactly) and shape.
inline void floatScales(ir::Graph& graph, ir::Node& n, const std::vector<std::pair<size_t, const ConstQuant*>>& scales) {
  for (const auto& [slot, params] : scales) {
    if (params->scale_type == onnx::TensorProto::FLOAT) continue;
    const ir::Value* old = n.input(slot);
    std::vector<int64_t> dims = ir::dimsOf(*old->initializer());
    graph.setInput(&n, slot, graph.addInitializer(old->name() + "_float", ir::makeFloatTensor(dims, params->scale)));
  }
}

/// Copy the attributes, name and doc_string of `from` onto `to`.
inline void inheritAttributes(ir::Node& to, const ir::Node& from) {
  to.mutableProto().mutable_attribute()->CopyFrom(from.proto().attribute());
  to.mutableProto().set_name(from.proto().name());
  if (!from.proto().doc_string().empty()) to.mutableProto().set_doc_string(from.proto().doc_string());
}

/// Add the INT attribute `name` = `value` to `n` (axis, Cast's to, ...).
inline void setIntAttribute(ir::Node& n, const char* name, int64_t value) {
  auto* a = n.mutableProto().add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

/// Remove the attribute `name` from `n`, if it has it (a per-tensor Q/DQ's axis, ...).
inline void removeAttribute(ir::Node& n, const char* name) {
  auto* attrs = n.mutableProto().mutable_attribute();
  attrs->erase(std::remove_if(attrs->begin(), attrs->end(), [name](const auto& a) { return a.name() == name; }), attrs->end());
}

/// Add the INTS attribute `name` = `values` to `n` (perm, axes, ...).
inline void setIntsAttribute(ir::Node& n, const char* name, const std::vector<int64_t>& values) {
  auto* a = n.mutableProto().add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}

/// Insert before `before`: QuantizeLinear(x, s, zp[, axis]) with output type `type`, then
/// Clip(lo:T, hi:T) when [lo, hi] is narrower than the type. Returns the last node: its output
/// holds the integers. The form every exact narrow-range quantizer lowers to.
inline ir::Node* quantizeToRange(ir::Graph& graph, ir::Node* before, ir::Value* x, ir::Value* s, ir::Value* zp,
                                 int32_t type, std::optional<int64_t> axis, int64_t lo, int64_t hi) {
  ir::Node* q = graph.createNode("QuantizeLinear", "", {x, s, zp}, 1, before);
  if (axis) setIntAttribute(*q, "axis", *axis);
  q->output(0)->setElemType(type);
  if (auto [tmin, tmax] = ir::intRange(type); lo == tmin && hi == tmax) return q;
  ir::Node* clip = graph.createNode("Clip", "", {q->output(0), graph.addInitializer("clip_min", ir::makeIntTensor(type, {}, {lo})),
                                                 graph.addInitializer("clip_max", ir::makeIntTensor(type, {}, {hi}))},
                                    1, before);
  clip->output(0)->setElemType(type);
  return clip;
}

/// Insert before `before`: Cast(v, to=float). The form integers held as floats (Vitis AI's
/// quantizer output, Aidge's float form) take after a QuantizeLinear.
inline ir::Node* castToFloat(ir::Graph& graph, ir::Value* v, ir::Node* before) {
  ir::Node* cast = graph.createNode("Cast", "", {v}, 1, before);
  setIntAttribute(*cast, "to", onnx::TensorProto::FLOAT);
  return cast;
}

/// `replacement` takes over `old`'s single output (its name and readers) and `old`'s node name;
/// `old` goes, and so do the inputs nobody reads any more (e.g. a QONNX bit-width constant).
inline void replaceNode(ir::Graph& graph, ir::Node& old, ir::Node* replacement) {
  QCONV_ASSERT(old.output(0), "replaceNode: {} has no output (the driver offers no such node)", old.label());
  replacement->mutableProto().set_name(old.name());
  graph.takeOutput(replacement, 0, old.output(0));
  std::vector<ir::Value*> inputs = old.inputs();
  graph.destroyNode(&old);
  for (ir::Value* v : inputs) graph.pruneIfDead(v);
}

/// Replace the fake quantizer `n` (float in, float out) with QuantizeLinear(x, s, zp[, axis])
/// [-> Clip(lo, hi)] -> DequantizeLinear(s, zp[, axis]); the DQ takes over n's output.
inline void replaceWithQdq(ir::Graph& graph, ir::Node& n, ir::Value* s, ir::Value* zp, int32_t type, bool per_axis,
                           int64_t axis, int64_t lo, int64_t hi) {
  ir::Node* ints = quantizeToRange(graph, &n, n.input(0), s, zp, type, per_axis ? std::optional<int64_t>(axis) : std::nullopt, lo, hi);
  ir::Node* dq = graph.createNode("DequantizeLinear", "", {ints->output(0), s, zp}, 1, &n);
  if (per_axis) setIntAttribute(*dq, "axis", axis);
  replaceNode(graph, n, dq);
}

}  // namespace qconv
