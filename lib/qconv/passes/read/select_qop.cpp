// The selector of unfuse-qop (its contract: unfuse_qop.cpp, conditions 1-8).
#include "qconv/passes/read/select_qop.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/shared_bias.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

/// The element count of a scale: a constant's, or 1 for a value of known rank 0. -1: unknown.
int64_t scaleCount(const ir::Value* s) {
  if (s->initializer()) return ir::numElements(*s->initializer()).value_or(-1);
  return knownRank(s) == 0 ? 1 : -1;
}

/// The per-axis axis of operand `op` of `n` whose data is `x`; nullopt with *why when it has none.
std::optional<int64_t> perAxis(const ir::Node& n, const QOperand& op, const ir::Value* x, std::string* why) {
  const int64_t rank = knownRank(x);
  switch (op.axis) {
    case ScaleAxis::kFirst: return 0;
    case ScaleAxis::kSecond:
      if (n.attrInt("group", 1) != 1) {
        *why = fmt::format("{} has one scale per output channel and group {}: no DequantizeLinear axis holds them",
                           op.name, n.attrInt("group", 1));
        return std::nullopt;
      }
      return 1;
    case ScaleAxis::kGemmB: return n.attrInt("transB", 0) ? 0 : 1;
    case ScaleAxis::kRow:
    case ScaleAxis::kColumn:
      if (rank < (op.axis == ScaleAxis::kRow ? 2 : 1)) {
        *why = fmt::format("{} has a scale per {} but its rank is not known", op.name,
                           op.axis == ScaleAxis::kRow ? "row" : "column");
        return std::nullopt;
      }
      return rank - (op.axis == ScaleAxis::kRow ? 2 : 1);
    case ScaleAxis::kNone: break;
  }
  *why = fmt::format("{} has more than one scale; {} takes one", op.name, n.opType());
  return std::nullopt;
}

/// (2)-(4): DequantizeLinear of (x, scale, zero point), per tensor or along the operand's axis.
bool planDequantized(const ir::Node& n, const QOperand& op, int64_t opset, OperandPlan& p, std::string* why) {
  p.scale = n.input(static_cast<size_t>(op.s));
  p.zero_point = op.zp >= 0 ? n.input(static_cast<size_t>(op.zp)) : nullptr;
  if (!p.scale) {
    *why = fmt::format("{} has no scale", op.name);
    return false;
  }
  const int64_t count = scaleCount(p.scale);
  if (count < 1) {
    *why = fmt::format("the scale of {} is neither constant nor known to be a scalar", op.name);
    return false;
  }
  if (p.zero_point && p.zero_point->isConstant() && ir::numElements(*p.zero_point->initializer()) != count) {
    *why = fmt::format("{} has {} scales and another number of zero points", op.name, count);
    return false;
  }
  if (count == 1) return true;
  if (p.scale->initializer()->dims_size() != 1) {
    *why = fmt::format("the scale of {} is not 1-D", op.name);
    return false;
  }
  p.axis = perAxis(n, op, p.x, why);
  if (!p.axis) return false;
  if (opset < 13) {  // (7)
    *why = fmt::format("{} is quantized per axis, which DequantizeLinear takes from opset 13; the model has {}",
                       op.name, opset);
    return false;
  }
  return true;
}

/// (5): the int32 bias at the product of two scales (times QGemm's alpha), zero point 0.
bool planBias(ir::Node& n, const QOperand& op, int64_t opset, OperandPlan& p, std::string* why) {
  if (p.x->elemType() != onnx::TensorProto::INT32) {
    *why = fmt::format("{} is {}, not int32", op.name, ir::typeName(p.x->elemType()));
    return false;
  }
  auto read = biasReadOf(n);  // shared_bias.h: verify reads the same scale
  if (!read) {
    *why = fmt::format("the scale of {} (the product of the input's and the weight's) needs both constant and positive", op.name);
    return false;
  }
  p.bias_scale = std::move(read->scale);
  for (float s : p.bias_scale)
    if (!(std::isfinite(s) && s > 0)) {
      *why = fmt::format("the scale of {} is {}", op.name, s);
      return false;
    }
  if (p.bias_scale.size() == 1) return true;
  const int64_t rank = knownRank(p.x);  // a conv's [M], QGemm's [N] or [M, N]: the channels are the last axis
  if (rank < 1) {
    *why = fmt::format("{} has a scale per channel but its rank is not known", op.name);
    return false;
  }
  p.axis = rank - 1;
  if (opset < 13) {
    *why = fmt::format("{} is quantized per channel, which DequantizeLinear takes from opset 13; the model has {}",
                       op.name, opset);
    return false;
  }
  return true;
}

