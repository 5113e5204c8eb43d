#include "qconv/passes/common/node_eval.h"

#include <fmt/format.h>

#include <functional>
#include <set>

#include "qconv/passes/common/layout_eval.h"

namespace qconv::eval {

namespace {

using onnx::TensorProto;

/// An integer input's values (Slice's starts, Unsqueeze's axes), or nullopt.
std::optional<std::vector<int64_t>> intsOf(const std::optional<Tensor>& t) {
  if (!t || t->isFloat()) return std::nullopt;
  return t->i;
}

std::optional<Tensor> scalarAttribute(const ir::Node& n, const char* name) {
  const auto* a = n.attribute(name);
  if (!a) return std::nullopt;
  return Tensor{TensorProto::FLOAT, {}, {a->f()}, {}};
}

}  // namespace

std::optional<Tensor> evalNode(const ir::Node& n, const std::vector<std::optional<Tensor>>& in, int64_t opset,
                               std::string* why) {
  const std::optional<Tensor> none;
  auto at = [&](size_t k) -> const std::optional<Tensor>& { return k < in.size() ? in[k] : none; };
  if (!n.domain().empty() || n.outputs().size() != 1) {
    *why = fmt::format("{} is not an op evaluated on constants", n.opType());
    return std::nullopt;
  }
  if (n.is("Constant")) return constantNodeValue(n, why);
  if (!at(0)) {
    *why = fmt::format("{} without input 0", n.opType());
    return std::nullopt;
  }
  const Tensor& x = *at(0);
  if (n.is("Identity")) return x;
  if (n.is("Round")) return round(x, why);
  if (n.is("Cast")) return cast(x, static_cast<int32_t>(n.attrInt("to", 0)), why);
  if (n.is("Reshape") && at(1)) return reshape(x, *at(1), n.attrInt("allowzero", 0) != 0, why);
  if (n.is("Transpose")) return transpose(x, n.attrInts("perm"), why);
  if ((n.is("Mul") || n.is("Div") || n.is("Add") || n.is("Sub")) && at(1)) return binary(n.opType(), x, *at(1), why);
  if (n.is("Clip")) {  // bounds: Clip-6's attributes, Clip-11's inputs
    return clip(x, at(1) ? at(1) : scalarAttribute(n, "min"), at(2) ? at(2) : scalarAttribute(n, "max"), why);
  }
  if (n.is("Slice") && opset >= 10) {
    const auto starts = intsOf(at(1)), ends = intsOf(at(2));
    if (starts && ends)
      return slice(x, *starts, *ends, intsOf(at(3)).value_or(std::vector<int64_t>{}),
                   intsOf(at(4)).value_or(std::vector<int64_t>{}), why);
  }
  if (n.is("Unsqueeze") || n.is("Squeeze")) {
    const auto axes = opset >= 13 ? intsOf(at(1)).value_or(std::vector<int64_t>{}) : n.attrInts("axes");
    return redim(x, axes, n.is("Unsqueeze"), why);
  }
  if (n.is("Concat")) {
    std::vector<Tensor> xs;
    for (const auto& t : in) {
      if (!t) {
        *why = "a Concat with an absent input";
        return std::nullopt;
      }
      xs.push_back(*t);
    }
    return concat(xs, n.attrInt("axis", 0), why);
  }
  if ((n.is("QuantizeLinear") || n.is("DequantizeLinear")) && at(1)) {
    if (n.attrInt("block_size", 0) != 0) {
      *why = fmt::format("blocked {}", n.opType());
      return std::nullopt;
    }
    const std::optional<Tensor>& zp = at(2);
    if (n.is("DequantizeLinear")) return dequantize(x, *at(1), zp, n.attrInt("axis", 1), why);
    const int32_t type = zp ? zp->type : static_cast<int32_t>(n.attrInt("output_dtype", TensorProto::UINT8));
    return quantize(x, *at(1), zp, type, n.attrInt("axis", 1), why);
  }
  *why = fmt::format("{} is not an op evaluated on constants", n.opType());
  return std::nullopt;
}

std::optional<std::vector<const ir::Node*>> constantCone(const ir::Value* v, size_t max_nodes, std::string* why) {
  std::vector<const ir::Node*> order;
  std::set<const ir::Node*> seen;
  // Depth-first, each node after its producers; the depth is at most max_nodes.
  std::function<bool(const ir::Value*)> visit = [&](const ir::Value* x) {
    if (!x || x->isConstant()) return true;  // an absent optional input reads nothing
    const ir::Node* p = x->producer();
    if (!p || x->isGraphInput()) {
      *why = "it is not computed from constants alone";
      return false;
    }
    if (!seen.insert(p).second) return true;
    if (seen.size() > max_nodes) {
      *why = fmt::format("it is computed by more than {} nodes", max_nodes);
      return false;
    }
    for (const ir::Value* in : p->inputs())
      if (!visit(in)) return false;
    order.push_back(p);
    return true;
  };
  if (!visit(v)) return std::nullopt;
  return order;
}

}  // namespace qconv::eval
