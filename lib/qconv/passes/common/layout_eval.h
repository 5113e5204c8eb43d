// The data-movement ops on constants (Slice, Transpose, Concat, Unsqueeze, Squeeze), evaluated
// on const_eval's tensors of any element type: each output element is an input element, copied,
// as the ONNX specification places it. Used by shape_eval (a computed shape) and fold-constant-
// weights (a weight the model computes from constants); anything outside the specification's
// domain is declined with a reason, never guessed.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "qconv/passes/common/const_eval.h"

namespace qconv::eval {

/// Slice (opset 10 on): `axes` empty means 0, 1, ...; `steps` empty means 1 each.
std::optional<Tensor> slice(const Tensor& x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                            const std::vector<int64_t>& axes, const std::vector<int64_t>& steps, std::string* why);

/// Transpose by `perm` (empty: the axes reversed).
std::optional<Tensor> transpose(const Tensor& x, std::vector<int64_t> perm, std::string* why);

/// Concat along `axis` (negative from the end) of tensors of one type and rank, equal elsewhere.
std::optional<Tensor> concat(const std::vector<Tensor>& xs, int64_t axis, std::string* why);

/// Unsqueeze (`insert`) or Squeeze: the same values, dims with `axes` inserted as 1 or removed
/// (each must be 1; Squeeze with no axes removes every 1).
std::optional<Tensor> redim(const Tensor& x, std::vector<int64_t> axes, bool insert, std::string* why);

}  // namespace qconv::eval
