// declare-shapes' condition (undeclared_shape.h).
#include "qconv/passes/common/undeclared_shape.h"

#include "qconv/quant.h"

namespace qconv {

namespace {

bool hasShape(const ir::Value* v) {
  return v && v->info() && v->info()->type().has_tensor_type() && v->info()->type().tensor_type().has_shape();
}

/// The shape declared for q's output or a DequantizeLinear reading it, or null (condition 3).
const onnx::TensorShapeProto* quantizedShape(const ir::Node& q) {
  const ir::Value* out = q.output(0);
  if (hasShape(out)) return &out->info()->type().tensor_type().shape();
  for (const ir::Use& u : out->uses())
    if (isDequantize(*u.node) && u.index == 0 && hasShape(u.node->output(0)))
      return &u.node->output(0)->info()->type().tensor_type().shape();
  return nullptr;
}

}  // namespace

const onnx::TensorShapeProto* shapeToDeclare(const ir::Node& reshape) {
  if (!reshape.is("Reshape") || !reshape.input(1) || reshape.input(1)->isConstant()) return nullptr;
  const ir::Value* x = reshape.output(0);
  if (!x || hasShape(x) || x->uses().empty()) return nullptr;  // (2)
  for (const ir::Use& u : x->uses()) {
    if (u.index != 0) continue;
    if (isQuantize(*u.node))
      if (const onnx::TensorShapeProto* shape = quantizedShape(*u.node)) return shape;
    if (isDequantize(*u.node) && hasShape(u.node->output(0))) return &u.node->output(0)->info()->type().tensor_type().shape();
  }
  return nullptr;
}

}  // namespace qconv
