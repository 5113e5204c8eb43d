// What the target's profile (targets/target.h) allows of a group a QOp pass is about to write:
// the selectors of fuse-qlinear-conv, gemm-as-conv, fuse-qlinear-matmul and move-on-int8 ask
// here, and decline (the group stays in QDQ form, which the target runs) with the profile's
// reason. Each answer is "" when the target takes the form.
#pragma once

#include <string>

#include "qconv/passes/pass.h"
#include "qconv/quant.h"

namespace qconv {

/// The type an 8-bit tensor of type `type` is stored as in the output: shift-types moves it to
/// --weight-type / --activation-type, or the target's, when one is given.
inline int32_t storedType(const PassOptions& options, int32_t type, bool weight) {
  const int32_t to = weight ? options.weight_type : options.activation_type;
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
  const int32_t stored = storedType(ctx.options(), type, false);
  const uint8_t bit = stored == onnx::TensorProto::INT8 ? kInt8 : stored == onnx::TensorProto::UINT8 ? kUint8 : 0;
  if (bit && !(t.move_on & bit)) return std::string(t.move_why);
  return "";
}

}  // namespace qconv
