// name-leftovers (--format qop): an analysis. Every op still computing between DequantizeLinear
// and QuantizeLinear once the fusions have run is counted per op type in the summary ("2 Conv
// left in QDQ form"), and each one no fusion pass looks at is named with its reason, so that
// nothing is left in QDQ form silently. (Conv, MatMul and Gemm were named by their fusion pass
// when it declined them; data-movement ops by move-on-int8.)
//
// An op is counted when:
//   1. it is in the default domain, is not itself a QuantizeLinear/DequantizeLinear, and has an
//      input from a DequantizeLinear;
//   2. one of its outputs is read by a QuantizeLinear.
// Each one no earlier pass named (a fusion's refusal: Conv, MatMul, Gemm, data movement, and with
// --contrib the ops fuse-contrib looked at) is named here: as one of kNoStandardForm, ops standard
// ONNX has no quantized form of (onnxruntime's com.microsoft ops have one), or as an op no qconv
// pass writes a quantized form of (an unabsorbed Relu, Erf, ...).
#include <fmt/format.h>

#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

struct NoForm {
  const char* op_type;
  const char* contrib;  // onnxruntime's op for it
};

const NoForm kNoStandardForm[] = {
    {"ConvTranspose", "QLinearConvTranspose"}, {"Add", "QLinearAdd"}, {"Mul", "QLinearMul"},
    {"Sigmoid", "QLinearSigmoid"}, {"LeakyRelu", "QLinearLeakyRelu"}, {"Softmax", "QLinearSoftmax"},
    {"GlobalAveragePool", "QLinearGlobalAveragePool"}, {"AveragePool", "QLinearAveragePool"},
    {"ReduceMean", "QLinearReduceMean"}, {"Where", "QLinearWhere"},
};

/// Whether an earlier pass refused `n` already, naming its reason.
bool namedBefore(const PassContext& ctx, const ir::Node& n) {
  const std::string prefix = n.label() + ": ";
  for (const std::string& line : ctx.refusals())
    if (line.compare(0, prefix.size(), prefix) == 0) return true;
  return false;
}

bool readByQuantize(const ir::Node& n) {
  for (const ir::Value* out : n.outputs())
    if (out)
      for (const ir::Use& u : out->uses())
        if (isQuantize(*u.node)) return true;
  return false;
}

struct Leftover {
  ir::Node* node;
};

struct NameLeftovers {
  using Group = Leftover;
  static constexpr bool kNeedsOutput = false;

  bool root(const ir::Node& n) const {
    if (!n.domain().empty() || isQuantize(n) || isDequantize(n)) return false;
    bool dequantized = false;  // (1)
    for (const ir::Value* v : n.inputs()) dequantized = dequantized || dequantizeFeeding(v);
    return dequantized && readByQuantize(n);  // (2)
  }
  std::string declined(const ir::Node&) const { return "stays in QDQ form"; }
  Match<Group> select(ir::Node& n) { return Leftover{&n}; }

  void rewrite(ir::Graph&, Group& g, PassContext& ctx) {
    const ir::Node& n = *g.node;
    ctx.count(fmt::format("{} left in QDQ form", n.opType()));
    if (namedBefore(ctx, n)) return;  // a fusion pass said why already
    for (const NoForm& f : kNoStandardForm)
      if (n.opType() == f.op_type) {
        ctx.report(Report::Refused, n.label(),
                   fmt::format("stays in QDQ form: standard ONNX has no quantized {} (onnxruntime's is com.microsoft {}, "
                               "which --contrib writes where onnxruntime runs it)",
                               f.op_type, f.contrib));
        return;
      }
    ctx.report(Report::Refused, n.label(),
               fmt::format("stays in QDQ form: no qconv pass writes a quantized {} (it computes in float between "
                           "DequantizeLinear and QuantizeLinear)", n.opType()));
  }
};

}  // namespace

void nameLeftovers(ir::Model& model, PassContext& ctx) {
  NameLeftovers rule;
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
