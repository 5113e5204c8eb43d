// The ai.onnx operator history: whether a node keeps its meaning under another opset (for
// redeclare-opset's --opset N and --target, and the read passes that raise the opset).
//
// A node keeps its meaning under another opset only if its operator did not change between
// the two: for every version of its operator strictly after the lower opset and up to the
// higher one (lib/qconv/passes/common/opset_history.inc, generated from the ONNX schemas), the node must
//   1. not cross a version whose signature changed beyond additions (removed or retyped inputs,
//      outputs or attributes, a changed default, or a known change of allowed values), but where
//      opset_crossings.h knows the crossing keeps its meaning;
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
#include "qconv/passes/common/element_types.h"
#include "qconv/targets/target.h"

namespace qconv {

/// The newest ai.onnx opset the operator history knows.
int64_t newestKnownOpset();

/// Whether ai.onnx has operator `op` at `opset` (a version at or before it).
bool isKnownOperator(const std::string& op, int64_t opset);

/// Why node `n`, of a model declaring opset `declared`, does not keep its meaning at every opset
/// from `lo` to `hi` (the version in the way, named), or empty; `known`: the graph's element types.
std::string opsetBlocker(const ir::Node& n, int64_t lo, int64_t hi, const ElementTypes& known, int64_t declared);

/// Why `model`'s default opset cannot be raised from `from` to `to`: the first ai.onnx node
/// that does not keep its meaning, named; empty when every one does (or from >= to).
std::string opsetRaiseBlocker(const ir::Model& model, int64_t from, int64_t to);

/// The lowest default-domain opset `model` can declare as it is: 13 with a per-axis
/// QuantizeLinear/DequantizeLinear (an axis, or a scale of more than one value), else 1.
int64_t opsetFloor(const ir::Model& model);

/// The lowest opset --target `t` takes for `model`: its profile's, raised to opsetFloor and to
/// the opset its profile needs for an op the model has (op_opset_min).
int64_t targetOpsetMin(const TargetProfile& t, const ir::Model& model);

/// Declare `model`'s default opset `to` (ai.onnx, "" or "ai.onnx"), each node rewritten across
/// the changed versions it crosses (opset_crossings.h; checked first with opsetBlocker).
void declareOpset(ir::Model& model, int64_t to);

/// Throws Error(Usage) unless qconv knows ai.onnx opset `target`.
void checkOpsetFlag(int64_t target);

}  // namespace qconv
