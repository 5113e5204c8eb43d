// The integer ops a model computes a shape with, evaluated on constants (fold-shapes; verify
// names what it would fold): a Reshape's shape, a Pad's pads (torch's F.pad export: Concat ->
// Reshape -> Slice -> Transpose -> Reshape -> Cast). Exact: int64 arithmetic with overflow and range checks, each op
// as the ONNX specification defines it; anything else is declined with a reason.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "qconv/ir/ir.h"

namespace qconv {

struct IntTensor {
  int32_t type = 0;             // INT64 or INT32
  std::vector<int64_t> dims;
  std::vector<int64_t> values;
};

/// The static shape of `v`: declared in full, or, through QuantizeLinear and DequantizeLinear
/// (which keep their input's shape), that of the tensor they read; nullopt when not known.
std::optional<std::vector<int64_t>> staticShapeOf(const ir::Value& v);

/// Whether every graph input's shape is declared in full (the model takes one shape).
bool takesOneShape(const ir::Graph& graph);

/// What this evaluates at most, per input and result: a shape op's tensors are small (a larger one
/// is no shape).
constexpr size_t kMaxShapeValues = 1 << 16;

/// Whether `n` is an op this evaluates (Shape, Slice, Concat, Gather, Unsqueeze, Squeeze, Cast,
/// Add, Sub, Mul, Reshape, Transpose, Identity, ConstantOfShape on int64 and int32 tensors; the
/// integer ones through const_eval.h).
bool isShapeOp(const ir::Node& n);

/// `n`'s output for these inputs (Shape reads `shape`, the static shape of its input; the others
/// `inputs`, one per input slot, absent optional ones empty), or nullopt with *why.
std::optional<IntTensor> evalShapeOp(const ir::Node& n, const std::vector<std::optional<IntTensor>>& inputs,
                                     const std::vector<int64_t>& shape, int64_t opset, std::string* why);

}  // namespace qconv
