#include <fmt/format.h>

#include "qconv/passes/common/qdq_select.h"

#include <cmath>
#include <limits>

#include "qconv/ir/tensor.h"

namespace qconv {

bool hasSingleReader(const ir::Value* v) {
  return v && v->uses().size() == 1 && v->uses()[0].index >= 0 && !v->isGraphOutput();
}

std::optional<DequantizedInput> dequantizedInput(const ir::Node& target, size_t slot, const std::string& role,
                                                 std::string* why, bool widen_half) {
  DequantizedInput in;
  in.dq = dequantizeFeeding(target.input(slot));
  if (!in.dq) {
    *why = role + " does not come from a DequantizeLinear";
    return std::nullopt;
  }
  if (const int32_t t = quantizedTypeOf(*in.dq); t && !ir::isInt8Like(t)) {
    *why = fmt::format("{} is {}: QLinear ops take 8-bit integers (int8, uint8) only", role, ir::typeName(t));
    return std::nullopt;
  }
  std::string inner;
  auto q = readConstQuant(*in.dq, &inner, widen_half);
  if (!q) {
    *why = role + " " + inner;
    return std::nullopt;
  }
  if (!ir::isInt8Like(q->elem_type)) {
    *why = fmt::format("{} is {}: QLinear ops take 8-bit integers (int8, uint8) only", role, ir::typeName(q->elem_type));
    return std::nullopt;
  }
  in.params = std::move(*q);
  return in;
}

namespace {

/// Bounds of a Relu or Clip as floats; nullopt when they are not constant.
std::optional<std::pair<float, float>> activationBounds(const ir::Node& act, std::string* why) {
  if (act.opIs("Relu")) return std::make_pair(0.0f, std::numeric_limits<float>::infinity());
  return clipBounds(act, why);
}

}  // namespace

std::optional<QuantizedOutput> quantizedOutput(const ir::Node& target, bool allow_activation, std::string* why,
                                               bool widen_half) {
  QuantizedOutput out;
  const ir::Value* y = target.output(0);
  if (!y || target.outputs().size() != 1) {
    *why = "target must have exactly one output";
    return std::nullopt;
  }
  if (!hasSingleReader(y)) {
    *why = "output must have exactly one reader, a QuantizeLinear, and must not be a graph output";
    return std::nullopt;
  }
  ir::Node* next = y->uses()[0].node;
  if (allow_activation && (next->is("Relu") || next->is("Clip"))) {
    out.activation = next;
    if (!hasSingleReader(next->output(0))) {
      *why = fmt::format("{} output must have exactly one reader, a QuantizeLinear", next->label());
      return std::nullopt;
    }
    next = next->output(0)->uses()[0].node;
  }
  if (!isQuantize(*next)) {
    *why = fmt::format("output goes to {} ({}), not to a QuantizeLinear", next->label(), next->opType());
    return std::nullopt;
  }
  out.q = next;
  if (const int32_t t = quantizedTypeOf(*next); t && !ir::isInt8Like(t)) {
    *why = fmt::format("output is quantized to {}: QLinear ops take 8-bit integers (int8, uint8) only", ir::typeName(t));
    return std::nullopt;
  }
  std::string inner;
  auto q = readConstQuant(*next, &inner, widen_half);
  if (!q) {
    *why = "output QuantizeLinear " + inner;
    return std::nullopt;
  }
  if (q->per_axis) {
    *why = "output QuantizeLinear is per-axis; QLinear ops take a per-tensor output";
    return std::nullopt;
  }
  if (!ir::isInt8Like(q->elem_type)) {
    *why = fmt::format("output is quantized to {}: QLinear ops take 8-bit integers (int8, uint8) only", ir::typeName(q->elem_type));
    return std::nullopt;
  }
  out.params = std::move(*q);
  if (out.activation) {
    auto bounds = activationBounds(*out.activation, why);
    if (!bounds) return std::nullopt;
    auto [qmin, qmax] = ir::intRange(out.params.elem_type);
    const float s = out.params.scale[0];
    const int64_t z = out.params.zero_point[0];
    const int64_t qlo = std::isinf(bounds->first) ? qmin : quantizeOne(bounds->first, s, z, out.params.elem_type);
    const int64_t qhi = std::isinf(bounds->second) ? qmax : quantizeOne(bounds->second, s, z, out.params.elem_type);
    if (qlo != qmin || qhi != qmax) {
      *why = fmt::format("{} ({}) is not redundant under the output quantizer: its bounds quantize to [{}, {}], "
                         "the {} range is [{}, {}]",
                         out.activation->label(), out.activation->opType(), qlo, qhi,
                         ir::typeName(out.params.elem_type), qmin, qmax);
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace qconv
