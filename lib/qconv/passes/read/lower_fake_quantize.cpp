// lower-fake-quantize: OpenVINO FakeQuantize (NNCF's ONNX export) becomes standard ONNX.
//
// Before (domain org.openvinotoolkit):
//   FakeQuantize(x, il, ih, ol, oh; levels) -> y
//   y = ol                                                            if x <= min(il, ih)
//     = oh                                                            if x >  max(il, ih)
//     = round((x - il) / (ih - il) * (levels-1)) / (levels-1) * (oh - ol) + ol   otherwise
//   (OpenVINO's FakeQuantize-1 specification; round is ties to even, as NNCF's torch.round)
// After, by default, the exact emulation: the formula with one float32 op per step, in order:
//   r = Round(Mul(Div(Sub(x, il), Sub(ih, il)), L)) ; v = Add(Mul(Div(r, L), Sub(oh, ol)), ol)
//   y = Where(LessOrEqual(x, Min(il, ih)), ol, Where(Greater(x, Max(il, ih)), oh, v))
// Nothing a QLinear op can fuse: x / s computed as (x - il) / (ih - il) * L rounds differently
// from QuantizeLinear's x / s on ties. With --approximate, a uniform FakeQuantize (1-4 hold)
// becomes QuantizeLinear [-> Clip] -> DequantizeLinear with s = (ih - il) / L and
// zp = round(-il / s), listed as an approximation:
//   1. il, ih, ol, oh are constants, il == ol and ih == oh, il < ih, per tensor or along one axis;
//   2. -il / s is within 1e-3 of an integer zp, the same for every channel;
//   3. levels - 1 steps from -zp fit int8 (zero point 0) or uint8 (zero point zp);
//   4. the default opset is >= 13.
// The emulation needs opset 12 (LessOrEqual) and levels >= 2; without them the node stays and
// qconv refuses the model.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/read/float_emitter.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

void emulate(ir::Graph& g, ir::Node& n, int64_t levels) {
  FloatEmitter e{g, &n};
  ir::Value *x = n.input(0), *il = n.input(1), *ih = n.input(2), *ol = n.input(3), *oh = n.input(4);
  ir::Value* steps = e.constant("fq_levels_minus_one", static_cast<float>(levels - 1));
  ir::Value* r = e.op("Round", {e.op("Mul", {e.op("Div", {e.op("Sub", {x, il}), e.op("Sub", {ih, il})}), steps})});
  ir::Value* v = e.op("Add", {e.op("Mul", {e.op("Div", {r, steps}), e.op("Sub", {oh, ol})}), ol});
  ir::Value* high = e.op("Where", {e.test("Greater", {x, e.op("Max", {il, ih})}), oh, v});
  replaceNode(g, n, g.createNode("Where", "", {e.test("LessOrEqual", {x, e.op("Min", {il, ih})}), ol, high}, 1, &n));
}

struct Uniform {
  std::vector<float> scale;
  bool per_axis = false;
  int64_t axis = 0;
  int32_t type = 0;
  int64_t zero_point = 0, lo = 0, hi = 0;  // standard zero point; integer range after it
};

std::optional<Uniform> uniformOf(const ir::Node& n, int64_t levels, int64_t opset, std::string* why) {
  std::vector<std::vector<float>> v;
  std::vector<int64_t> dims;
  for (size_t k = 1; k <= 4; ++k) {
    std::string inner;
    const ir::Value* p = n.input(k);
    auto f = p && p->isConstant() ? ir::readFloats(*p, &inner) : std::nullopt;
    if (!f || f->empty()) {
      *why = "a range input is not a float constant";
      return std::nullopt;
    }
    if (k == 1) dims = ir::dimsOf(*p->initializer());
    else if (ir::dimsOf(*p->initializer()) != dims) {
      *why = "the four range inputs differ in shape";
      return std::nullopt;
    }
    v.push_back(*f);
  }
  if (v[0] != v[2] || v[1] != v[3]) {  // (1)
    *why = "output range differs from input range";
    return std::nullopt;
  }
  Uniform u;
  if (v[0].size() > 1) {
    const int64_t rank = knownRank(n.input(0)), srank = static_cast<int64_t>(dims.size());
    int64_t axes = 0;
    for (int64_t k = 0; k < srank; ++k)
      if (dims[k] != 1) ++axes, u.axis = rank - srank + k;
    if (axes != 1 || rank < srank) {
      *why = "range varies along more than one axis, or the input's rank is unknown";
      return std::nullopt;
    }
    u.per_axis = true;
  }
  std::optional<int64_t> zp;
  for (size_t c = 0; c < v[0].size(); ++c) {
    const float s = (v[1][c] - v[0][c]) / static_cast<float>(levels - 1);
    const double z = -static_cast<double>(v[0][c]) / s;
    if (!(s > 0 && std::isfinite(s)) || std::fabs(z - std::nearbyint(z)) > 1e-3 ||
        (zp && *zp != static_cast<int64_t>(std::nearbyint(z)))) {  // (2)
      *why = "the range is not a uniform grid with one integer zero point";
      return std::nullopt;
    }
    zp = static_cast<int64_t>(std::nearbyint(z));
    u.scale.push_back(s);
  }
  const int64_t lo = -*zp, hi = levels - 1 - *zp;  // (3)
  if (lo >= -128 && hi <= 127) u.type = onnx::TensorProto::INT8, u.zero_point = 0;
  else if (*zp >= 0 && *zp <= 255 && levels <= 256) u.type = onnx::TensorProto::UINT8, u.zero_point = *zp;
  else {
    *why = fmt::format("{} levels around zero point {} fit neither int8 nor uint8", levels, *zp);
    return std::nullopt;
  }
  u.lo = u.zero_point + lo;
  u.hi = u.zero_point + hi;
  if (opset < 13) {  // (4)
    *why = fmt::format("needs opset 13, the model has {}", opset);
    return std::nullopt;
  }
  return u;
}

