// The node group fuse-qlinear-conv rewrites, and its selector.
#pragma once

#include <optional>
#include <string>

#include "qconv/passes/common/qdq_select.h"

namespace qconv {

struct ConvGroup {
  ir::Node* conv = nullptr;
  DequantizedInput x;
  DequantizedInput w;
  ir::Value* bias = nullptr;  // float: a constant initializer or a DQ of a constant int32
  std::optional<ConstQuant> bias_params;  // the bias DQ's parameters, when it has one
  QuantizedOutput y;
  /// y is of the other 8-bit type than x: the fusion stores it in x's type (zero points moved by
  /// 128: the same tensor), its readers being DequantizeLinear nodes whose zero points move too.
  bool y_moved = false;
  /// Or x is moved to y's type: its QuantizeLinear's zero point and its readers' (preferred: the
  /// conv after this one then keeps the type it reads).
  bool x_moved = false;
};

/// Select the group around `conv`, or nullopt with the requirement that failed in *why.
/// Conditions 1-9 of fuse_qlinear_conv.cpp: the operands' structure, not the bias's values
/// (check-saturation asks this too, about a conv left in QDQ form).
std::optional<ConvGroup> selectConvGroup(ir::Node& conv, std::string* why);

}  // namespace qconv
