// The selector of unfuse-qop: what one QOp node becomes, read off the graph (qop_forms.h says
// where each input comes from), or the reason it stays.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "qconv/ir/ir.h"
#include "qconv/passes/common/qop_forms.h"

namespace qconv {

/// One input of the float op: DequantizeLinear(x, scale, zero point[, axis]) or x itself.
struct OperandPlan {
  std::string name;                // "x", "w", "B", "X1"
  QOperand::Kind kind = QOperand::kDequantized;
  ir::Value* x = nullptr;          // null: an absent optional input
  ir::Value* scale = nullptr;      // kDequantized
  ir::Value* zero_point = nullptr; // kDequantized; null: none (0 of x's type)
  std::vector<float> bias_scale;   // kBias: the new scale, one value (per tensor) or one per channel
  std::optional<int64_t> axis;     // per axis
};

struct UnfusePlan {
  ir::Node* node = nullptr;
  const QOpForm* form = nullptr;
  std::vector<OperandPlan> operands;
  ir::Value* y_scale = nullptr;       // null: the float op's output is the node's (QGemm without y_scale)
  ir::Value* y_zero_point = nullptr;  // null: a new 0 of y_type
  int32_t y_type = 0;
  std::vector<onnx::AttributeProto> attributes;  // the float op's
  std::vector<int64_t> axes_input;               // ReduceMean from opset 18: its axes as an input
  int64_t channels_last_rank = 0;                // > 0: channels_last, transposes around the op
};

/// The plan for `n` (its form `form`) in a model of default opset `opset`, or nullopt with *why.
std::optional<UnfusePlan> selectUnfuse(ir::Node& n, const QOpForm& form, int64_t opset, std::string* why);

}  // namespace qconv