/// (1), (6), (8): the float op's attributes.
bool planAttributes(const ir::Node& n, const QOpForm& f, int64_t opset, UnfusePlan& plan, std::string* why) {
  for (const auto& a : n.proto().attribute()) {
    bool listed = false;
    for (const char* name : f.attributes) listed = listed || a.name() == name;
    if (!listed) {
      *why = fmt::format("attribute '{}' has no {} counterpart", a.name(), f.float_op);
      return false;
    }
    if (a.name() == "channels_last" || a.name() == "opset" || (a.name() == "axes" && f.translate == QOpAttributes::kReduceMean && opset >= 18))
      continue;
    plan.attributes.push_back(a);
  }
  if (f.translate == QOpAttributes::kChannelsLast && n.attrInt("channels_last", 0) != 0) {
    plan.channels_last_rank = knownRank(n.input(0));
    if (plan.channels_last_rank < 3) {
      *why = "channels_last is set and the input's rank is not known";
      return false;
    }
  }
  if (f.translate == QOpAttributes::kSoftmax) {
    const int64_t axis = n.attrInt("axis", -1), of = n.attrInt("opset", opset), rank = knownRank(n.input(0));
    const bool last = axis == -1 || (rank > 0 && axis == rank - 1);
    if ((of >= 13) != (opset >= 13) && !last) {
      *why = fmt::format("its softmax is opset {}'s, whose axis {} means another thing in the model's opset {}", of,
                         axis, opset);
      return false;
    }
    plan.attributes.clear();
    onnx::AttributeProto a;
    a.set_name("axis");
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(axis);
    plan.attributes.push_back(a);
  }
  if (f.translate == QOpAttributes::kReduceMean && opset >= 18)
    if (const auto* axes = n.attribute("axes")) plan.axes_input.assign(axes->ints().begin(), axes->ints().end());
  return true;
}

}  // namespace

std::optional<UnfusePlan> selectUnfuse(ir::Node& n, const QOpForm& f, int64_t opset, std::string* why) {
  UnfusePlan plan;
  plan.node = &n;
  plan.form = &f;
  if (opset < 10) {  // (7)
    *why = fmt::format("QuantizeLinear and DequantizeLinear need opset 10; the model has {}", opset);
    return std::nullopt;
  }
  if (!planAttributes(n, f, opset, plan, why)) return std::nullopt;
  std::vector<QOperand> operands = f.operands;
  if (f.variadic_from >= 0) {  // QLinearConcat: (X, scale, zero point) triples
    const size_t from = static_cast<size_t>(f.variadic_from);
    if (n.inputs().size() <= from || (n.inputs().size() - from) % 3 != 0) {
      *why = "its inputs are not (X, X_scale, X_zero_point) triples";
      return std::nullopt;
    }
    for (size_t k = from; k < n.inputs().size(); k += 3)
      operands.push_back({"X", QOperand::kDequantized, static_cast<int>(k), static_cast<int>(k + 1),
                          static_cast<int>(k + 2), ScaleAxis::kNone, false});
  }
  for (size_t i = 0; i < operands.size(); ++i) {
    const QOperand& op = operands[i];
    OperandPlan p;
    p.name = f.variadic_from >= 0 ? fmt::format("X{}", i) : op.name;
    p.kind = op.kind;
    p.x = n.input(static_cast<size_t>(op.x));
    if (!p.x && !op.optional) {  // (2)
      *why = fmt::format("input {} is absent", p.name);
      return std::nullopt;
    }
    if (p.x && op.kind == QOperand::kDequantized && !planDequantized(n, op, opset, p, why)) return std::nullopt;
    if (p.x && op.kind == QOperand::kBias && !planBias(n, op, opset, p, why)) return std::nullopt;
    plan.operands.push_back(std::move(p));
  }
  plan.y_scale = n.input(static_cast<size_t>(f.y_scale));  // (6)
  plan.y_zero_point = n.input(static_cast<size_t>(f.y_zero_point));
  if (!plan.y_scale && f.op_type != std::string("QGemm")) {
    *why = "the output has no scale";
    return std::nullopt;
  }
  if (plan.y_scale && scaleCount(plan.y_scale) != 1) {
    *why = "the output scale is not one value";
    return std::nullopt;
  }
  plan.y_type = plan.y_zero_point ? plan.y_zero_point->elemType() : n.output(0)->elemType();
  if (plan.y_scale && !ir::isInt8Like(plan.y_type)) {
    *why = plan.y_zero_point ? fmt::format("the output zero point is {}", ir::typeName(plan.y_type))
                             : "the output has no zero point and its type is not known";
    return std::nullopt;
  }
  return plan;
}

}  // namespace qconv
