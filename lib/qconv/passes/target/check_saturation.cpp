// check-saturation: say where onnxruntime's x86 u8 x s8 kernels will not compute the model; with
// --target, the target's (OpenVINO's, measured to saturate the same way), and for a target
// without such kernels (TensorRT, IREE, TVM, Aidge) nothing.
//
// An analysis: it changes nothing. On an x86 CPU without VNNI (AVX2, or AVX-512 without VNNI),
// onnxruntime multiplies uint8 activations by int8 weights with vpmaddubsw, which sums each
// pair of adjacent products along the reduction dimension into a saturating int16. With raw
// activations in [0, 255], a weight pair (w0, w1) can leave int16 exactly when both have one
// sign and |w0 + w1| >= 129 (255 * 129 > 32767; 255 * 128 and mixed signs fit).
//
// The pairs are (0,1), (2,3), ... in the order onnxruntime packs the reduction dimension:
//   MatMul, Gemm:  along K;
//   Conv:          per group, kernel position major, input channel minor (its ReorderFilter);
//                  a depthwise conv (one input and one output channel per group) runs on a
//                  kernel without pairs.
// Nodes checked, each counted once:
//   1. QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger, com.microsoft QGemm with uint8 x
//      and a constant int8 w;
//   2. QDQ groups onnxruntime fuses into those kernels: a Conv that fuse-qlinear-conv would
//      fuse, a MatMul or Gemm whose input 0 comes from a DequantizeLinear; with a constant int8
//      weight behind a DequantizeLinear, and int8 or uint8 activations (onnxruntime turns int8
//      activations into uint8 on x86 before it fuses).
// Each node with such pairs gets one warning with the count and the remedy; a summary follows.
// Every such weight is read once (weight_pairs.h); --no-saturation-check skips the pass.
#include <fmt/format.h>

#include <string_view>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/conv_group.h"
#include "qconv/passes/common/qdq_select.h"
#include "qconv/passes/target/weight_pairs.h"
#include "qconv/passes/driver.h"

namespace qconv {

namespace {

using onnx::TensorProto;

/// A weight a u8 x s8 kernel multiplies, and how its reduction dimension is laid out.
struct Weight {
  const ir::Value* value = nullptr;
  PairLayout layout = PairLayout::MatrixKN;
  int64_t group = 1;
};

/// The int8 constant weight `v`, or nullopt.
std::optional<Weight> int8Weight(const ir::Value* v, PairLayout layout, int64_t group) {
  if (!v || !v->isConstant() || v->initializer()->data_type() != TensorProto::INT8) return std::nullopt;
  const auto dims = ir::dimsOf(*v->initializer());
  if (dims.empty() || (layout == PairLayout::ConvMCk && (dims.size() < 3 || group <= 0 || dims[0] % group)))
    return std::nullopt;
  for (int64_t x : dims)
    if (x <= 0) return std::nullopt;
  return Weight{v, layout, group};
}

/// The type of a quantized operand of a QOp node: its zero point's, else the value's.
int32_t operandType(const ir::Node& n, size_t data, size_t zp) {
  if (const ir::Value* z = n.input(zp); z && z->isConstant()) return z->initializer()->data_type();
  return n.input(data) ? n.input(data)->elemType() : 0;
}

/// The weight a u8 x s8 kernel would multiply at node `n`, or nullopt when none would run.
std::optional<Weight> u8s8Weight(ir::Node& n) {
  const int64_t group = n.attrInt("group", 1);
  if (n.is("QLinearConv") || n.is("QLinearMatMul") || n.is("ConvInteger") || n.is("MatMulInteger")) {
    const bool qlinear = n.opType().rfind("QLinear", 0) == 0;
    const size_t w = qlinear ? 3 : 1;
    if (operandType(n, 0, 2) != TensorProto::UINT8) return std::nullopt;
    const bool conv = n.opType().find("Conv") != std::string::npos;
    return int8Weight(n.input(w), conv ? PairLayout::ConvMCk : PairLayout::MatrixKN, group);
  }
  if (n.domain() == "com.microsoft" && n.opIs("QGemm")) {  // kept by --format qop, or refused by unfuse-qop
    if (operandType(n, 0, 2) != TensorProto::UINT8) return std::nullopt;
    return int8Weight(n.input(3), n.attrInt("transB", 0) ? PairLayout::MatrixNK : PairLayout::MatrixKN, 1);
  }
  std::string why;
  if (n.is("Conv")) {
    auto g = selectConvGroup(n, &why);
    if (!g || g->w.params.elem_type != TensorProto::INT8) return std::nullopt;
    return int8Weight(g->w.quantized(), PairLayout::ConvMCk, group);
  }
  if (n.is("MatMul") || n.is("Gemm")) {
    auto x = dequantizedInput(n, 0, "A", &why);
    auto w = dequantizedInput(n, 1, "B", &why);
    if (!x || !w || w->params.elem_type != TensorProto::INT8) return std::nullopt;
    const bool nk = n.is("Gemm") && n.attrInt("transB", 0) != 0;
    return int8Weight(w->quantized(), nk ? PairLayout::MatrixNK : PairLayout::MatrixKN, 1);
  }
  return std::nullopt;
}

/// The rule: each node a u8 x s8 kernel would run is selected with its weight's pair count;
/// the action warns when some pair can saturate. The rule keeps the totals for the summary.
struct CheckSaturation {
  struct Group {
    ir::Node* node;
    WeightPairs pairs;
  };
  std::string_view kernels;  // whose: the target's saturating_kernels ("onnxruntime")
  int64_t nodes = 0, flagged = 0, pairs = 0;
  PairScratch scratch;

