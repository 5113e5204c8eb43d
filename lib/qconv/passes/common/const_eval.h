// A small exact evaluator for the elementwise ops fold-producers folds.
// Every result is what an ONNX runtime computes bit for bit: float32 ops are single IEEE
// operations, integer results must fit their type, casts must be in range. Anything else is
// declined with a reason (nullopt), never approximated.
#pragma once

#include <onnx/onnx_pb.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qconv/ir/ir.h"

namespace qconv::eval {

struct Tensor {
  int32_t type = 0;  // FLOAT, or an integer type
  std::vector<int64_t> dims;
  std::vector<float> f;    // when type == FLOAT
  std::vector<int64_t> i;  // when an integer type
  bool isFloat() const { return type == onnx::TensorProto::FLOAT; }
  size_t size() const { return isFloat() ? f.size() : i.size(); }
  size_t byteSize() const;
};

/// The values of an inline tensor (a Constant's), or of a constant value's initializer.
std::optional<Tensor> fromProto(const onnx::TensorProto& t, std::string* why);
std::optional<Tensor> fromValue(const ir::Value& v, std::string* why);
std::unique_ptr<onnx::TensorProto> toProto(const Tensor& t);
/// The tensor a Constant node holds (value, value_float(s), value_int(s)), or nullopt with *why
/// (sparse, string or missing value).
std::optional<Tensor> constantNodeValue(const ir::Node& n, std::string* why);

/// numpy broadcasting of two shapes; nullopt when they do not broadcast.
std::optional<std::vector<int64_t>> broadcastDims(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

/// Mul, Div, Add, Sub with numpy broadcasting.
std::optional<Tensor> binary(const std::string& op, const Tensor& a, const Tensor& b, std::string* why);
/// Clip to optional [lo, hi] scalars of the input's type.
std::optional<Tensor> clip(const Tensor& a, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi,
                           std::string* why);
/// Round half to even (float only).
std::optional<Tensor> round(const Tensor& a, std::string* why);
/// Cast to `to` (FLOAT or an integer type).
std::optional<Tensor> cast(const Tensor& a, int32_t to, std::string* why);
/// Reshape to `shape` (an integer tensor of rank 1; 0 copies the dim, unless allowzero; one -1 is
/// inferred): the same values, new dims; nullopt with *why when the element counts differ.
std::optional<Tensor> reshape(const Tensor& a, const Tensor& shape, bool allowzero, std::string* why);
/// QuantizeLinear(x, scale, zero_point) with per-tensor or per-axis parameters.
std::optional<Tensor> quantize(const Tensor& x, const Tensor& scale, const std::optional<Tensor>& zp,
                               int32_t out_type, int64_t axis, std::string* why);

/// DequantizeLinear(x, scale, zero_point), per tensor or per axis: (x - zero_point) * scale in
/// float32, as the specification and onnxruntime compute it.
std::optional<Tensor> dequantize(const Tensor& x, const Tensor& scale, const std::optional<Tensor>& zp, int64_t axis,
                                 std::string* why);

}  // namespace qconv::eval
