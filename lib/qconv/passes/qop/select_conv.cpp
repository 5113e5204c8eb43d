// Selector of fuse-qlinear-conv: reads the graph, returns a ConvGroup or a reason.
#include <fmt/format.h>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/conv_group.h"

namespace qconv {

namespace {

/// (5) the bias: a constant float [M], or DQ(int32 constant [M], scale scalar or [M], zp 0).
bool acceptBias(ir::Value* b, int64_t m, std::optional<ConstQuant>* params, std::string* why) {
  if (ir::Node* dq = dequantizeFeeding(b)) {
    std::string inner;
    auto q = readConstQuant(*dq, &inner, true);
    if (!q) {
      *why = "bias " + inner;
      return false;
    }
    const ir::Value* bq = dq->input(0);
    if (!bq->isConstant() || bq->initializer()->data_type() != onnx::TensorProto::INT32) {
      *why = "bias DequantizeLinear input is not a constant int32 initializer";
      return false;
    }
    for (int64_t z : q->zero_point)
      if (z != 0) {
        *why = "bias zero point is not 0";
        return false;
      }
    if (q->per_axis && static_cast<int64_t>(q->size()) != m) {
      *why = fmt::format("bias scale has {} values, the weight has {} output channels", q->size(), m);
      return false;
    }
    if (ir::numElements(*bq->initializer()).value_or(-1) != m) {
      *why = fmt::format("bias does not have {} values (one per output channel)", m);
      return false;
    }
    *params = std::move(q);
    return true;
  }
  if (!b->isConstant() || b->initializer()->data_type() != onnx::TensorProto::FLOAT) {
    *why = "bias is neither a constant float initializer nor a DequantizeLinear of a constant int32";
    return false;
  }
  if (ir::numElements(*b->initializer()).value_or(-1) != m) {
    *why = fmt::format("bias does not have {} values (one per output channel)", m);
    return false;
  }
  return true;
}

}  // namespace

/// Why not every reader of `v` is a per-tensor DequantizeLinear reading it as its input, or empty.
std::string onlyPerTensorDequantizers(const ir::Value* v) {
  if (!v) return "it has no output";
  if (v->isGraphOutput()) return "it is a graph output";
  if (v->hasImplicitUses()) return "a subgraph reads it";
  for (const ir::Use& u : v->uses()) {
    const ir::Node& r = *u.node;
    std::string no;
    const auto p = r.is("DequantizeLinear") && u.index == 0 ? readConstQuant(r, &no) : std::nullopt;
    if (!p || p->per_axis) return fmt::format("{} reads it, not a per-tensor DequantizeLinear", r.label());
  }
  return {};
}

std::optional<ConvGroup> selectConvGroup(ir::Node& conv, std::string* why) {
  ConvGroup g;
  g.conv = &conv;
  // (1) a default-domain Conv with x, w and an optional bias
  if (!conv.is("Conv") || conv.inputs().size() < 2 || conv.inputs().size() > 3) {
    *why = "not a Conv with 2 or 3 inputs";
    return std::nullopt;
  }
  // (2) x: through a DQ, per tensor
  auto x = dequantizedInput(conv, 0, "x", why, true);
  if (!x) return std::nullopt;
  if (x->params.per_axis) {
    *why = "x is quantized per axis; QLinearConv takes a per-tensor x";
    return std::nullopt;
  }
  g.x = std::move(*x);
  // (3) w: through a DQ of a constant, per tensor or per output channel (axis 0)
  auto w = dequantizedInput(conv, 1, "weight", why, true);
  if (!w) return std::nullopt;
  g.w = std::move(*w);
  const ir::Value* wq = g.w.quantized();
  if (!wq->isConstant()) {
    *why = "weight is not a constant initializer";
    return std::nullopt;
  }
  const auto wdims = ir::dimsOf(*wq->initializer());
  if (wdims.size() < 3) {
    *why = "weight has rank < 3";
    return std::nullopt;
  }
  const int64_t m = wdims[0];
  if (g.w.params.per_axis) {
    const int64_t axis = g.w.params.axis < 0 ? g.w.params.axis + static_cast<int64_t>(wdims.size()) : g.w.params.axis;
    if (axis != 0) {
      *why = fmt::format("weight is quantized per axis {}; QLinearConv needs axis 0 (output channels)", g.w.params.axis);
      return std::nullopt;
    }
    if (static_cast<int64_t>(g.w.params.size()) != m) {
      *why = fmt::format("weight scale has {} values for {} output channels", g.w.params.size(), m);
      return std::nullopt;
    }
  }
  // (4) onnxruntime's kernels take u8*u8, u8*s8 and s8*s8
  if (g.x.params.elem_type == onnx::TensorProto::INT8 && g.w.params.elem_type != onnx::TensorProto::INT8) {
    *why = "x is int8 but the weight is uint8 (QLinearConv kernels take int8 x only with int8 weights)";
    return std::nullopt;
  }
  // (5) bias
  if (ir::Value* b = conv.input(2)) {
    if (!acceptBias(b, m, &g.bias_params, why)) return std::nullopt;
    g.bias = b;
  }
  // (6)-(8) one reader, a Q (through a redundant Relu/Clip), per tensor int8/uint8
  auto y = quantizedOutput(conv, true, why, true);
  if (!y) return std::nullopt;
  g.y = std::move(*y);
  // (9) onnxruntime has QLinearConv kernels only for y of x's type: y of the other 8-bit type is
  // the same tensor at zero point z -/+ 128 in x's, when every reader can take it so
  if (g.y.params.elem_type != g.x.params.elem_type) {
    const ir::Value* x = g.x.dq->input(0);
    const ir::Node* xq = x ? x->producer() : nullptr;
    std::string no;
    if (xq && xq->is("QuantizeLinear") && !xq->attribute("output_dtype") && readConstQuant(*xq, &no) &&
        !readConstQuant(*xq, &no)->per_axis && onlyPerTensorDequantizers(x).empty()) {
      g.x_moved = true;  // x moves to y's type: the op after this conv keeps what it reads
      return g;
    }
    const std::string reader = onlyPerTensorDequantizers(g.y.q->output(0));
    if (!reader.empty()) {
      *why = fmt::format("x is {} but the output is {}, and {} (QLinearConv kernels take y of x's type)",
                         ir::typeName(g.x.params.elem_type), ir::typeName(g.y.params.elem_type), reader);
      return std::nullopt;
    }
    g.y_moved = true;
  }
  return g;
}

}  // namespace qconv
