// declare-shapes' condition, which verify --target shares (declare_shapes.cpp has the contract).
#pragma once

#include <onnx/onnx_pb.h>

#include "qconv/ir/ir.h"

namespace qconv {

/// The shape declare-shapes gives `q`'s input (a Reshape's output to a computed shape that the
/// model leaves undeclared, read by the QuantizeLinear `q`): its quantized form's, or null.
const onnx::TensorShapeProto* shapeToDeclare(const ir::Node& q);

}  // namespace qconv
