// check-target (--target NAME): the output is in a form its runtime runs, or the model is
// refused. An analysis: it changes nothing.
//
// Before/After: the same graph. Each node the target's profile (targets/target.h) rules out is
// reported Unconvertible with the profile's reason, and refuse-foreign-ops, right after, refuses
// the model (exit 4) naming the first. The passes before it already chose the forms the target
// takes where there is one (the fusions and move-on-int8 decline, shift-types stores the target's
// types); what reaches this pass has no such form: a per-channel weight for Aidge, an asymmetric
// activation for TensorRT.
//
// A node is refused, under the limit named, when:
//   1. integer_ops:        it is a ConvInteger or MatMulInteger (quantize_dynamic's, where no scale
//                          chain follows it), quoting the runtime's words for them; else
//      qop:                it is a QOperator op (QLinearConv, QLinearMatMul, ConvInteger,
//                          MatMulInteger) left in a --format qdq output;
//   2. contrib:            it is in the com.microsoft domain: refused with its own line of the
//                          profile (contrib_ops: OpenVINO's QLinearAdd wraps around), kept where
//                          that line says the runtime runs it (OpenVINO's MatMulNBits), and
//                          refused under `contrib` (or unlisted_why) when unlisted;
//   3. blocked:            it is a QuantizeLinear/DequantizeLinear with a block_size;
//      per_axis_activation: one with more than one scale on a tensor that is not a constant;
//      per_axis:           one with more than one scale (per channel, or in blocks: each named
//                          so); --approximate suggested only where it was not given and would help;
//   4. conv_per_channel:   it is a QLinearConv with more than one weight scale;
//      matmul_per_column:  a QLinearMatMul with more than one b scale;
//   5. nonzero_zero_point: it is a QuantizeLinear/DequantizeLinear with a zero point not 0, or
//                          not constant;
//   6. uint8:              it is a QuantizeLinear/DequantizeLinear of a uint8 tensor;
//      int32_dequantize:   of an int32 tensor (fold-dequantized-constants folds the constant ones);
//   7. move_on:            it is a data-movement op (common/quant_slots.h: MaxPool, Reshape, a
//                          nearest Resize, ...), or one computing on 8-bit integers as they are
//                          (computesOnData: any Resize, Pad), whose input 0 is an 8-bit tensor of
//                          a type the target moves no data on (MaxPool on uint8 for IREE, Resize
//                          on uint8 for Aidge): the rule holds for every op qconv writes.
//   8. quant_types:        it is a QuantizeLinear/DequantizeLinear of a type the runtime does not
//                          quantize to (int16 or float8 for Aidge; uint16 or int2 for TensorRT),
//                          or one it takes for weights only, elsewhere (int4 activations for TensorRT).
//   9. float_compute:      it is a DequantizeLinear of a constant read by an op with an output not
//                          read only by QuantizeLinear: weight-only quantization, whose op computes
//                          in float (QNN HTP takes such a DQ only per tensor: float_compute_per_axis_only).
// Without --target nothing is checked.
#include <fmt/format.h>

#include <algorithm>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/quant_slots.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

bool isQOperator(const ir::Node& n) {
  return n.is("QLinearConv") || n.is("QLinearMatMul") || n.is("ConvInteger") || n.is("MatMulInteger");
}


/// More than one value in a constant (a per-axis scale); a non-constant counts as one.
bool severalValues(const ir::Value* v) {
  return v && v->isConstant() && ir::numElements(*v->initializer()).value_or(1) > 1;
}

/// A zero point that is absent, or a constant of zeros.
bool zeroPointIsZero(const ir::Value* zp, std::string* what) {
  if (!zp) return true;
  if (!zp->isConstant()) {
    *what = "its zero point is not a constant";
    return false;
  }
  if (ir::isFloatQuantType(zp->initializer()->data_type())) return true;  // float8/float4: 0 by the operator's definition
  std::string why;
  auto z = ir::readInts(*zp, &why);
  if (!z) {
    *what = "its zero point cannot be read: " + why;
    return false;
  }
  for (int64_t v : *z)
    if (v != 0) {
      *what = fmt::format("its zero point is {}", v);
      return false;
    }
  return true;
}

/// Read only by QuantizeLinear: a value a quantized op makes.
bool quantizedOnly(const ir::Value* v) {
  if (v->isGraphOutput() || v->uses().empty()) return false;
  for (const ir::Use& u : v->uses())
    if (!isQuantize(*u.node)) return false;
  return true;
}

struct CheckTarget {
  struct Group {};
  const TargetProfile& t;
  bool approximate;  // --approximate was given: no refusal suggests it

