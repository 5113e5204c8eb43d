#include "qconv/passes/common/shape_eval.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "qconv/ir/tensor.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

using onnx::TensorProto;

std::vector<int64_t> intsAttr(const ir::Node& n, const char* name) {
  const onnx::AttributeProto* a = n.attribute(name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
}

/// The declared dims of `v` when every one is a known value.
std::optional<std::vector<int64_t>> declared(const ir::Value& v) {
  const onnx::ValueInfoProto* info = v.info();
  if (!info || !info->type().has_tensor_type() || !info->type().tensor_type().has_shape()) return std::nullopt;
  std::vector<int64_t> dims;
  for (const auto& d : info->type().tensor_type().shape().dim()) {
    if (!d.has_dim_value()) return std::nullopt;
    dims.push_back(d.dim_value());
  }
  return dims;
}

/// Index `k` of a dimension of size `n`, negative from the end; nullopt outside [-n, n).
std::optional<size_t> axisIndex(int64_t k, size_t n) {
  const int64_t r = k < 0 ? k + static_cast<int64_t>(n) : k;
  if (r < 0 || r >= static_cast<int64_t>(n)) return std::nullopt;
  return static_cast<size_t>(r);
}

std::optional<IntTensor> slice(const IntTensor& x, const IntTensor& starts, const IntTensor& ends,
                               const std::optional<IntTensor>& axes, const std::optional<IntTensor>& steps,
                               std::string* why) {
  if (x.dims.size() != 1 || starts.values.size() != 1 || ends.values.size() != 1 ||
      (axes && (axes->values.size() != 1 || !axisIndex(axes->values[0], 1))) || (steps && steps->values.size() != 1)) {
    *why = "a Slice of other than one axis of a 1-D tensor";
    return std::nullopt;
  }
  const int64_t n = x.dims[0], step = steps ? steps->values[0] : 1;
  if (step == 0) {
    *why = "a Slice step of 0";
    return std::nullopt;
  }
  auto clampAt = [&](int64_t v, int64_t lo, int64_t hi) {  // the specification's clamping of starts and ends
    if (v < 0) v += n;
    return std::clamp<int64_t>(v, lo, hi);
  };
  const int64_t s = step > 0 ? clampAt(starts.values[0], 0, n) : clampAt(starts.values[0], -1, n - 1);
  const int64_t e = step > 0 ? clampAt(ends.values[0], 0, n) : clampAt(ends.values[0], -1, n - 1);
  IntTensor out{x.type, {0}, {}};
  for (int64_t i = s; step > 0 ? i < e : i > e; i += step) out.values.push_back(x.values[static_cast<size_t>(i)]);
  out.dims[0] = static_cast<int64_t>(out.values.size());
  return out;
}

std::optional<IntTensor> gather(const IntTensor& x, const IntTensor& indices, int64_t axis, std::string* why) {
  if (x.dims.size() != 1 || (axis != 0 && axis != -1) || indices.dims.size() > 1) {
    *why = "a Gather of other than a 1-D tensor by a scalar or 1-D index";
    return std::nullopt;
  }
  IntTensor out{x.type, indices.dims, {}};
  for (int64_t k : indices.values) {
    const auto i = axisIndex(k, x.values.size());
    if (!i) {
      *why = fmt::format("a Gather index {} outside [-{}, {})", k, x.values.size(), x.values.size());
      return std::nullopt;
    }
    out.values.push_back(x.values[*i]);
  }
  return out;
}

std::optional<IntTensor> binary(const std::string& op, const IntTensor& a, const IntTensor& b, std::string* why) {
  if (a.type != b.type || (a.values.size() != b.values.size() && a.values.size() != 1 && b.values.size() != 1)) {
    *why = fmt::format("an integer {} of other than equal or scalar-broadcast operands", op);
    return std::nullopt;
  }
  IntTensor out{a.type, a.values.size() >= b.values.size() ? a.dims : b.dims, {}};
  const auto [lo, hi] = ir::intRange(a.type);
  for (size_t k = 0; k < std::max(a.values.size(), b.values.size()); ++k) {
    const int64_t x = a.values[a.values.size() == 1 ? 0 : k], y = b.values[b.values.size() == 1 ? 0 : k];
    int64_t r = 0;
    const bool overflow = op == "Add"   ? __builtin_add_overflow(x, y, &r)
                          : op == "Sub" ? __builtin_sub_overflow(x, y, &r)
                                        : __builtin_mul_overflow(x, y, &r);
    if (overflow || r < lo || r > hi) {
      *why = fmt::format("an integer {} overflows {}", op, ir::typeName(a.type));
      return std::nullopt;
    }
    out.values.push_back(r);
  }
  return out;
}

/// Unsqueeze/Squeeze: the same values, dims with `axes` inserted (1) or removed (each must be 1).
std::optional<IntTensor> redim(const IntTensor& x, std::vector<int64_t> axes, bool insert, std::string* why) {
  IntTensor out = x;
  const size_t rank = x.dims.size() + (insert ? axes.size() : 0);
  if (!insert && axes.empty())
    for (size_t k = 0; k < x.dims.size(); ++k)
      if (x.dims[k] == 1) axes.push_back(static_cast<int64_t>(k));
  std::vector<size_t> at;
  for (int64_t a : axes) {
    const auto i = axisIndex(a, rank);
    if (!i) {
      *why = fmt::format("an axis {} outside rank {}", a, rank);
      return std::nullopt;
    }
    at.push_back(*i);
  }
  std::sort(at.begin(), at.end());
  if (insert) {
    for (size_t i : at) out.dims.insert(out.dims.begin() + static_cast<std::ptrdiff_t>(std::min(i, out.dims.size())), 1);
    return out;
  }
  for (auto it = at.rbegin(); it != at.rend(); ++it) {
    if (out.dims[*it] != 1) {
      *why = fmt::format("a Squeeze of axis {}, of dimension {}", *it, out.dims[*it]);
      return std::nullopt;
    }
    out.dims.erase(out.dims.begin() + static_cast<std::ptrdiff_t>(*it));
  }
  return out;
}

}  // namespace

