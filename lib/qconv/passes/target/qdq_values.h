// The parameters and integers of a QuantizeLinear/DequantizeLinear, read whole: what the
// requantizing passes of target/ (requantize-blocked, requantize-wide) rewrite. Any layout: per
// tensor, per axis or in blocks; the scale and zero point as flat lists in their own shape.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

#include "qconv/ir/tensor.h"
#include "qconv/quant.h"

namespace qconv {

struct QdqValues {
  std::vector<float> scale;
  std::vector<int64_t> zero_point;  // as many as scale (zeros when absent)
  std::vector<int64_t> scale_dims;
  std::vector<int64_t> q;           // a DequantizeLinear's constant input's integers, else empty
  std::vector<int64_t> dims;        // their dims
};

/// `n`'s constant scale and zero point, and its input's integers when it dequantizes a constant;
/// nullopt with *why when one is not a constant or cannot be read.
inline std::optional<QdqValues> readQdqValues(const ir::Node& n, std::string* why) {
  const ir::Value* s = n.input(1);
  if (!s || !s->isConstant()) {
    *why = "its scale is not a constant";
    return std::nullopt;
  }
  if (n.input(2) && !n.input(2)->isConstant()) {
    *why = "its zero point is not a constant";
    return std::nullopt;
  }
  auto scale = ir::readWidenedFloats(*s, why);
  if (!scale) return std::nullopt;
  QdqValues v{std::move(*scale), {}, ir::dimsOf(*s->initializer()), {}, {}};
  v.zero_point.assign(v.scale.size(), 0);
  if (n.input(2) && !ir::isFloatQuantType(n.input(2)->initializer()->data_type())) {
    auto z = ir::readInts(*n.input(2), why);
    if (!z || z->size() != v.scale.size()) {
      *why = "its zero point cannot be read, or is not the scale's shape";
      return std::nullopt;
    }
    v.zero_point = std::move(*z);
  }
  if (isDequantize(n) && n.input(0) && n.input(0)->isConstant()) {
    auto q = ir::readInts(*n.input(0), why);
    if (!q) return std::nullopt;
    v.q = std::move(*q);
    v.dims = ir::dimsOf(*n.input(0)->initializer());
  }
  return v;
}

}  // namespace qconv
