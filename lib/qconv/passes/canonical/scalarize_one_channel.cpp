// scalarize-one-channel (a target without per-channel quantization: Aidge): a QuantizeLinear or
// DequantizeLinear whose scale is 1-D of one element, one channel (YOLOv8's DFL conv has one
// output channel, and onnxruntime's per-channel quantizer writes its weight's scale as [1]), is
// per tensor in its numbers but per axis to a runtime that reads the shape: Aidge 0.10.1 imports
// it as a GenericOperator. Exact, so no flag is needed.
//
// Before:  q -> DequantizeLinear(s [1], zp [1]; axis a) -> v
// After:   q -> DequantizeLinear(s' [], zp' []) -> v          (s' = s[0], zp' = zp[0])
//
// A node is rewritten when:
//   1. the target (--target) runs no per-channel quantization;
//   2. its scale is a constant of dims [1], not blocked; its zero point absent or a constant of
//      dims [1] (else it stays, and check-target refuses what the target cannot run);
//   3. both are stored in a form ir::storageBytes reads.
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "qconv/diag.h"
#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

/// The rule: a Q/DQ with a scale of one element in a 1-D tensor gets its scale and zero point as
/// scalars, the same numbers, and no axis.
struct ScalarizeOneChannel {
  struct Group {
    ir::Node* n;
  };
  bool root(const ir::Node& n) const { return isQuantize(n) || isDequantize(n); }
  std::string declined(const ir::Node&) const { return "not made per tensor"; }
  Match<Group> select(ir::Node& n) {
    const ir::Value *s = n.input(1), *z = n.input(2);
    if (!s || !s->isConstant() || ir::dimsOf(*s->initializer()) != std::vector<int64_t>{1}) return Match<Group>::none();
    if (n.attrInt("block_size", 0) != 0) return Match<Group>::none();
    if (z && (!z->isConstant() || ir::dimsOf(*z->initializer()) != std::vector<int64_t>{1}))
      return Match<Group>::refuse("its zero point is not a constant of one value");  // (2)
    if (!ir::storageProblem(*s).empty() || (z && !ir::storageProblem(*z).empty()))
      return Match<Group>::refuse("its scale or zero point cannot be read");  // (3)
    return Group{&n};
  }
  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Node& n = *g.n;
    for (size_t slot : {size_t{1}, size_t{2}}) {
      ir::Value* v = n.input(slot);
      if (!v) continue;
      std::string why;
      auto t = std::make_unique<onnx::TensorProto>(*v->initializer());
      std::string bytes;
      const bool read = ir::storageBytes(*v->initializer(), v->fileBytes(), bytes, &why);
      QCONV_ASSERT(read, "{}: checked readable: {}", n.label(), why);
      t->clear_dims();
      t->clear_external_data();
      t->set_data_location(onnx::TensorProto::DEFAULT);
      t->clear_float_data();
      t->clear_int32_data();
      t->clear_double_data();
      t->clear_int64_data();
      t->clear_uint64_data();
      t->set_raw_data(bytes);
      graph.setInput(&n, slot, graph.addInitializer(v->name() + "_scalar", std::move(t)));
      graph.pruneIfDead(v);
    }
    removeAttribute(n, "axis");
    ctx.report(Report::Done, n, fmt::format("one channel made per tensor for --target {} (the same numbers)", ctx.target().name));
    ctx.count("one-channel scales made per tensor");
  }
};



}  // namespace

void scalarizeOneChannel(ir::Model& model, PassContext& ctx) {
  if (ctx.target().per_axis.allowed) return;  // (1)
  ScalarizeOneChannel rule;
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
