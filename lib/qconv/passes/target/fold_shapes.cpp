// fold-shapes (--target whose runtime needs a computed shape as a constant: aidge, tvm, iree): a
// shape the model computes from static shapes or constants becomes that constant.
//
// Before (Paddle's exports; the PP-OCR recognizer's SVTR neck):
//   t [1, 120, 1, 40] -> Shape -> Slice(0, 2) -> Concat(-1) -> Reshape(t', ·)
//   c (int64 constant) -> Cast(int32) -> ... -> Cast(int64) -> Concat -> Reshape(u, ·)
// After:
//   [1, 120, -1] (int64 constant) -> Reshape(t', ·)
//   (the constant it computes) -> Reshape(u, ·)
// and (torch's F.pad export, Silero VAD's STFT: the pads computed from constants)
//   [0, 64] ++ ConstantOfShape([2]) -> Reshape([-1, 2]) -> Slice(step -1) -> Transpose -> Reshape([-1])
//   -> Cast -> Pad(x, ·, mode reflect)
// becomes Pad(x, [0, 64, 0, 0] (int64 constant), mode reflect).
// Exact: a model whose every input has a declared static shape computes each such shape to the
// same values on every run; shape_eval.h evaluates each op as the specification does, in int64
// with range checks. (Aidge 0.10.1 forwards no dims through a Reshape whose shape it computes
// in a whole model, and a Concat joining that branch with another then fails: "Every input must
// have the same DataFormat"; TVM 0.27 takes a computed shape only as Shape, Slice, Concat, not
// through a Cast; IREE 3.13 fails on a reflect Pad whose pads are computed: "'linalg.generic' op
// inferred input/output operand #1 has shape's dimension #2 to be ..., but found ...".)
//
// A node is folded when:
//   1. the target's profile asks for it (fold_shapes);
//   2. every graph input of the model has a declared static shape (takesOneShape);
//   3. it is a Shape of a tensor whose shape is static (declared, or through Q/DQ: staticShapeOf),
//      or a Slice, Concat, Gather, Unsqueeze, Squeeze, Cast, Add, Sub, Mul, Reshape, Transpose,
//      Identity or ConstantOfShape whose every input is an int64 or int32 constant of at most
//      kMaxShapeValues values (one folded before it, in node order, included), not a graph output;
//   4. shape_eval.h evaluates it (else it stays, with the reason, a note).
// A fold can make more shapes static (a Reshape to a shape now constant): after a sweep that folded
// something, ONNX's inference runs again over the IR (the pass manager's, PassContext::inferShapes)
// and, when it declared a shape, the sweep runs again, at most kMaxRounds times; the refusals are
// said from the last sweep only. (The captcha OCR's unrolled LSTM: the classifier's Reshape reads the
// shape of a tensor that a Reshape of the LSTM's steps makes, whose shape is itself computed: three
// rounds.)
// Then, for a target whose Concat fails after a shape still computed (computed_dims_concat:
// aidge), each Concat joining such a branch with another is refused (exit 4), naming the Reshape.
#include <fmt/format.h>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/computed_dims.h"
#include "qconv/passes/common/shape_eval.h"
#include "qconv/passes/driver.h"

namespace qconv {

namespace {

constexpr int kMaxRounds = 8;

struct FoldShapes {
  struct Group {
    ir::Node* node;
    IntTensor value;
  };
  int64_t opset;
  bool quiet = false;  // a sweep before the last: a node not folded may be folded in the next

  bool root(const ir::Node& n) const { return isShapeOp(n) && n.outputs().size() == 1; }
  std::string declined(const ir::Node&) const { return "shape not folded"; }

  Match<Group> select(ir::Node& n) {
    if (!n.output(0) || n.output(0)->isGraphOutput()) return Match<Group>::none();
    std::vector<int64_t> shape;
    std::vector<std::optional<IntTensor>> in;
    if (n.is("Shape")) {
      if (!n.input(0)) return Match<Group>::none();
      auto dims = staticShapeOf(*n.input(0));
      if (!dims) return Match<Group>::none();  // (3): a shape known at run time only
      shape = std::move(*dims);
    } else {
      for (const ir::Value* v : n.inputs()) {
        if (!v) {
          in.emplace_back();
          continue;
        }
        const int32_t type = v->elemType();
        if (!v->isConstant() || (type != onnx::TensorProto::INT64 && type != onnx::TensorProto::INT32) ||
            ir::numElements(*v->initializer()).value_or(INT64_MAX) > static_cast<int64_t>(kMaxShapeValues))
          return Match<Group>::none();  // (3)
        std::string why;
        auto values = ir::readInts(*v, &why);
        if (!values) return Match<Group>::none();
        in.push_back(IntTensor{v->elemType(), ir::dimsOf(*v->initializer()), std::move(*values)});
      }
    }
    std::string why;
    auto value = evalShapeOp(n, in, shape, opset, &why);
    if (!value) return quiet ? Match<Group>::none() : Match<Group>::refuse(why);  // (4)
    return Group{&n, std::move(*value)};
  }

  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Value* out = g.node->output(0);
    const std::string op = g.node->opType();
    ir::Value* folded = graph.addInitializer(out->name(), ir::makeIntTensor(g.value.type, g.value.dims, g.value.values));
    graph.replaceAllUsesWith(out, folded);
    std::vector<ir::Value*> inputs = g.node->inputs();
    graph.destroyNode(g.node);
    for (ir::Value* v : inputs) graph.pruneIfDead(v);
    ctx.count(fmt::format("{} of a shape folded", op));
  }
};

}  // namespace

void foldShapes(ir::Model& model, PassContext& ctx) {
  const TargetProfile& t = ctx.target();
  if (!t.fold_shapes.empty() && takesOneShape(model.graph)) {  // (1), (2)
    FoldShapes rule{ir::defaultOpset(model), true};
    for (int round = 1; round < kMaxRounds; ++round) {
      const size_t before = model.graph.nodes().size();
      applyRule(model.graph, ctx, rule);
      if (model.graph.nodes().size() == before || ctx.inferShapes() == 0) break;
    }
    rule.quiet = false;
    applyRule(model.graph, ctx, rule);
  }
  if (t.computed_dims_concat.empty()) return;
  for (const ComputedDimsJoin& j : computedDimsJoins(model.graph))
    ctx.report(Report::Unconvertible, *j.concat, computedDimsWhy(j, t));
}

}  // namespace qconv
