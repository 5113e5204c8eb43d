#include "qconv/analysis/representation.h"

#include <fmt/format.h>

#include <optional>
#include <unordered_map>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/quant_slots.h"

namespace qconv::analysis {

namespace {

using onnx::TensorProto;

struct Constant {
  int32_t type = 0;
  std::vector<double> values;
};

std::optional<Constant> constantOf(const ir::Value* v) {
  if (!v || !v->isConstant()) return std::nullopt;
  std::string why;
  Constant c{v->initializer()->data_type(), {}};
  if (ir::isIntegerType(c.type)) {
    auto ints = ir::readInts(*v, &why);
    if (!ints) return std::nullopt;
    c.values.assign(ints->begin(), ints->end());
  } else {
    auto floats = ir::readWidenedFloats(*v, &why);
    if (!floats) return std::nullopt;
    c.values.assign(floats->begin(), floats->end());
  }
  return c;
}

std::string shown(const Constant& c) {
  std::string s = c.values.size() == 1 ? fmt::format("{:.9g}", c.values[0])
                                       : fmt::format("[{:.9g}, ... ({} values)]", c.values[0], c.values.size());
  return fmt::format("{} ({})", s, ir::typeName(c.type));
}

/// nullopt: alike, or not known to differ; else what differs.
std::optional<std::string> differs(const char* what, const ir::Value* a, const ir::Value* b, bool zero_point) {
  if (a == b) return std::nullopt;
  std::optional<Constant> ca = constantOf(a), cb = constantOf(b);
  if ((a && !ca) || (b && !cb)) return std::nullopt;  // a parameter computed at run time
  if (zero_point && !a) ca = Constant{TensorProto::UINT8, std::vector<double>(cb->values.size(), 0.0)};
  if (zero_point && !b) cb = Constant{TensorProto::UINT8, std::vector<double>(ca->values.size(), 0.0)};
  if (ca->type == cb->type && ca->values == cb->values) return std::nullopt;
  return fmt::format("{} {} against {}", what, shown(*ca), shown(*cb));
}

class Classes {  // union-find over values
 public:
  const ir::Value* find(const ir::Value* v) {
    auto it = parent_.find(v);
    if (it == parent_.end() || it->second == v) return v;
    return it->second = find(it->second);
  }
  void join(const ir::Value* a, const ir::Value* b) {
    a = find(a);
    b = find(b);
    if (a != b) parent_[b] = a;
  }

 private:
  std::unordered_map<const ir::Value*, const ir::Value*> parent_;
};

}  // namespace

bool sameRepresentation(const QuantSite& a, const QuantSite& b, std::string* why) {
  if (auto d = differs("scale", a.scale, b.scale, false)) {
    *why = *d;
    return false;
  }
  if (auto d = differs("zero point", a.zero_point, b.zero_point, true)) {
    *why = *d;
    return false;
  }
  const auto count = constantOf(a.scale);
  if (count && count->values.size() > 1 && a.axis >= 0 && b.axis >= 0 && a.axis != b.axis) {
    *why = fmt::format("axis {} against {}", a.axis, b.axis);
    return false;
  }
  return true;
}

std::vector<Disagreement> disagreements(const ir::Graph& graph, const std::vector<QuantSite>& sites) {
  Classes classes;
  for (const ir::Node* n : graph.nodes()) {
    if (!movesData(*n)) continue;
    const ir::Value* first = nullptr;
    auto join = [&](const ir::Value* v) {
      if (!v) return;
      if (first) classes.join(first, v);
      else first = v;
    };
    for (int i : dataInputs(*n)) join(n->input(static_cast<size_t>(i)));
    for (int o : dataOutputs(*n)) join(n->output(static_cast<size_t>(o)));
  }
  std::unordered_map<const ir::Value*, const QuantSite*> firstOf;
  std::vector<Disagreement> out;
  for (const QuantSite& s : sites) {
    auto [it, fresh] = firstOf.emplace(classes.find(s.tensor), &s);
    if (fresh) continue;
    const QuantSite& f = *it->second;
    std::string why;
    if (sameRepresentation(f, s, &why)) continue;
    const std::string via = f.tensor == s.tensor ? "" : fmt::format(" (moved from '{}')", f.tensor->name());
    out.push_back({f, s,
                   fmt::format("'{}'{} has two representations: {} of {} and {} of {}: {}; a change of scale or zero "
                               "point must be an explicit DequantizeLinear -> QuantizeLinear",
                               s.tensor->name(), via, f.role, f.node->label(), s.role, s.node->label(), why)});
  }
  return out;
}

}  // namespace qconv::analysis
