// One node evaluated on constant inputs, and the nodes that compute a value from constants: what
// fold-producers (a weight quantized by the model), fold-constant-weights (a weight an LSTM needs
// as a constant) and check-ops (an input "computed from constants alone") share. Every op is
// evaluated as the specification defines it, by const_eval.h (elementwise, in float32 IEEE or
// exact integers) and layout_eval.h (elements moved, never computed); anything else is declined
// with a reason, never approximated.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "qconv/ir/ir.h"
#include "qconv/passes/common/const_eval.h"

namespace qconv::eval {

/// `n`'s single output for these inputs (one per input slot; an absent optional input nullopt),
/// `opset` the model's default-domain version; or nullopt with *why. Evaluates the default-domain
/// Constant, Identity, Cast, Round, Reshape, Transpose, Mul, Div, Add, Sub, Clip, Slice (10 on),
/// Unsqueeze, Squeeze, Concat, and QuantizeLinear and DequantizeLinear per tensor or per axis.
std::optional<Tensor> evalNode(const ir::Node& n, const std::vector<std::optional<Tensor>>& in, int64_t opset,
                               std::string* why);

/// The nodes that compute `v` from constants (initializers, Constant nodes) alone, each after the
/// nodes it reads (so evaluating them in this order computes `v`); empty for a constant `v`. Or
/// nullopt with *why: `v` is read from a graph input (or from no producer), or more than
/// `max_nodes` nodes compute it.
std::optional<std::vector<const ir::Node*>> constantCone(const ir::Value* v, size_t max_nodes, std::string* why);

}  // namespace qconv::eval
