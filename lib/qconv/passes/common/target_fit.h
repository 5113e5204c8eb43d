// What the target's profile (targets/target.h) allows of a group a QOp pass is about to write:
// the selectors of fuse-qlinear-conv, gemm-as-conv, fuse-qlinear-matmul and move-on-int8 ask
// here, and decline (the group stays in QDQ form, which the target runs) with the profile's
// reason. Each answer is "" when the target takes the form.
#pragma once

#include <string>

#include "qconv/passes/pass.h"
#include "qconv/quant.h"

namespace qconv {

/// The types shift-types stores 8-bit weights and activations as (0: kept): --weight-type and
/// --activation-type (or the target's), and what one implies of the other, since no kernel
/// takes int8 activations with uint8 weights: uint8 weights alone bring uint8 activations,
/// int8 activations alone int8 weights.
struct StorageTypes {
  int32_t weight = 0, activation = 0;
};
inline StorageTypes storageTypes(const PassOptions& options) {
  StorageTypes t{options.weight_type, options.activation_type};
  if (t.weight == onnx::TensorProto::UINT8 && t.activation == 0) t.activation = onnx::TensorProto::UINT8;
  if (t.activation == onnx::TensorProto::INT8 && t.weight == 0) t.weight = onnx::TensorProto::INT8;
  return t;
}

/// The type an 8-bit tensor of type `type` is stored as in the output (storageTypes).
inline int32_t storedType(const PassOptions& options, int32_t type, bool weight) {
  const StorageTypes types = storageTypes(options);
  const int32_t to = weight ? types.weight : types.activation;
  const bool eight_bit = type == onnx::TensorProto::INT8 || type == onnx::TensorProto::UINT8;
  return eight_bit && to ? to : type;
}

/// A QLinearConv with weights per channel or not.
inline std::string convFits(const PassContext& ctx, bool w_per_channel) {
  const TargetProfile& t = ctx.target();
  if (w_per_channel && !t.conv_per_channel.allowed) return std::string(t.conv_per_channel.why);
  return "";
}

/// A QLinearMatMul with b per column or not.
inline std::string matmulFits(const PassContext& ctx, bool b_per_column) {
  const TargetProfile& t = ctx.target();
  if (b_per_column && !t.matmul_per_column.allowed) return std::string(t.matmul_per_column.why);
  return "";
}

/// Data movement on an 8-bit activation of type `type`.
inline std::string movementFits(const PassContext& ctx, int32_t type) {
  const TargetProfile& t = ctx.target();
  if (!movesDataOn(t, storedType(ctx.options(), type, false))) return std::string(t.move_why);
  return "";
}

}  // namespace qconv
