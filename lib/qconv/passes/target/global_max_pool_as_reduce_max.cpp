// global-max-pool-as-reduce-max (--target whose importer has no GlobalMaxPool: aidge): a
// GlobalMaxPool becomes a ReduceMax over its spatial axes, keeping them.
//
// Before (Magika's file-type classifier, its input [1, 256, 512] dequantized):
//   GlobalMaxPool(x [N, C, D1, ..., Dk]) -> y [N, C, 1, ..., 1]
// After:
//   ReduceMax(x, axes [2, ..., k + 1], keepdims 1) -> y [N, C, 1, ..., 1]
//   (axes as an attribute below opset 18, as a constant input from 18 on)
// Exact: the specification defines GlobalMaxPool as the maximum over all values of each channel,
// the spatial axes kept as 1; ReduceMax over those axes with keepdims computes the same maximum
// of the same values, in the same element type. (aidge_onnx 0.10.1 imports GlobalMaxPool as a
// GenericOperator, which has no forward(), at rank 3 and 4, float or between Q/DQ; ReduceMax so
// runs and equals the reference exactly: test_op_tables.py.)
//
// A GlobalMaxPool is rewritten when:
//   1. the target's profile asks for it (global_max_pool);
//   2. it is a default-domain GlobalMaxPool;
//   3. the rank of its input or output is known (declared, or as the stage "infer shapes" gives
//      it, on the value or across the QuantizeLinear/DequantizeLinear beside it: declaredRank),
//      and is at least 3. Otherwise it stays, and check-ops refuses it.
#include <fmt/format.h>

#include <numeric>
#include <vector>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

struct GlobalMaxPoolAsReduceMax {
  struct Group {
    ir::Node* pool;
    int64_t rank;
  };
  int64_t opset;

  bool root(const ir::Node& n) const { return n.domain().empty() && n.is("GlobalMaxPool"); }  // (2)
  std::string declined(const ir::Node&) const { return "GlobalMaxPool kept"; }

  Match<Group> select(ir::Node& n) {
    int64_t rank = declaredRank(n.input(0));
    if (rank < 0) rank = declaredRank(n.output(0));
    if (rank < 0) return Match<Group>::refuse("the rank of its input is not known");  // (3)
    if (rank < 3) return Match<Group>::refuse(fmt::format("its input has rank {}, no spatial axis", rank));
    return Group{&n, rank};
  }

  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    std::vector<int64_t> axes(static_cast<size_t>(g.rank - 2));
    std::iota(axes.begin(), axes.end(), int64_t{2});
    std::vector<ir::Value*> inputs{g.pool->input(0)};
    if (opset >= 18)
      inputs.push_back(graph.addInitializer(
          "reduce_axes", ir::makeIntTensor(onnx::TensorProto::INT64, {static_cast<int64_t>(axes.size())}, axes)));
    ir::Node* reduce = graph.createNode("ReduceMax", "", inputs, 1, g.pool);
    if (opset < 18) setIntsAttribute(*reduce, "axes", axes);
    setIntAttribute(*reduce, "keepdims", 1);
    reduce->output(0)->setElemType(g.pool->input(0)->elemType());
    graph.setNameHint(reduce, g.pool->name() + "_reduce_max");
    graph.takeOutput(reduce, 0, g.pool->output(0));
    graph.destroyNode(g.pool);
    ctx.count("GlobalMaxPools as ReduceMax");
  }
};

}  // namespace

void globalMaxPoolAsReduceMax(ir::Model& model, PassContext& ctx) {
  if (ctx.target().global_max_pool.empty()) return;  // (1)
  GlobalMaxPoolAsReduceMax rule{ir::defaultOpset(model)};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