std::optional<std::vector<int64_t>> staticShapeOf(const ir::Value& v) {
  const ir::Value* at = &v;
  for (int hops = 0; at && hops < 8; ++hops) {  // Q/DQ keep the shape; a short walk
    if (auto dims = declared(*at)) return dims;
    if (const auto* t = at->initializer()) return ir::dimsOf(*t);
    const ir::Node* p = at->producer();
    if (!p || !(isQuantize(*p) || isDequantize(*p)) || !p->input(0)) return std::nullopt;
    at = p->input(0);
  }
  return std::nullopt;
}

bool takesOneShape(const ir::Graph& graph) {
  for (const ir::Value* in : graph.inputs())
    if (!in->initializer() && !declared(*in)) return false;
  return true;
}

bool isShapeOp(const ir::Node& n) {
  static const char* const kOps[] = {"Shape", "Slice", "Concat", "Gather", "Unsqueeze", "Squeeze", "Cast", "Add", "Sub", "Mul"};
  return n.domain().empty() && std::any_of(std::begin(kOps), std::end(kOps), [&](const char* op) { return n.is(op); });
}

std::optional<IntTensor> evalShapeOp(const ir::Node& n, const std::vector<std::optional<IntTensor>>& in,
                                     const std::vector<int64_t>& shape, int64_t opset, std::string* why) {
  auto input = [&](size_t k) -> const std::optional<IntTensor>& {
    static const std::optional<IntTensor> none;
    return k < in.size() ? in[k] : none;
  };
  if (n.is("Shape")) {
    const auto r = static_cast<int64_t>(shape.size());
    auto at = [&](int64_t k) { return std::clamp<int64_t>(k < 0 ? k + r : k, 0, r); };
    const int64_t s = at(n.attrInt("start", 0)), e = at(n.attrInt("end", r));
    IntTensor out{TensorProto::INT64, {std::max<int64_t>(0, e - s)}, {}};
    for (int64_t k = s; k < e; ++k) out.values.push_back(shape[static_cast<size_t>(k)]);
    return out;
  }
  for (size_t k = 0; k < n.inputs().size(); ++k)
    if (n.input(k) && !input(k)) {
      *why = fmt::format("input {} is not an integer constant", k);
      return std::nullopt;
    }
  if (!input(0)) {
    *why = "no input";
    return std::nullopt;
  }
  const IntTensor& x = *input(0);
  if (n.is("Slice")) {
    if (opset < 10 || !input(1) || !input(2)) {
      *why = "a Slice with its bounds as attributes";
      return std::nullopt;
    }
    return slice(x, *input(1), *input(2), input(3), input(4), why);
  }
  if (n.is("Gather")) return input(1) ? gather(x, *input(1), n.attrInt("axis", 0), why) : std::nullopt;
  if (n.is("Add") || n.is("Sub") || n.is("Mul")) return input(1) ? binary(n.opType(), x, *input(1), why) : std::nullopt;
  if (n.is("Unsqueeze") || n.is("Squeeze")) {
    std::vector<int64_t> axes = opset >= 13 ? (input(1) ? input(1)->values : std::vector<int64_t>{}) : intsAttr(n, "axes");
    return redim(x, std::move(axes), n.is("Unsqueeze"), why);
  }
  if (n.is("Cast")) {
    const auto to = static_cast<int32_t>(n.attrInt("to", 0));
    if (to != TensorProto::INT64 && to != TensorProto::INT32) {
      *why = fmt::format("a Cast to {}", ir::typeName(to));
      return std::nullopt;
    }
    const auto [lo, hi] = ir::intRange(to);
    for (int64_t v : x.values)
      if (v < lo || v > hi) {
        *why = fmt::format("a Cast of {} to {} out of range", v, ir::typeName(to));
        return std::nullopt;
      }
    IntTensor out = x;
    out.type = to;
    return out;
  }
  if (n.is("Concat")) {
    IntTensor out{x.type, {0}, {}};
    for (const auto& t : in) {
      if (!t || t->dims.size() != 1 || t->type != x.type) {
        *why = "a Concat of other than 1-D tensors of one type";
        return std::nullopt;
      }
      out.values.insert(out.values.end(), t->values.begin(), t->values.end());
    }
    out.dims[0] = static_cast<int64_t>(out.values.size());
    return out;
  }
  *why = fmt::format("{} is not a shape op", n.opType());
  return std::nullopt;
}

}  // namespace qconv
