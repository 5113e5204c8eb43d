#include "qconv/passes/common/shape_eval.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/const_eval.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

using onnx::TensorProto;

/// Index `k` of a dimension of size `n`, negative from the end; nullopt outside [-n, n).
std::optional<size_t> axisIndex(int64_t k, size_t n) {
  const int64_t r = k < 0 ? k + static_cast<int64_t>(n) : k;
  if (r < 0 || r >= static_cast<int64_t>(n)) return std::nullopt;
  return static_cast<size_t>(r);
}

size_t count(const std::vector<int64_t>& dims) {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  return n;
}

/// Row-major strides of `dims`.
std::vector<size_t> stridesOf(const std::vector<int64_t>& dims) {
  std::vector<size_t> s(dims.size(), 1);
  for (size_t k = dims.size(); k-- > 1;) s[k - 1] = s[k] * static_cast<size_t>(dims[k]);
  return s;
}

/// Every element of `out_dims`, in order, read from `x` at the index `source` maps it to.
template <class Source>
IntTensor gatherBy(const IntTensor& x, std::vector<int64_t> out_dims, Source source) {
  IntTensor out{x.type, std::move(out_dims), {}};
  const size_t n = count(out.dims);
  out.values.reserve(n);
  std::vector<int64_t> at(out.dims.size(), 0);
  for (size_t k = 0; k < n; ++k) {
    out.values.push_back(x.values[source(at)]);
    for (size_t a = at.size(); a-- > 0;) {  // the next index, last axis fastest
      if (++at[a] < out.dims[a]) break;
      at[a] = 0;
    }
  }
  return out;
}

std::optional<IntTensor> slice(const IntTensor& x, const IntTensor& starts, const IntTensor& ends,
                               const std::optional<IntTensor>& axes, const std::optional<IntTensor>& steps,
                               std::string* why) {
  const size_t rank = x.dims.size(), m = starts.values.size();
  if (ends.values.size() != m || (axes && axes->values.size() != m) || (steps && steps->values.size() != m) || !rank) {
    *why = "a Slice whose starts, ends, axes and steps differ in length, or of a scalar";
    return std::nullopt;
  }
  std::vector<int64_t> first(rank, 0), step(rank, 1), dims = x.dims;
  std::vector<bool> seen(rank, false);
  for (size_t j = 0; j < m; ++j) {
    const auto axis = axisIndex(axes ? axes->values[j] : static_cast<int64_t>(j), rank);
    if (!axis || seen[*axis]) {
      *why = "a Slice axis outside the rank, or repeated";
      return std::nullopt;
    }
    seen[*axis] = true;
    const int64_t n = x.dims[*axis], st = steps ? steps->values[j] : 1;
    if (st == 0) {
      *why = "a Slice step of 0";
      return std::nullopt;
    }
    auto clampAt = [&](int64_t v, int64_t lo, int64_t hi) {  // the specification's clamping of starts and ends
      if (v < 0) v += n;
      return std::clamp<int64_t>(v, lo, hi);
    };
    const int64_t s = st > 0 ? clampAt(starts.values[j], 0, n) : clampAt(starts.values[j], -1, n - 1);
    const int64_t e = st > 0 ? clampAt(ends.values[j], 0, n) : clampAt(ends.values[j], -1, n - 1);
    const int64_t len = st > 0 ? (e > s ? (e - s + st - 1) / st : 0) : (s > e ? (s - e - st - 1) / -st : 0);
    first[*axis] = s;
    step[*axis] = st;
    dims[*axis] = len;
  }
  const auto stride = stridesOf(x.dims);
  return gatherBy(x, dims, [&](const std::vector<int64_t>& at) {
    size_t i = 0;
    for (size_t a = 0; a < rank; ++a) i += static_cast<size_t>(first[a] + at[a] * step[a]) * stride[a];
    return i;
  });
}

std::optional<IntTensor> transpose(const IntTensor& x, std::vector<int64_t> perm, std::string* why) {
  const size_t rank = x.dims.size();
  if (perm.empty())
    for (size_t k = rank; k-- > 0;) perm.push_back(static_cast<int64_t>(k));
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (size_t k = 0; k < sorted.size(); ++k)
    if (sorted.size() != rank || sorted[k] != static_cast<int64_t>(k)) {
      *why = "a Transpose whose perm is not a permutation of the input's axes";
      return std::nullopt;
    }
  std::vector<int64_t> dims(rank);
  for (size_t a = 0; a < rank; ++a) dims[a] = x.dims[static_cast<size_t>(perm[a])];
  const auto stride = stridesOf(x.dims);
  return gatherBy(x, dims, [&](const std::vector<int64_t>& at) {
    size_t i = 0;
    for (size_t a = 0; a < rank; ++a) i += static_cast<size_t>(at[a]) * stride[static_cast<size_t>(perm[a])];
    return i;
  });
}

eval::Tensor toEval(const IntTensor& t) { return eval::Tensor{t.type, t.dims, {}, t.values}; }

