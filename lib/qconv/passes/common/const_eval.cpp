#include "qconv/passes/common/const_eval.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "qconv/ir/tensor.h"
#include "qconv/quant.h"

namespace qconv::eval {

using onnx::TensorProto;

namespace {

/// `t`'s values, read from `from` (the tensor itself, or the value holding it).
template <typename From>
std::optional<Tensor> load(const TensorProto& t, const From& from, std::string* why) {
  Tensor out;
  out.type = t.data_type();
  out.dims = ir::dimsOf(t);
  if (out.isFloat()) {
    auto v = ir::readFloats(from, why);
    if (!v) return std::nullopt;
    out.f = std::move(*v);
  } else {
    auto v = ir::readInts(from, why);
    if (!v) return std::nullopt;
    out.i = std::move(*v);
  }
  return out;
}

}  // namespace

std::optional<Tensor> fromProto(const TensorProto& t, std::string* why) { return load(t, t, why); }

std::optional<Tensor> fromValue(const ir::Value& v, std::string* why) { return load(*v.initializer(), v, why); }

std::optional<Tensor> constantNodeValue(const ir::Node& n, std::string* why) {
  Tensor t;
  for (const auto& a : n.proto().attribute()) {
    if (a.name() == "value" && a.has_t()) return fromProto(a.t(), why);
    if (a.name() == "value_float") {
      t.type = TensorProto::FLOAT;
      t.f = {a.f()};
      return t;
    }
    if (a.name() == "value_floats") {
      t.type = TensorProto::FLOAT;
      t.f.assign(a.floats().begin(), a.floats().end());
      t.dims = {static_cast<int64_t>(t.f.size())};
      return t;
    }
    if (a.name() == "value_int") {
      t.type = TensorProto::INT64;
      t.i = {a.i()};
      return t;
    }
    if (a.name() == "value_ints") {
      t.type = TensorProto::INT64;
      t.i.assign(a.ints().begin(), a.ints().end());
      t.dims = {static_cast<int64_t>(t.i.size())};
      return t;
    }
  }
  *why = "Constant holds a sparse, string or missing value";
  return std::nullopt;
}

std::unique_ptr<TensorProto> toProto(const Tensor& t) {
  return t.isFloat() ? ir::makeFloatTensor(t.dims, t.f) : ir::makeIntTensor(t.type, t.dims, t.i);
}

std::optional<std::vector<int64_t>> broadcastDims(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t k = 0; k < r; ++k) {
    const int64_t da = k < r - a.size() ? 1 : a[k - (r - a.size())];
    const int64_t db = k < r - b.size() ? 1 : b[k - (r - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[k] = da == 1 ? db : da;
  }
  return out;
}

namespace {

/// For each output element, the flat index into an operand of `dims` broadcast to `out`.
std::vector<size_t> broadcastIndex(const std::vector<int64_t>& dims, const std::vector<int64_t>& out, size_t total) {
  const size_t r = out.size();
  std::vector<int64_t> padded(r, 1);
  for (size_t k = 0; k < dims.size(); ++k) padded[r - dims.size() + k] = dims[k];
  std::vector<size_t> stride(r, 0);
  size_t s = 1;
  for (size_t k = r; k-- > 0;) {
    stride[k] = padded[k] == 1 ? 0 : s;
    s *= static_cast<size_t>(padded[k]);
  }
  std::vector<size_t> idx(total);
  std::vector<int64_t> pos(r, 0);
  size_t flat = 0;
  for (size_t n = 0; n < total; ++n) {
    idx[n] = flat;
    for (size_t k = r; k-- > 0;) {
      flat += stride[k];
      if (++pos[k] < out[k]) break;
      flat -= stride[k] * static_cast<size_t>(out[k]);
      pos[k] = 0;
    }
  }
  return idx;
}

size_t product(const std::vector<int64_t>& d) {
  size_t n = 1;
  for (int64_t x : d) n *= static_cast<size_t>(x);
  return n;
}

}  // namespace

std::optional<Tensor> binary(const std::string& op, const Tensor& a, const Tensor& b, std::string* why) {
  if (a.type != b.type) {
    *why = fmt::format("{} of {} and {}", op, ir::typeName(a.type), ir::typeName(b.type));
    return std::nullopt;
  }
  auto dims = broadcastDims(a.dims, b.dims);
  if (!dims) {
    *why = "shapes do not broadcast";
    return std::nullopt;
  }
  Tensor out;
  out.type = a.type;
  out.dims = *dims;
  const size_t n = product(out.dims);
  const bool sameA = a.dims == out.dims, sameB = b.dims == out.dims;
  std::vector<size_t> ia, ib;
  if (!sameA) ia = broadcastIndex(a.dims, out.dims, n);
  if (!sameB) ib = broadcastIndex(b.dims, out.dims, n);
  auto at = [&](size_t k, bool same, const std::vector<size_t>& idx) { return same ? k : idx[k]; };
  if (a.isFloat()) {
    out.f.resize(n);
    for (size_t k = 0; k < n; ++k) {
      const float x = a.f[at(k, sameA, ia)], y = b.f[at(k, sameB, ib)];
      if (op == "Mul") out.f[k] = x * y;
      else if (op == "Div") out.f[k] = x / y;
      else if (op == "Add") out.f[k] = x + y;
      else out.f[k] = x - y;
    }
    return out;
  }
  auto [lo, hi] = ir::intRange(a.type);
  out.i.resize(n);
  for (size_t k = 0; k < n; ++k) {
    const int64_t x = a.i[at(k, sameA, ia)], y = b.i[at(k, sameB, ib)];
    int64_t r = 0;
    bool overflow = false;
    if (op == "Mul") overflow = __builtin_mul_overflow(x, y, &r);
    else if (op == "Add") overflow = __builtin_add_overflow(x, y, &r);
    else if (op == "Sub") overflow = __builtin_sub_overflow(x, y, &r);
    else {
      if (y == 0) {
        *why = "integer division by zero";
        return std::nullopt;
      }
      overflow = x == lo && y == -1;
      r = overflow ? 0 : x / y;
    }
    if (overflow || r < lo || r > hi) {
      *why = fmt::format("integer {} overflows {}", op, ir::typeName(a.type));
      return std::nullopt;
    }
    out.i[k] = r;
  }
  return out;
}

size_t Tensor::byteSize() const {
  switch (type) {
    case TensorProto::INT8:
    case TensorProto::UINT8: return size();
    case TensorProto::INT16:
    case TensorProto::UINT16: return 2 * size();
    case TensorProto::INT64: return 8 * size();
    default: return 4 * size();
  }
}

std::optional<Tensor> clip(const Tensor& a, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi,
                           std::string* why) {
  for (const auto* b : {&lo, &hi})
    if (*b && ((*b)->type != a.type || (*b)->size() != 1)) {
      *why = "Clip bounds are not scalars of the input's type";
      return std::nullopt;
    }
  Tensor out = a;
  if (a.isFloat()) {
    for (float& v : out.f) {
      if (lo && v < lo->f[0]) v = lo->f[0];
      if (hi && v > hi->f[0]) v = hi->f[0];
    }
  } else {
    for (int64_t& v : out.i) {
      if (lo && v < lo->i[0]) v = lo->i[0];
      if (hi && v > hi->i[0]) v = hi->i[0];
    }
  }
  return out;
}

std::optional<Tensor> round(const Tensor& a, std::string* why) {
  if (!a.isFloat()) {
    *why = "Round of a non-float tensor";
    return std::nullopt;
  }
  Tensor out = a;
  for (float& v : out.f) v = std::nearbyint(v);
  return out;
}

std::optional<Tensor> reshape(const Tensor& a, const Tensor& shape, bool allowzero, std::string* why) {
  if (shape.isFloat() || shape.dims.size() != 1) {
    *why = "Reshape to a shape that is not a 1-D integer tensor";
    return std::nullopt;
  }
  std::vector<int64_t> dims;
  int inferred = -1;
  uint64_t known = 1;
  for (size_t k = 0; k < shape.i.size(); ++k) {
    int64_t d = shape.i[k];
    if (d == 0 && !allowzero) {
      if (k >= a.dims.size()) {
        *why = "Reshape copies a dim the input does not have";
        return std::nullopt;
      }
      d = a.dims[k];
    }
    if (d == -1) {
      if (inferred >= 0) {
        *why = "Reshape to a shape with two -1";
        return std::nullopt;
      }
      inferred = static_cast<int>(k);
    } else if (d < 0) {
      *why = fmt::format("Reshape to a dim of {}", d);
      return std::nullopt;
    } else {
      known *= static_cast<uint64_t>(d);
    }
    dims.push_back(d);
  }
  const uint64_t count = a.size();
  if (inferred >= 0) {
    if (known == 0 || count % known) {
      *why = "Reshape cannot infer its -1";
      return std::nullopt;
    }
    dims[static_cast<size_t>(inferred)] = static_cast<int64_t>(count / known);
  } else if (known != count) {
    *why = fmt::format("Reshape of {} values to {}", count, known);
    return std::nullopt;
  }
  Tensor out = a;
  out.dims = std::move(dims);
  return out;
}

std::optional<Tensor> cast(const Tensor& a, int32_t to, std::string* why) {
  Tensor out;
  out.type = to;
  out.dims = a.dims;
  if (to == TensorProto::FLOAT) {
    if (a.isFloat()) return a;
    out.f.reserve(a.i.size());
    for (int64_t v : a.i) out.f.push_back(static_cast<float>(v));
    return out;
  }
  if (!ir::isIntegerType(to)) {
    *why = fmt::format("Cast to {}", ir::typeName(to));
    return std::nullopt;
  }
  auto [lo, hi] = ir::intRange(to);
  out.i.reserve(a.size());
  for (size_t k = 0; k < a.size(); ++k) {
    int64_t v = 0;
    if (a.isFloat()) {
      const double t = std::trunc(static_cast<double>(a.f[k]));
      if (!std::isfinite(t) || t < static_cast<double>(lo) || t > static_cast<double>(hi)) {
        *why = fmt::format("Cast of {} to {} is out of range", a.f[k], ir::typeName(to));
        return std::nullopt;
      }
      v = static_cast<int64_t>(t);
    } else {
      v = a.i[k];
      if (v < lo || v > hi) {
        *why = fmt::format("Cast of {} to {} is out of range", v, ir::typeName(to));
        return std::nullopt;
      }
    }
    out.i.push_back(v);
  }
  return out;
}

std::optional<Tensor> quantize(const Tensor& x, const Tensor& scale, const std::optional<Tensor>& zp,
                               int32_t out_type, int64_t axis, std::string* why) {
  if (!x.isFloat() || !scale.isFloat()) {
    *why = "QuantizeLinear of a non-float input or scale";
    return std::nullopt;
  }
  if (!ir::isIntegerType(out_type) || out_type == TensorProto::INT64) {  // int32: Aidge's bias producers
    *why = fmt::format("QuantizeLinear to {}", ir::typeName(out_type));
    return std::nullopt;
  }
  if (zp && (zp->isFloat() || zp->size() != scale.size())) {
    *why = "zero point does not match the scale";
    return std::nullopt;
  }
  for (float s : scale.f)
    if (!(std::isfinite(s) && s > 0.0f)) {
      *why = fmt::format("scale {} is not positive and finite", s);
      return std::nullopt;
    }
  for (float v : x.f)
    if (std::isnan(v)) {
      *why = "input holds NaN";
      return std::nullopt;
    }
  Tensor out;
  out.type = out_type;
  out.dims = x.dims;
  out.i.resize(x.f.size());
  if (scale.f.size() == 1 && scale.dims.size() <= 1) {
    const float s = scale.f[0];
    const int64_t z = zp ? zp->i[0] : 0;
    for (size_t k = 0; k < x.f.size(); ++k) out.i[k] = quantizeOne(x.f[k], s, z, out_type);
    return out;
  }
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  if (scale.dims.size() != 1 || axis < -rank || axis >= rank) {
    *why = "per-axis parameters do not fit the input (blocked or bad axis)";
    return std::nullopt;
  }
  const size_t ax = static_cast<size_t>(axis < 0 ? axis + rank : axis);
  if (static_cast<int64_t>(scale.f.size()) != x.dims[ax]) {
    *why = fmt::format("scale has {} values, axis {} has {}", scale.f.size(), axis, x.dims[ax]);
    return std::nullopt;
  }
  size_t inner = 1;
  for (size_t k = ax + 1; k < x.dims.size(); ++k) inner *= static_cast<size_t>(x.dims[k]);
  const size_t channels = static_cast<size_t>(x.dims[ax]);
  for (size_t k = 0; k < x.f.size(); ++k) {
    const size_t c = (k / inner) % channels;
    out.i[k] = quantizeOne(x.f[k], scale.f[c], zp ? zp->i[c] : 0, out_type);
  }
  return out;
}

std::optional<Tensor> dequantize(const Tensor& x, const Tensor& scale, const std::optional<Tensor>& zp, int64_t axis,
                                 std::string* why) {
  if (x.isFloat() || !scale.isFloat() || (zp && (zp->isFloat() || zp->size() != scale.size()))) {
    *why = "DequantizeLinear of other than integers, a float scale and a matching zero point";
    return std::nullopt;
  }
  if (x.type == TensorProto::INT32 && zp && std::any_of(zp->i.begin(), zp->i.end(), [](int64_t z) { return z != 0; })) {
    *why = "an int32 DequantizeLinear at a zero point other than 0";  // its subtraction's precision is the runtime's
    return std::nullopt;
  }
  size_t inner = 1, channels = 1;
  if (scale.f.size() != 1 || scale.dims.size() > 1) {
    const int64_t rank = static_cast<int64_t>(x.dims.size());
    if (scale.dims.size() != 1 || axis < -rank || axis >= rank) {
      *why = "per-axis parameters do not fit the input (blocked or bad axis)";
      return std::nullopt;
    }
    const size_t ax = static_cast<size_t>(axis < 0 ? axis + rank : axis);
    channels = static_cast<size_t>(x.dims[ax]);
    if (scale.f.size() != channels) {
      *why = fmt::format("scale has {} values, axis {} has {}", scale.f.size(), axis, channels);
      return std::nullopt;
    }
    for (size_t k = ax + 1; k < x.dims.size(); ++k) inner *= static_cast<size_t>(x.dims[k]);
  }
  Tensor out{TensorProto::FLOAT, x.dims, std::vector<float>(x.i.size()), {}};
  for (size_t k = 0; k < x.i.size(); ++k) {
    const size_t c = (k / inner) % channels;
    const int64_t z = zp ? zp->i[c] : 0;
    out.f[k] = static_cast<float>(x.i[k] - z) * scale.f[c];  // the specification: (x - zero_point) * scale, in float
  }
  return out;
}

}  // namespace qconv::eval