/// Operands, one line per input:
///   QuantizeLinear   0 x <- FakeQuantize 0; 1 new s ([C] per axis); 2 new zp:T
///   Clip (narrower)  0 q; 1 new lo:T; 2 new hi:T
///   DequantizeLinear 0 q or clipped q; 1 s; 2 zp; output <- FakeQuantize output
void toQdq(ir::Graph& g, ir::Node& n, const Uniform& u) {
  const int64_t c = static_cast<int64_t>(u.scale.size());
  const std::vector<int64_t> dims = u.per_axis ? std::vector<int64_t>{c} : std::vector<int64_t>{};
  ir::Value* s = g.addInitializer("fq_scale", ir::makeFloatTensor(dims, u.per_axis ? u.scale : std::vector<float>{u.scale[0]}));
  ir::Value* zp = g.addInitializer("fq_zero_point", ir::makeIntTensor(u.type, dims, std::vector<int64_t>(u.per_axis ? c : 1, u.zero_point)));
  replaceWithQdq(g, n, s, zp, u.type, u.per_axis, u.axis, u.lo, u.hi);
}

struct LowerFakeQuantize {
  struct Group {
    ir::Node* node;
    int64_t levels;
    std::optional<Uniform> uniform;  // --approximate and 1-4 hold: Q/DQ; else the emulation
    std::string why;                 // why emulated
  };
  int64_t opset;
  bool approximate;

  bool root(const ir::Node& n) const { return n.domain() == "org.openvinotoolkit" && n.opIs("FakeQuantize"); }
  std::string declined(const ir::Node&) const { return "FakeQuantize not converted"; }

  Match<Group> select(ir::Node& n) {
    const int64_t levels = n.attrInt("levels", 0);
    if (levels < 2 || levels > (int64_t{1} << 24) || n.inputs().size() != 5 ||
        std::any_of(n.inputs().begin(), n.inputs().end(), [](const ir::Value* v) { return !v; }) || opset < 12)
      return Match<Group>::unconvertible(
          fmt::format("needs 5 inputs, levels from 2 to 2^24 and opset 12 (levels {}, opset {})", levels, opset));
    Group g{&n, levels, std::nullopt, ""};
    if (approximate) g.uniform = uniformOf(n, levels, opset, &g.why);
    else g.why = "its formula (x - il) / (ih - il) * (levels-1) is not QuantizeLinear's x / s on ties; --approximate writes Q/DQ";
    return g;
  }

  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Node& n = *g.node;
    if (const auto& u = g.uniform) {
      ctx.report(Report::Approximation, n,
                 fmt::format("FakeQuantize written as QuantizeLinear/DequantizeLinear (scale {:g}{}, zero point {}): x / s "
                             "rounds differently on ties",
                             u->scale[0], u->per_axis ? ", ... per axis" : "", u->zero_point));
      toQdq(graph, n, *u);
      ctx.count("FakeQuantize approximated as Q/DQ");
      return;
    }
    ctx.report(Report::Done, n, fmt::format("FakeQuantize emulated exactly with float ops ({})", g.why));
    emulate(graph, n, g.levels);
    ctx.count("FakeQuantize emulated");
  }
};

}  // namespace

void lowerFakeQuantize(ir::Model& model, PassContext& ctx) {
  LowerFakeQuantize rule{ir::defaultOpset(model), ctx.options().approximate};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