  bool root(const ir::Node&) const { return true; }
  std::string declined(const ir::Node&) const { return fmt::format("not run by --target {}", t.name); }

  Match<Group> select(ir::Node& n) {
    using M = Match<Group>;
    auto no = [](const Limit& limit, const std::string& what = "") {
      return M::unconvertible(what.empty() ? std::string(limit.why) : what + ": " + std::string(limit.why));
    };
    const bool integer_op = n.is("ConvInteger") || n.is("MatMulInteger");
    if (integer_op && !t.integer_ops.allowed) return no(t.integer_ops);  // (1)
    if (isQOperator(n) && !t.qop.allowed) return no(t.qop);
    if (n.domain() == "com.microsoft") {  // (2) the op's own line of the profile, else the rule for the rest
      if (const ContribOp* c = findContribOp(t, n.opType()))
        return c->why.empty() ? M::none() : M::unconvertible(std::string(c->why));
      if (!t.contrib.allowed)
        return t.unlisted_why.empty() ? no(t.contrib, "com.microsoft " + n.opType())
                                      : M::unconvertible(fmt::format(fmt::runtime(t.unlisted_why), n.opType()));
    }
    if (isQuantize(n) || isDequantize(n)) {
      const bool blocked = n.attrInt("block_size", 0) != 0;
      const bool constant = isDequantize(n) && n.input(0) && n.input(0)->isConstant();
      if (blocked && !t.blocked.allowed)  // (3)
        return no(t.blocked, approximate || !constant ? "it dequantizes in blocks"
                                                      : "it dequantizes in blocks (--approximate requantizes such a "
                                                        "constant per channel, at 8 bits)");
      if (constant && !t.float_compute.allowed && n.output(0) &&
          (!t.float_compute_per_axis_only || severalValues(n.input(1))))  // (9)
        for (const ir::Use& u : n.output(0)->uses())
          for (const ir::Value* out : u.node->outputs())
            if (out && !quantizedOnly(out))
              return no(t.float_compute, fmt::format("{} ({}) reads it and computes in float", u.node->label(), u.node->opType()));
      if (severalValues(n.input(1)) && !constant && !t.per_axis_activation.allowed)
        return no(t.per_axis_activation, "it is per channel on a tensor that is not a constant");
      if (severalValues(n.input(1)) && !t.per_axis.allowed) {
        std::string what = blocked ? "it dequantizes in blocks" : constant ? "it dequantizes per channel" : "it is per channel";
        if (constant && !blocked && !approximate) what += " (--approximate requantizes such a constant per tensor)";
        return no(t.per_axis, what);
      }
      std::string what;
      if (!t.nonzero_zero_point.allowed && !zeroPointIsZero(n.input(2), &what)) return no(t.nonzero_zero_point, what);  // (5)
      const ir::Value* q = isQuantize(n) ? n.output(0) : n.input(0);
      int32_t type = q ? ir::elementType(*q) : 0;
      if (!type && n.input(2)) type = ir::elementType(*n.input(2));  // the zero point's: the quantized type
      if (!t.uint8.allowed && type == onnx::TensorProto::UINT8) return no(t.uint8, "it is uint8");  // (6)
      if (!t.int32_dequantize.allowed && isDequantize(n) && type == onnx::TensorProto::INT32)
        return no(t.int32_dequantize, "it is int32");
      if (type && !takesType(t, type))
        return no(Limit{false, t.types_why}, fmt::format("it is {}", ir::typeName(type)));  // (8)
      const auto& weight_only = t.weight_only_types;
      if (std::find(weight_only.begin(), weight_only.end(), type) != weight_only.end() && !(isDequantize(n) && n.input(0) && n.input(0)->isConstant()))
        return no(Limit{false, t.types_why}, fmt::format("it is {}, not a weight", ir::typeName(type)));
      return M::none();
    }
    if (n.is("QLinearConv") && severalValues(n.input(4)) && !t.conv_per_channel.allowed) return no(t.conv_per_channel);  // (4)
    if (n.is("QLinearMatMul") && severalValues(n.input(4)) && !t.matmul_per_column.allowed) return no(t.matmul_per_column);
    if (computesOnData(n) && n.input(0)) {  // (7)
      const int32_t type = ir::elementType(*n.input(0));
      if (!movesDataOn(t, type)) return no(Limit{false, t.move_why}, fmt::format("{} on {}", n.opType(), ir::typeName(type)));
    }
    return M::none();
  }
  void rewrite(ir::Graph&, Group&, PassContext&) {}
};

}  // namespace

void checkTarget(ir::Model& model, PassContext& ctx) {
  if (!ctx.options().target) return;
  CheckTarget rule{*ctx.options().target, ctx.options().approximate};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
