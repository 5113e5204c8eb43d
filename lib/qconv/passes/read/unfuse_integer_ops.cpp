// unfuse-integer-ops (--format qdq): onnxruntime's dynamic quantization, ConvInteger or
// MatMulInteger with the float scale chain after it, becomes DequantizeLinear -> float op.
//
// Before (quantize_dynamic):
//   x_q, x_s, x_zp = DynamicQuantizeLinear(x)          (or any producer)
//   S   = Mul(x_s, w_s)                                 (either order)
//   acc = ConvInteger(x_q, w, x_zp, w_zp)    | MatMulInteger(x_q, w, x_zp, w_zp)
//   y   = Mul(Cast(acc, to=FLOAT), S)                   (either order)
// After:
//   y = Conv(DQ(x_q, x_s, x_zp), DQ(w, w_s, w_zp))     | MatMul(..., DQ(w, w_s, w_zp[, axis: columns]))
// Both compute S * sum((x_q - x_zp)(w - w_zp)): the same real value, rounded differently (the
// integer sum is exact, the float one rounds as it goes): agreement to float rounding.
//
// A chain is rewritten when:
//   1. the integer op's output is read only by a Cast to float, read only by a Mul, and
//      neither is a graph output;
//   2. the Mul's other input S is a Mul of two factors: one a scalar (a constant, a value of
//      known rank 0, or DynamicQuantizeLinear's scale), which goes with x; the other a constant for w: one value, or for
//      MatMulInteger one per column of w (1-D, w of known rank);
//   3. a per-column weight scale needs opset 13 (DequantizeLinear's axis).
// Otherwise the chain stays (onnxruntime runs it), and the refusal says why.
#include <fmt/format.h>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/driver.h"
#include "qconv/passes/common/qdq_select.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

struct IntegerChain {
  ir::Node* op = nullptr;    // ConvInteger / MatMulInteger
  ir::Node* cast = nullptr;
  ir::Node* mul = nullptr;   // Mul(cast, S): its output is y
  ir::Value* x_scale = nullptr;
  ir::Value* w_scale = nullptr;
  std::optional<int64_t> axis;  // per column of w
};

/// The only reader of `v` (nullptr when it has another count, or is a graph output).
ir::Node* onlyReader(const ir::Value* v) { return hasSingleReader(v) ? v->uses()[0].node : nullptr; }

/// A constant of one element, a value of known rank 0, or DynamicQuantizeLinear's scale (a
/// scalar by its definition).
bool isScalar(const ir::Value* v) {
  if (v->initializer()) return ir::numElements(*v->initializer()) == 1;
  if (v->producer() && v->producer()->is("DynamicQuantizeLinear") && v->producerSlot() == 1) return true;
  return knownRank(v) == 0;
}

/// Elements of a constant, -1 for a value that is not one.
int64_t constantCount(const ir::Value* v) {
  return v->isConstant() ? ir::numElements(*v->initializer()).value_or(-1) : -1;
}

