#include "qconv/passes/common/shape_eval.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <string_view>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/const_eval.h"
#include "qconv/passes/common/layout_eval.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

using onnx::TensorProto;

eval::Tensor toEval(const IntTensor& t) { return eval::Tensor{t.type, t.dims, {}, t.values}; }

std::optional<IntTensor> fromEval(std::optional<eval::Tensor> t, std::string* why) {
  if (!t) return std::nullopt;
  if (t->type != TensorProto::INT64 && t->type != TensorProto::INT32) {
    *why = fmt::format("a shape computed in {}", ir::typeName(t->type));
    return std::nullopt;
  }
  return IntTensor{t->type, std::move(t->dims), std::move(t->i)};
}

/// An optional input's values, or none.
std::vector<int64_t> valuesOf(const std::optional<IntTensor>& t) { return t ? t->values : std::vector<int64_t>{}; }

/// Index `k` of a dimension of size `n`, negative from the end; nullopt outside [-n, n).
std::optional<size_t> axisIndex(int64_t k, size_t n) {
  const int64_t r = k < 0 ? k + static_cast<int64_t>(n) : k;
  if (r < 0 || r >= static_cast<int64_t>(n)) return std::nullopt;
  return static_cast<size_t>(r);
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
  static constexpr std::string_view kOps[] = {"Shape",   "Slice", "Concat", "Gather",    "Unsqueeze",      "Squeeze",
                                     "Cast",    "Add",   "Sub",    "Mul",       "Reshape",        "Transpose",
                                     "Identity", "ConstantOfShape"};
  return n.domain().empty() && std::any_of(std::begin(kOps), std::end(kOps), [&](std::string_view op) { return n.is(op); });
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
    return fromEval(eval::slice(toEval(x), input(1)->values, input(2)->values, valuesOf(input(3)),
                                valuesOf(input(4)), why), why);
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
  if (n.is("Transpose")) return fromEval(eval::transpose(toEval(x), n.attrInts("perm"), why), why);
  if (n.is("Identity")) return x;
  if (n.is("Unsqueeze") || n.is("Squeeze")) {
    std::vector<int64_t> axes = opset >= 13 ? (input(1) ? input(1)->values : std::vector<int64_t>{}) : n.attrInts("axes");
    return fromEval(eval::redim(toEval(x), std::move(axes), n.is("Unsqueeze"), why), why);
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
