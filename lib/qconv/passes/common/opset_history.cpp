// The ai.onnx operator history (opset_history.inc) and what it says about a node moving between
// two opsets: the conditions are in opset_history.h, the crossings of changed versions in
// opset_crossings.h.
#include "qconv/passes/common/opset_history.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <sstream>
#include <vector>

#include "qconv/diag.h"
#include "qconv/ir/tensor.h"
#include "qconv/passes/common/opset_crossings.h"
#include "qconv/quant.h"

namespace qconv {

namespace {


struct OpVersion {
  std::string_view op;  // compared by length first: validate asks for every node
  int64_t since;
  const char* changed;   // non-empty: the signature changed beyond additions
  int inputs_before;     // >= 0: this version added inputs after these
  int outputs_before;    // >= 0: this version added outputs after these
  const char* attributes;  // comma-separated optional attributes this version added
  const char* types;       // comma-separated element types only one of the two versions takes
};

const OpVersion kHistory[] = {
#define QCONV_OP_VERSION(OP, SINCE, CHANGED, IN, OUT, ATTRS, TYPES) {OP, SINCE, CHANGED, IN, OUT, ATTRS, TYPES},
#include "qconv/passes/common/opset_history.inc"
#undef QCONV_OP_VERSION
};

std::vector<std::string> split(const char* list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

/// "float", "int8", "float8e4m3fn"...: the schema spelling; empty when unknown.
std::string typeSpelling(int32_t elem_type) {
  if (!elem_type) return "";
  if (!onnx::TensorProto_DataType_IsValid(elem_type)) {  // newer than ONNX 1.12's enum: int4, float4e2m1, int2...
    const std::string name = ir::typeName(elem_type);
    return name == "other type" ? "" : name;
  }
  std::string s = onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(elem_type));
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool common(const std::string& type) {
  static const char* const kCommon[] = {"float", "double", "float16", "int8", "uint8", "int16", "uint16",
                                        "int32", "uint32", "int64", "uint64", "bool", "string"};
  return std::any_of(std::begin(kCommon), std::end(kCommon), [&](const char* c) { return type == c; });
}

Crossing crossing(const OpVersion& v) { return {v.op, v.since, v.changed}; }

/// Why `n` (declared at `declared`) cannot move across version `v` of its operator, or empty.
std::string blocker(const ir::Node& n, const OpVersion& v, const ElementTypes& known, int64_t declared) {
  if (*v.changed) {
    const std::optional<std::string> why = crossingBlocker(n, crossing(v), declared);
    if (!why) return v.changed;
    if (!why->empty()) return *why;
  }
  auto used = [](const std::vector<ir::Value*>& vals) {
    size_t k = vals.size();
    while (k && !vals[k - 1]) --k;
    return k;
  };
  if (v.inputs_before >= 0 && used(n.inputs()) > static_cast<size_t>(v.inputs_before))
    return fmt::format("the node uses input {}, which it added", v.inputs_before);
  if (v.outputs_before >= 0 && used(n.outputs()) > static_cast<size_t>(v.outputs_before))
    return fmt::format("the node uses output {}, which it added", v.outputs_before);
  for (const auto& a : split(v.attributes))
    if (n.attribute(a)) return fmt::format("the node sets attribute {}, which it added", a);
  const std::vector<std::string> types = split(v.types);
  if (types.empty()) return "";
  std::vector<const ir::Value*> values(n.inputs().begin(), n.inputs().end());
  values.insert(values.end(), n.outputs().begin(), n.outputs().end());
  for (const ir::Value* val : values) {
    if (!val) continue;
    const std::string t = typeSpelling(known.of(val));
    if (t.empty()) {
      if (std::any_of(types.begin(), types.end(), common))
        return fmt::format("the element type of '{}' is neither declared nor inferable from what produces it, and "
                           "this version changed the accepted types ({})",
                           val->name(), v.types);
    } else if (std::find(types.begin(), types.end(), t) != types.end()) {
      return fmt::format("'{}' is {}, accepted on one side only", val->name(), t);
    }
  }
  return "";
}


}  // namespace

std::string opsetBlocker(const ir::Node& n, int64_t lo, int64_t hi, const ElementTypes& types, int64_t declared) {
  for (const auto& a : n.proto().attribute())
    if (a.has_g() || a.graphs_size()) return "its subgraph's nodes are not checked (qconv moves no subgraph to another opset)";
  // raising the opset (hi above the declared one), an op younger than the declared opset is one a
  // pass wrote at its first version for the new opset (approximate-gelu's Gelu): only versions
  // after that one are in its way
  int64_t first = std::numeric_limits<int64_t>::max();
  for (const auto& v : kHistory)
    if (n.opType() == v.op) first = std::min<int64_t>(first, v.since);
  if (hi > declared && first > lo && first <= hi) lo = first;
  bool exists_at_lo = false, known = false;
  for (const auto& v : kHistory) {
    if (n.opType() != v.op) continue;
    known = true;
    if (v.since <= lo) exists_at_lo = true;
    if (v.since > lo && v.since <= hi)
      if (std::string why = blocker(n, v, types, declared); !why.empty()) return fmt::format("{} version {} is in the way: {}", v.op, v.since, why);
  }
  if (!known) return fmt::format("{} is not an ai.onnx operator qconv knows the history of", n.opType());
  if (!exists_at_lo) return fmt::format("{} does not exist at opset {}", n.opType(), lo);
  return "";
}


std::string opsetRaiseBlocker(const ir::Model& model, int64_t from, int64_t to) {
  if (from >= to) return "";
  const ElementTypes known(model.graph, from);
  for (const ir::Node* n : model.graph.nodes())
    if (n->domain().empty())
      if (std::string why = opsetBlocker(*n, from, to, known, from); !why.empty())
        return fmt::format("node '{}' ({}) does not keep its meaning from opset {} to {}: {}", n->label(), n->opType(), from,
                           to, why);
  return "";
}


void declareOpset(ir::Model& model, int64_t to) {
  const int64_t from = ir::defaultOpset(model);
  const int64_t lo = std::min(from, to), hi = std::max(from, to);
  for (ir::Node* n : model.graph.nodes())
    if (n->domain().empty())
      for (const auto& v : kHistory)
        if (*v.changed && v.op == n->opType() && v.since > lo && v.since <= hi)
          rewriteCrossing(model.graph, *n, crossing(v), from);
  for (auto& op : *model.shell.mutable_opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") op.set_version(to);
}

void checkOpsetFlag(int64_t target) {
  const int64_t newest = newestKnownOpset();
  if (target < 1 || target > newest)
    throw Error(ExitCode::Usage, fmt::format("--opset {}: qconv knows the ai.onnx operators of opsets 1 to {}", target, newest));
}


int64_t opsetFloor(const ir::Model& model) {
  for (const ir::Node* n : model.graph.nodes()) {
    if (!isQuantize(*n) && !isDequantize(*n)) continue;
    const ir::Value* scale = n->input(1);
    if (n->attribute("axis") || (scale && scale->isConstant() && ir::numElements(*scale->initializer()).value_or(1) > 1))
      return 13;
  }
  return 1;
}

int64_t targetOpsetMin(const TargetProfile& t, const ir::Model& model) {
  int64_t floor = std::max(t.opset_min, opsetFloor(model));
  if (!t.op_opset_min.empty())
    for (const ir::Node* n : model.graph.nodes())
      if (n->domain().empty())
        for (const auto& [op, opset] : t.op_opset_min)
          if (n->opIs(op)) floor = std::max(floor, opset);
  return floor;
}

int64_t newestKnownOpset() {
  int64_t newest = 0;
  for (const auto& v : kHistory) newest = std::max(newest, v.since);
  return newest;
}

bool isKnownOperator(const std::string& op, int64_t opset) {
  return std::any_of(std::begin(kHistory), std::end(kHistory),
                     [&](const OpVersion& v) { return op == v.op && v.since <= opset; });
}

}  // namespace qconv
