// trim-padding (--target whose compiler fails on padding no window reads: iree): a convolution's
// end padding that no output window reads is dropped.
//
// Before (Silero VAD's encoder, a strided 1-D Conv):
//   Conv(x [1, 64, 2], w [64, 64, 3]; pads [1, 1], strides [2]) -> y [1, 64, 1]
// After:
//   Conv(x [1, 64, 2], w [64, 64, 3]; pads [1, 0], strides [2]) -> y [1, 64, 1]
// Exact: along an axis of input length L, begin and end pads pb and pe, kernel k, dilation d and
// stride s, the windows (each K = (k - 1) * d + 1 long) start at 0, s, 2s, ... of the padded
// input, the last at floor((L + pb + pe - K) / s) * s; the last r = (L + pb + pe - K) mod s
// padded positions are read by no window. So pe - min(r, pe) gives the same output length and
// the same windows. (IREE 3.13's lowering of such a Conv fails where that axis's output has one
// position: "'linalg.generic' op inferred input/output operand #1 has shape's dimension #2 to be
// 4, but found 3"; probed: lengths 2 (kernel 3, stride 2 or 3), 4 (stride 4), 2x2 and 3x3 fail,
// every output of 2 or more positions compiles. Only those axes are trimmed: asymmetric pads on
// other Convs are exact too, but IREE's importer crashed on a QLinearConv with them.)
//
// A node's padding is trimmed when:
//   1. the target's profile asks for it (trim_padding);
//   2. it is a Conv, ConvInteger or QLinearConv in the default domain with explicit pads
//      (auto_pad absent or NOTSET);
//   3. its input's spatial dims and its weight's kernel dims are known (staticShapeOf);
//   4. along some axis the output has one position (a single window), r > 0 and pe > 0.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "qconv/passes/common/action_util.h"
#include "qconv/passes/common/shape_eval.h"
#include "qconv/passes/driver.h"

namespace qconv {

namespace {

struct TrimPadding {
  struct Group {
    ir::Node* node;
    std::vector<int64_t> pads;  // the trimmed pads
    int64_t dropped;            // padded positions dropped, over every axis
  };

  bool root(const ir::Node& n) const {
    return n.domain().empty() && (n.is("Conv") || n.is("ConvInteger") || n.is("QLinearConv"));
  }
  std::string declined(const ir::Node&) const { return "padding not trimmed"; }

  Match<Group> select(ir::Node& n) {
    const onnx::AttributeProto* autoPad = n.attribute("auto_pad");
    if (autoPad && autoPad->s() != "NOTSET") return Match<Group>::none();  // (2)
    std::vector<int64_t> pads = n.attrInts("pads");
    const size_t weight = n.is("QLinearConv") ? 3 : 1;
    if (pads.empty() || !n.input(0) || n.inputs().size() <= weight || !n.input(weight)) return Match<Group>::none();
    const auto x = staticShapeOf(*n.input(0));
    const auto w = staticShapeOf(*n.input(weight));
    const size_t axes = pads.size() / 2;
    if (!x || !w || x->size() != axes + 2 || w->size() != axes + 2) return Match<Group>::none();  // (3)
    std::vector<int64_t> strides = n.attrInts("strides"), dilations = n.attrInts("dilations");
    strides.resize(axes, 1);
    dilations.resize(axes, 1);
    int64_t dropped = 0;
    for (size_t a = 0; a < axes; ++a) {
      const int64_t extent = (*w)[a + 2], s = strides[a], d = dilations[a];
      const int64_t span = (*x)[a + 2] + pads[a] + pads[a + axes] - ((extent - 1) * d + 1);
      if (span < 0 || s < 1) return Match<Group>::none();  // no window at all: the model's own problem
      const int64_t unread = span / s == 0 ? std::min(span % s, pads[a + axes]) : 0;  // (4): one window
      pads[a + axes] -= unread;
      dropped += unread;
    }
    if (!dropped) return Match<Group>::none();
    return Group{&n, std::move(pads), dropped};
  }

  void rewrite(ir::Graph&, Group& g, PassContext& ctx) {
    removeAttribute(*g.node, "pads");
    setIntsAttribute(*g.node, "pads", g.pads);
    ctx.report(Report::Done, *g.node,
               fmt::format("{} end padding position{} no window reads dropped (pads now [{}])", g.dropped,
                           g.dropped == 1 ? "" : "s", fmt::join(g.pads, ", ")));
    ctx.count("convolutions' unread padding dropped");
  }
};

}  // namespace

void trimPadding(ir::Model& model, PassContext& ctx) {
  if (ctx.target().trim_padding.empty()) return;  // (1)
  TrimPadding rule;
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
