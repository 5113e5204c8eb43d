// check-zero-points: with --activation-type int8 --weight-type int8 (the form TensorRT takes:
// int8 with zero point 0), warn about each tensor whose zero point is still not 0 after
// shift-types. A uint8 tensor at zero point 128 became int8 at 0, losslessly; another zero point
// moved by 128 is not 0, and TensorRT refuses such a tensor (it takes symmetric quantization
// only). The model is not changed: making the zero point 0 would change the numbers.
//
// A tensor is named (once, however many Q/DQ nodes carry it) when:
//   1. both --activation-type and --weight-type ask for int8, without --target (with one, a
//      target that takes zero points 0 only refuses the others: check-target);
//   2. it is quantized by a standard QuantizeLinear, or dequantized by a DequantizeLinear,
//      whose zero point is a constant int8 with a value other than 0.
// A zero point that is not constant is named too: nothing says it is 0.
#include <fmt/format.h>

#include <set>

#include "qconv/ir/tensor.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

struct NonZeroPoint {
  const ir::Value* tensor;
  std::string what;
};

struct CheckZeroPoints {
  using Group = NonZeroPoint;
  std::set<const ir::Value*> named;

  bool root(const ir::Node& n) const { return isQuantize(n) || isDequantize(n); }
  std::string declined(const ir::Node&) const { return ""; }

  Match<Group> select(ir::Node& n) {
    const ir::Value* tensor = isQuantize(n) ? n.output(0) : n.input(0);
    const ir::Value* zp = n.input(2);
    // no zero point: 0 (of uint8 when absent: not this check's)
    if (!tensor || !zp || named.count(tensor)) return Match<Group>::none();
    if (!zp->isConstant()) return NonZeroPoint{tensor, "its zero point is not a constant, so it may not be 0"};
    std::string why;
    auto z = ir::readInts(*zp, &why);
    if (!z || zp->initializer()->data_type() != onnx::TensorProto::INT8) return Match<Group>::none();
    for (int64_t v : *z)
      if (v != 0) return NonZeroPoint{tensor, fmt::format("its zero point is {} after the shift to int8", v)};
    return Match<Group>::none();
  }

  void rewrite(ir::Graph&, Group& g, PassContext& ctx) {
    named.insert(g.tensor);
    ctx.report(Report::Advisory, g.tensor->name(),
               fmt::format("{}; runtimes that take int8 with zero point 0 only (TensorRT) refuse it: it needs "
                           "symmetric quantization",
                           g.what));
  }
};

}  // namespace

void checkZeroPoints(ir::Model& model, PassContext& ctx) {
  if (ctx.options().activation_type != onnx::TensorProto::INT8 || ctx.options().weight_type != onnx::TensorProto::INT8)
    return;  // (1)
  if (ctx.options().target) return;  // a target that needs zero points 0 refuses them: check-target
  CheckZeroPoints rule;
  applyRule(model.graph, ctx, rule);
  if (!rule.named.empty())
    ctx.report(Report::Warning, ctx.path(),
               fmt::format("{} int8 tensor(s) keep a zero point other than 0, which runtimes that take int8 with zero point 0 only (TensorRT) refuse (-v names them)", rule.named.size()));
}

}  // namespace qconv