Match<IntegerChain> selectChain(ir::Node& n, int64_t opset) {
  using M = Match<IntegerChain>;
  IntegerChain c;
  c.op = &n;
  c.cast = onlyReader(n.output(0));
  if (!c.cast || !c.cast->is("Cast") || c.cast->attrInt("to", 0) != onnx::TensorProto::FLOAT)  // (1)
    return M::refuse("its output is not read only by a Cast to float");
  c.mul = onlyReader(c.cast->output(0));
  if (!c.mul || !c.mul->is("Mul") || !c.mul->output(0))
    return M::refuse("its Cast is not read only by a Mul (the scale)");
  ir::Value* s = c.mul->input(c.mul->input(0) == c.cast->output(0) ? 1 : 0);
  ir::Node* product = s ? s->producer() : nullptr;
  if (!product || !product->is("Mul") || !product->input(0) || !product->input(1))  // (2)
    return M::refuse("its scale is not a Mul of the input's scale and the weight's");
  const bool matmul = n.is("MatMulInteger");
  const int64_t w_rank = knownRank(n.input(1));
  const int64_t columns = matmul && w_rank >= 1 ? ir::dimsOf(*n.input(1)->initializer()).back() : -1;
  for (int k = 0; k < 2 && !c.w_scale; ++k) {
    ir::Value* w = product->input(static_cast<size_t>(k));
    ir::Value* x = product->input(static_cast<size_t>(1 - k));
    const int64_t count = constantCount(w);
    if (!isScalar(x) || count < 1) continue;
    if (count > 1 && (!matmul || count != columns || w->initializer()->dims_size() != 1)) continue;
    c.x_scale = x;
    c.w_scale = w;
    if (count > 1) c.axis = w_rank - 1;
  }
  if (!c.w_scale)
    return M::refuse("its scale is not a scalar times a constant weight scale (one value, or one per column of a "
                     "MatMulInteger weight)");
  if (c.axis && opset < 13)  // (3)
    return M::refuse(fmt::format("its weight scale is per column, which DequantizeLinear takes from opset 13; the "
                                 "model has {}", opset));
  return c;
}

struct UnfuseIntegerOps {
  using Group = IntegerChain;
  int64_t opset;

  bool root(const ir::Node& n) const {
    return (n.is("ConvInteger") || n.is("MatMulInteger")) && n.input(0) && n.input(1) && n.input(1)->isConstant();
  }
  std::string declined(const ir::Node& n) const { return fmt::format("stays {}", n.opType()); }
  Match<Group> select(ir::Node& n) { return selectChain(n, opset); }

  /// DQ(x): 0 x <- op 0; 1 x_scale <- the scalar factor of S; 2 <- op 2 (x_zero_point) if any
  /// DQ(w): 0 w <- op 1; 1 w_scale <- the constant factor of S; 2 <- op 3 (w_zero_point) if any
  /// float op: DQ(x), DQ(w), the integer op's attributes; output <- the Mul's output
  void rewrite(ir::Graph& graph, Group& c, PassContext& ctx) {
    ir::Node& n = *c.op;
    const std::string float_op = n.is("ConvInteger") ? "Conv" : "MatMul";
    const std::string base = n.name().empty() ? float_op : n.name();
    auto dequantize = [&](size_t data, ir::Value* scale, size_t zp, std::optional<int64_t> axis, const char* what) {
      std::vector<ir::Value*> in{n.input(data), scale};
      if (n.input(zp)) in.push_back(n.input(zp));
      ir::Node* dq = graph.createNode("DequantizeLinear", "", in, 1, c.mul);
      if (axis) setIntAttribute(*dq, "axis", *axis);
      dq->output(0)->setElemType(onnx::TensorProto::FLOAT);
      graph.setNameHint(dq, base + "_dq_" + what);
      graph.setNameHint(dq->output(0), n.input(data)->name() + "_dequantized");
      return dq->output(0);
    };
    ir::Value* x = dequantize(0, c.x_scale, 2, std::nullopt, "x");
    ir::Value* w = dequantize(1, c.w_scale, 3, c.axis, "w");
    ir::Node* op = graph.createNode(float_op, "", {x, w}, 1, c.mul);
    inheritAttributes(*op, n);
    if (n.name().empty()) graph.setNameHint(op, base);
    op->output(0)->setElemType(onnx::TensorProto::FLOAT);
    const std::string kind = n.opType();
    graph.takeOutput(op, 0, c.mul->output(0));
    std::vector<ir::Value*> dead = c.mul->inputs();
    graph.destroyNode(c.mul);
    for (ir::Value* v : dead) graph.pruneIfDead(v);  // the Cast, the integer op, S's Mul: nobody reads them now
    ctx.count(fmt::format("{} -> QDQ {}", kind, float_op));
  }
};

}  // namespace

void unfuseIntegerOps(ir::Model& model, PassContext& ctx) {
  UnfuseIntegerOps rule{ir::defaultOpset(model)};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
