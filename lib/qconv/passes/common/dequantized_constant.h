// A constant behind a DequantizeLinear, read whole, and a walk over its elements with each one's
// channel: what requantize-per-tensor (canonical/) and fold-dequantized-constants (target/)
// rewrite.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "qconv/ir/tensor.h"
#include "qconv/quant.h"

namespace qconv {

struct DequantizedConstant {
  ConstQuant params;          // elem_type: the constant's type; axis in [0, rank) when per axis
  std::vector<int64_t> q;     // its integers
  std::vector<int64_t> dims;  // its dims
};

/// The constant input of `dq` with its parameters, or nullopt with *why: parameters that are not
/// constant, a scale that is not float, integers that cannot be read, or a per-axis scale whose
/// length is not its axis's dimension (validate names such a model earlier).
inline std::optional<DequantizedConstant> readDequantizedConstant(const ir::Node& dq, std::string* why) {
  auto p = readConstQuant(dq, why);
  if (!p) return std::nullopt;
  if (p->scale_type != onnx::TensorProto::FLOAT) {
    *why = "its scale is not float";
    return std::nullopt;
  }
  auto q = ir::readInts(*dq.input(0), why);
  if (!q) return std::nullopt;
  std::vector<int64_t> dims = ir::dimsOf(*dq.input(0)->initializer());
  if (p->per_axis) {
    const int64_t rank = static_cast<int64_t>(dims.size());
    const int64_t axis = p->axis < 0 ? p->axis + rank : p->axis;
    if (axis < 0 || axis >= rank || dims[static_cast<size_t>(axis)] != static_cast<int64_t>(p->size())) {
      *why = "its scale does not match its axis";
      return std::nullopt;
    }
    p->axis = axis;
  }
  p->elem_type = dq.input(0)->initializer()->data_type();
  return DequantizedConstant{std::move(*p), std::move(*q), std::move(dims)};
}

/// Calls f(i, c) for each flat element i of `k`, in order, with its channel c (0 per tensor),
/// with no division per element.
template <typename F>
void forEachElement(const DequantizedConstant& k, F f) {
  if (!k.params.per_axis) {
    for (size_t i = 0; i < k.q.size(); ++i) f(i, size_t{0});
    return;
  }
  const size_t axis = static_cast<size_t>(k.params.axis);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= k.dims[d];
  for (size_t d = axis + 1; d < k.dims.size(); ++d) inner *= k.dims[d];
  size_t i = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < k.dims[axis]; ++c)
      for (int64_t e = 0; e < inner; ++e) f(i++, static_cast<size_t>(c));
}

}  // namespace qconv
