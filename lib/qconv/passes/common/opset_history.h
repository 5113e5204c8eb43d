// redeclare-opset (--opset N): declare the converted model's default-domain opset as N instead of the input's.
//
// A node keeps its meaning under another opset only if its operator did not change between
// the two: for every version of its operator strictly after the lower opset and up to the
// higher one (lib/qconv/passes/opset_history.inc, generated from the ONNX schemas), the node must
//   1. not cross a version whose signature changed beyond additions (removed or retyped inputs,
//      outputs or attributes, a changed default, or a known change of allowed values);
//   2. not use an input or output that version added;
//   3. not set an attribute that version added (its default is the older behaviour);
//   4. have no input or output of an element type only one side accepts (a value of unknown
//      type passes only when every such type is a rare one: bfloat16, float8, 4-bit, ...).
// The operator must also exist at the lower opset. Anything else stops the conversion (exit 4)
// naming the node and the version in the way.
#pragma once

#include <cstdint>
#include <string>

#include "qconv/ir/ir.h"
#include "qconv/targets/target.h"

namespace qconv {

/// The newest ai.onnx opset the operator history knows.
int64_t newestKnownOpset();

/// Whether ai.onnx has operator `op` at `opset` (a version at or before it).
bool isKnownOperator(const std::string& op, int64_t opset);

/// Why `model`'s default opset cannot be raised from `from` to `to`: the first ai.onnx node
/// that does not keep its meaning, named; empty when every one does (or from >= to).
std::string opsetRaiseBlocker(const ir::Model& model, int64_t from, int64_t to);

/// The lowest default-domain opset `model` can declare as it is: 13 with a per-axis
/// QuantizeLinear/DequantizeLinear (an axis, or a scale of more than one value), else 1.
int64_t opsetFloor(const ir::Model& model);

/// The lowest opset --target `t` takes for `model`: its profile's, raised to opsetFloor and to
/// the opset its profile needs for an op the model has (op_opset_min).
int64_t targetOpsetMin(const TargetProfile& t, const ir::Model& model);

/// Declare `model`'s default opset `to` (ai.onnx, "" or "ai.onnx").
void declareOpset(ir::Model& model, int64_t to);

/// Throws Error(Usage) unless qconv knows ai.onnx opset `target`.
void checkOpsetFlag(int64_t target);

}  // namespace qconv