std::optional<IntTensor> fromEval(std::optional<eval::Tensor> t, std::string* why) {
  if (!t) return std::nullopt;
  if (t->type != TensorProto::INT64 && t->type != TensorProto::INT32) {
    *why = fmt::format("a shape computed in {}", ir::typeName(t->type));
    return std::nullopt;
  }
  return IntTensor{t->type, std::move(t->dims), std::move(t->i)};
}

/// ConstantOfShape(shape): `shape` filled with the `value` attribute's one integer (its default, a
/// float 0, is no integer: declined).
std::optional<IntTensor> constantOfShape(const ir::Node& n, const IntTensor& shape, std::string* why) {
  const onnx::AttributeProto* a = n.attribute("value");
  std::optional<eval::Tensor> v;
  if (a && a->has_t()) v = eval::fromProto(a->t(), why);
  if (!v || v->isFloat() || v->i.size() != 1 || (v->type != TensorProto::INT64 && v->type != TensorProto::INT32)) {
    if (v || !a) *why = "a ConstantOfShape of other than one int64 or int32 value";
    return std::nullopt;
  }
  if (shape.dims.size() != 1 || std::any_of(shape.values.begin(), shape.values.end(), [](int64_t d) { return d < 0; })) {
    *why = "a ConstantOfShape of a shape that is not 1-D or has a negative dim";
    return std::nullopt;
  }
  size_t n_values = 1;  // held at most one past the bound (no overflow); a 0 dim makes it 0
  for (int64_t d : shape.values) {
    const auto dim = static_cast<size_t>(d);
    n_values = dim > kMaxShapeValues ? (n_values ? kMaxShapeValues + 1 : 0) : std::min(n_values * dim, kMaxShapeValues + 1);
  }
  if (n_values > kMaxShapeValues) {
    *why = fmt::format("a ConstantOfShape of more than {} values", kMaxShapeValues);
    return std::nullopt;
  }
  return IntTensor{v->type, shape.values, std::vector<int64_t>(n_values, v->i[0])};
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
    if (auto dims = ir::knownDims(*at)) return dims;
    const ir::Node* p = at->producer();
    if (!p || !(isQuantize(*p) || isDequantize(*p)) || !p->input(0)) return std::nullopt;
    at = p->input(0);
  }
  return std::nullopt;
}

bool takesOneShape(const ir::Graph& graph) {
  for (const ir::Value* in : graph.inputs())
    if (!ir::knownDims(*in)) return false;
  return true;
}

bool isShapeOp(const ir::Node& n) {
  static const char* const kOps[] = {"Shape",   "Slice", "Concat", "Gather",    "Unsqueeze",      "Squeeze",
                                     "Cast",    "Add",   "Sub",    "Mul",       "Reshape",        "Transpose",
                                     "Identity", "ConstantOfShape"};
  return n.domain().empty() && std::any_of(std::begin(kOps), std::end(kOps), [&](const char* op) { return n.is(op); });
}

namespace {

std::optional<IntTensor> evalOp(const ir::Node& n, const std::vector<std::optional<IntTensor>>& in,
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
  if (n.is("ConstantOfShape")) return constantOfShape(n, x, why);
  if (n.is("Gather")) return input(1) ? gather(x, *input(1), n.attrInt("axis", 0), why) : std::nullopt;
  if (n.is("Add") || n.is("Sub") || n.is("Mul"))
    return input(1) ? fromEval(eval::binary(n.opType(), toEval(x), toEval(*input(1)), why), why) : std::nullopt;
  if (n.is("Reshape")) {
    if (opset < 5 || !input(1)) {
      *why = "a Reshape with its shape as an attribute";
      return std::nullopt;
    }
    return fromEval(eval::reshape(toEval(x), toEval(*input(1)), n.attrInt("allowzero", 0) != 0, why), why);
  }
  if (n.is("Transpose")) return transpose(x, n.attrInts("perm"), why);
  if (n.is("Identity")) return x;
  if (n.is("Unsqueeze") || n.is("Squeeze")) {
    std::vector<int64_t> axes = opset >= 13 ? (input(1) ? input(1)->values : std::vector<int64_t>{}) : n.attrInts("axes");
    return redim(x, std::move(axes), n.is("Unsqueeze"), why);
  }
  if (n.is("Cast")) return fromEval(eval::cast(toEval(x), static_cast<int32_t>(n.attrInt("to", 0)), why), why);
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

}  // namespace

std::optional<IntTensor> evalShapeOp(const ir::Node& n, const std::vector<std::optional<IntTensor>>& in,
                                     const std::vector<int64_t>& shape, int64_t opset, std::string* why) {
  auto out = evalOp(n, in, shape, opset, why);
  if (out && out->values.size() > kMaxShapeValues) {
    *why = fmt::format("a result of {} values, more than a shape's {}", out->values.size(), kMaxShapeValues);
    return std::nullopt;
  }
  return out;
}

}  // namespace qconv
