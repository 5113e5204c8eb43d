// reflect-pad-as-gather (--target whose compiler fails on a reflect Pad: iree): a Pad in reflect
// mode becomes a Gather per padded axis, by constant indices.
//
// Before (Silero VAD's STFT, torch's F.pad(x, (0, 64), mode="reflect")):
//   Pad(x [1, 576], pads [0, 0, 0, 64], mode reflect) -> y [1, 640]
// After:
//   Gather(x, [0, 1, ..., 575, 574, 573, ..., 511], axis 1) -> y [1, 640]
// Exact: a reflect Pad copies elements: along an axis of length n with begin and end pads pb and
// pe, output position j reads input position i = j - pb reflected at the ends (-i below 0,
// 2 (n - 1) - i past n - 1), which the specification defines for pb, pe <= n - 1. A Gather by
// those indices copies the same elements; one Gather per padded axis, in axis order, pads them
// one after another as the Pad does at once. (IREE 3.13's lowering of a reflect Pad fails for
// some pad sizes, 16 and 24 to 64 of a 576 axis among them: "'linalg.generic' op inferred
// input/output operand #0 has shape's dimension #0 to be greater than or equal to 64, but
// found 57"; a Gather compiles.)
//
// A Pad is rewritten when:
//   1. the target's profile asks for it (reflect_pad);
//   2. it is a default-domain Pad with mode "reflect";
//   3. its pads are constant (the attribute before opset 11, else input 1, folded by fold-shapes
//      where the model computes them from constants), and so are its axes (input 3) if given;
//   4. its input's shape is static (staticShapeOf) and every pad is in [0, n - 1] of its axis.
#include <fmt/format.h>

#include <algorithm>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/common/shape_eval.h"
#include "qconv/passes/driver.h"

namespace qconv {

namespace {

/// The reflect indices along an axis of length n padded by pb and pe.
std::vector<int64_t> reflectIndices(int64_t n, int64_t pb, int64_t pe) {
  std::vector<int64_t> idx;
  for (int64_t j = 0; j < n + pb + pe; ++j) {
    const int64_t i = j - pb;
    idx.push_back(i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i);
  }
  return idx;
}

struct ReflectPadAsGather {
  struct Group {
    ir::Node* pad;
    std::vector<int64_t> dims;           // the input's shape
    std::vector<int64_t> begin, end;     // per axis of the input
  };
  int64_t opset;

  bool root(const ir::Node& n) const { return n.domain().empty() && n.is("Pad"); }
  std::string declined(const ir::Node&) const { return "reflect Pad kept"; }

  /// The pads as constants, or nullopt with the reason (condition 3).
  std::optional<std::vector<int64_t>> padsOf(const ir::Node& n, std::string* why) const {
    if (opset < 11) {
      if (!n.attribute("pads")) return std::nullopt;
      return n.attrInts("pads");
    }
    const ir::Value* p = n.input(1);
    if (!p || !p->isConstant()) {
      *why = "its pads are computed at run time";
      return std::nullopt;
    }
    return ir::readInts(*p, why);
  }

  Match<Group> select(ir::Node& n) {
    const onnx::AttributeProto* mode = n.attribute("mode");
    if (!mode || mode->s() != "reflect" || !n.input(0)) return Match<Group>::none();  // (2)
    std::string why;
    auto pads = padsOf(n, &why);
    if (!pads) return Match<Group>::refuse(why.empty() ? "its pads are not readable" : why);  // (3)
    const auto dims = staticShapeOf(*n.input(0));
    if (!dims) return Match<Group>::refuse("its input's shape is not known");  // (4)
    const size_t rank = dims->size();
    std::vector<int64_t> axes;
    if (n.inputs().size() > 3 && n.input(3)) {
      if (!n.input(3)->isConstant()) return Match<Group>::refuse("its axes are computed at run time");
      auto a = ir::readInts(*n.input(3), &why);
      if (!a) return Match<Group>::refuse(why);
      axes = *a;
    } else {
      for (size_t k = 0; k < rank; ++k) axes.push_back(static_cast<int64_t>(k));
    }
    if (pads->size() != 2 * axes.size()) return Match<Group>::refuse("its pads are not two per axis");
    Group g{&n, *dims, std::vector<int64_t>(rank, 0), std::vector<int64_t>(rank, 0)};
    for (size_t k = 0; k < axes.size(); ++k) {
      const int64_t a = axes[k] < 0 ? axes[k] + static_cast<int64_t>(rank) : axes[k];
      if (a < 0 || a >= static_cast<int64_t>(rank)) return Match<Group>::refuse("an axis outside its input's rank");
      const auto at = static_cast<size_t>(a);
      const int64_t pb = (*pads)[k], pe = (*pads)[k + axes.size()], length = (*dims)[at];
      if (pb < 0 || pe < 0 || pb > length - 1 || pe > length - 1)  // (4)
        return Match<Group>::refuse(fmt::format("a pad of axis {} outside [0, {}]", a, length - 1));
      g.begin[at] = pb;
      g.end[at] = pe;
    }
    auto padded = [](int64_t p) { return p != 0; };
    if (std::none_of(g.begin.begin(), g.begin.end(), padded) && std::none_of(g.end.begin(), g.end.end(), padded))
      return Match<Group>::none();  // pads nothing
    return g;
  }

  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Value* x = g.pad->input(0);
    ir::Node* last = nullptr;
    for (size_t a = 0; a < g.dims.size(); ++a) {
      if (!g.begin[a] && !g.end[a]) continue;
      const auto idx = reflectIndices(g.dims[a], g.begin[a], g.end[a]);
      ir::Value* indices = graph.addInitializer(
          "reflect_indices", ir::makeIntTensor(onnx::TensorProto::INT64, {static_cast<int64_t>(idx.size())}, idx));
      last = graph.createNode("Gather", "", {x, indices}, 1, g.pad);
      setIntAttribute(*last, "axis", static_cast<int64_t>(a));
      last->output(0)->setElemType(x->elemType());
      graph.setNameHint(last, g.pad->name() + "_gather");
      x = last->output(0);
    }
    QCONV_ASSERT(last, "reflect-pad-as-gather: a Pad with no pad selected");
    graph.takeOutput(last, 0, g.pad->output(0));
    std::vector<ir::Value*> inputs = g.pad->inputs();
    graph.destroyNode(g.pad);
    for (ir::Value* v : inputs)
      if (v) graph.pruneIfDead(v);
    ctx.count("reflect Pads as Gathers");
  }
};

}  // namespace

void reflectPadAsGather(ir::Model& model, PassContext& ctx) {
  if (ctx.target().reflect_pad.empty()) return;  // (1)
  ReflectPadAsGather rule{ir::defaultOpset(model)};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
