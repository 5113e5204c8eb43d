// fuse-qlinear-matmul: a quantized MatMul in QDQ form becomes one QLinearMatMul.
//
// Before:
//   a_q -> DQ(s_a, z_a) --+
//   b_q -> DQ(s_b, z_b) ----> MatMul -> Q(s_y, z_y) -> y_q
// After:
//   QLinearMatMul(a_q, s_a, z_a, b_q, s_b, z_b, s_y, z_y) -> y_q
//
// The group is fused when all of these hold; otherwise it stays in QDQ form and the refusal
// names the node and the failed requirement:
//   1. the target is a default-domain MatMul;
//   2. a comes from a DequantizeLinear with constant per-tensor int8/uint8 parameters;
//   3. b comes from a DequantizeLinear with constant int8/uint8 parameters, per tensor, or per
//      column (b of rank 2, axis 1 or -1, one scale per column);
//   4. a int8 needs b int8 (onnxruntime's kernels: u8*u8, u8*s8, s8*s8);
//   5. the MatMul output has one reader, is not a graph output or read by a subgraph, and
//      that reader is a QuantizeLinear with constant per-tensor int8/uint8 parameters;
//   6. y has a's type (onnxruntime's QLinearMatMul kernels);
//   7. the target (--target) runs a QLinearMatMul with per-column b (common/target_fit.h).
// float16 scales are written as float, widened exactly: QLinearMatMul-21 would take them, but
// onnxruntime's kernels take float only. The QDQ form computes in float16, so a value may round
// the other way where float16's precision (2^-11) cannot tell it from a tie: inside the one step
// a QOp output promises. bfloat16 scales are refused: 8 bits round off near ties too.
// QLinearMatMul has no bias: a following Add stays in QDQ form.
#include <fmt/format.h>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/common/qdq_select.h"
#include "qconv/passes/common/target_fit.h"
#include "qconv/passes/driver.h"

namespace qconv {

namespace {

struct MatMulGroup {
  ir::Node* matmul = nullptr;
  DequantizedInput a;
  DequantizedInput b;
  QuantizedOutput y;
};

std::optional<MatMulGroup> selectMatMulGroup(ir::Node& mm, std::string* why) {
  MatMulGroup g;
  g.matmul = &mm;
  if (!mm.is("MatMul") || mm.inputs().size() != 2) {  // (1)
    *why = "not a MatMul with 2 inputs";
    return std::nullopt;
  }
  auto a = dequantizedInput(mm, 0, "A", why, true);  // (2)
  if (!a) return std::nullopt;
  if (a->params.per_axis) {
    *why = "A is quantized per axis; QLinearMatMul takes a per-tensor A here";
    return std::nullopt;
  }
  g.a = std::move(*a);
  auto b = dequantizedInput(mm, 1, "B", why, true);  // (3)
  if (!b) return std::nullopt;
  g.b = std::move(*b);
  if (g.b.params.per_axis) {
    const int64_t rank = knownRank(g.b.quantized());
    if (rank != 2 || (g.b.params.axis != 1 && g.b.params.axis != -1)) {
      *why = "B is quantized per axis but not per column of a rank-2 B";
      return std::nullopt;
    }
    const auto* init = g.b.quantized()->initializer();
    if (!init || static_cast<int64_t>(g.b.params.size()) != init->dims(1)) {
      *why = "B is quantized per column but is not a constant whose column count matches its scale";
      return std::nullopt;
    }
  }
  if (g.a.params.elem_type == onnx::TensorProto::INT8 && g.b.params.elem_type != onnx::TensorProto::INT8) {  // (4)
    *why = "A is int8 but B is uint8 (QLinearMatMul kernels take int8 A only with int8 B)";
    return std::nullopt;
  }
  auto y = quantizedOutput(mm, false, why, true);  // (5)
  if (!y) return std::nullopt;
  g.y = std::move(*y);
  if (g.y.params.elem_type != g.a.params.elem_type) {  // (6)
    *why = fmt::format("A is {} but the output is {} (QLinearMatMul kernels take y of A's type)",
                       ir::typeName(g.a.params.elem_type), ir::typeName(g.y.params.elem_type));
    return std::nullopt;
  }
  return g;
}

enum { kA, kB, kY };  // the sources: DQ(a), DQ(b), Q(y)
const OperandRow kOperands[] = {
    {"a", kA, 0, false},       {"a_scale", kA, 1, false}, {"a_zero_point", kA, 2, true},
    {"b", kB, 0, false},       {"b_scale", kB, 1, false}, {"b_zero_point", kB, 2, true},
    {"y_scale", kY, 1, false}, {"y_zero_point", kY, 2, true},
};

struct FuseMatMul {
  using Group = MatMulGroup;
  const PassContext& ctx;
  bool root(const ir::Node& n) const { return n.is("MatMul"); }
  std::string declined(const ir::Node&) const { return "not fused"; }

  Match<Group> select(ir::Node& mm) {
    std::string why;
    auto g = selectMatMulGroup(mm, &why);
    if (!g) return Match<Group>::refuse(why);
    if (auto no = matmulFits(ctx, g->b.params.per_axis); !no.empty()) return Match<Group>::refuse(no);  // (7)
    return *g;
  }

  /// The rewrite: kOperands; output 0 <- Q.output 0 (keeps its name and readers).
  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Node* q = g.y.q;
    ir::Node* fused = graph.createNode("QLinearMatMul", "",
                                       gatherOperands(graph, kOperands, {g.a.dq, g.b.dq, q},
                                                      {g.a.params.elem_type, g.b.params.elem_type, g.y.params.elem_type}),
                                       1, q);
    inheritAttributes(*fused, *g.matmul);
    floatScales(graph, *fused, {{1, &g.a.params}, {4, &g.b.params}, {6, &g.y.params}});
    graph.takeOutput(fused, 0, q->output(0));
    graph.destroyNode(q);
    std::vector<ir::Value*> inputs = g.matmul->inputs();
    graph.destroyNode(g.matmul);
    for (ir::Value* v : inputs) graph.pruneIfDead(v);
    ctx.count("QLinearMatMul");
  }
};

}  // namespace

void fuseQLinearMatMul(ir::Model& model, PassContext& ctx) {
  FuseMatMul rule{ctx};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