  bool root(const ir::Node& n) const {
    static constexpr std::string_view kRoots[] = {"QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger",
                                                  "Conv",        "MatMul",        "Gemm"};
    for (std::string_view op : kRoots)
      if (n.is(op)) return true;
    return n.domain() == "com.microsoft" && n.opIs("QGemm");
  }
  std::string declined(const ir::Node&) const { return "weight pairs not counted"; }

  Match<Group> select(ir::Node& n) {
    auto w = u8s8Weight(n);
    if (!w) return Match<Group>::none();
    ++nodes;
    const auto counted = countWeightPairs(*w->value, w->layout, w->group, scratch);
    if (!counted) return Match<Group>::refuse("its weight cannot be read", Report::Detail);
    if (counted->saturable == 0) return Match<Group>::none();
    return Group{&n, *counted};
  }

  void rewrite(ir::Graph&, Group& g, PassContext& ctx) {
    ++flagged;
    pairs += g.pairs.saturable;
    ctx.report(Report::Advisory, *g.node,
               fmt::format("{} of {} weight pairs can saturate {}'s u8 x s8 kernel on x86 CPUs without VNNI; "
                           "--weight-type uint8 computes exactly on every CPU",
                           g.pairs.saturable, g.pairs.total, kernels));
  }
};

}  // namespace

void checkSaturation(ir::Model& model, PassContext& ctx) {
  const std::string_view kernels = ctx.target().saturating_kernels;
  if (!ctx.options().check_saturation || kernels.empty()) return;  // a target without such kernels
  CheckSaturation rule;
  rule.kernels = kernels;
  applyRule(model.graph, ctx, rule);
  if (rule.flagged)
    ctx.report(Report::Warning, ctx.path(),
               fmt::format("{} weight pairs in {} of {} u8 x s8 nodes can saturate {}'s x86 kernels on CPUs without "
                           "VNNI (AVX2, AVX-512 without VNNI), where their results may be off by many steps: "
                           "--weight-type uint8 computes exactly on every CPU (docs/onnxruntime-cpu.md; -v names the nodes)",
                           rule.pairs, rule.flagged, rule.nodes, kernels));
}

}  // namespace qconv
