// declare-shapes' condition, which verify --target shares (target/declare_shapes.cpp has the contract).
#pragma once

#include <onnx/onnx_pb.h>

#include "qconv/ir/ir.h"

namespace qconv {

/// The shape declare-shapes gives the output of `reshape` (a Reshape to a computed shape whose
/// output's shape the model leaves undeclared, read by a QuantizeLinear or DequantizeLinear):
/// the other side's, or null.
const onnx::TensorShapeProto* shapeToDeclare(const ir::Node& reshape);

}  // namespace qconv
