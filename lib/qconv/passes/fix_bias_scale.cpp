// fix-bias-scale: give every QLinearConv the bias QLinearConv defines.
//
// Before:
//   QLinearConv(x, s_x, z_x, w, s_w, z_w, s_y, z_y, B)    B float: a constant, or DQ(b_i, s_b, 0)
// After:
//   QLinearConv(x, s_x, z_x, w, s_w, z_w, s_y, z_y, B')   B' int32 constant [M],
//   B'[c] = round_half_even(B[c] / (s_x * s_w[c])), zero point 0
//
// Conditions (a QLinearConv that fails them is bad input, reported naming the node):
//   1. s_x is a constant scalar, s_w a constant scalar or [M], w a constant with M = dims[0];
//   2. B is a constant float [M], or a DequantizeLinear of a constant int32 [M], zero point 0;
//   3. every B'[c] fits int32. If not, the conversion stops naming node and channel, unless
//      --raise-weight-scale: then s_w[c] is raised until B'[c] fits and channel c's weights
//      are requantized to it (onnxruntime's quantizer does the same); each raise is reported
//      as an approximation (log and the output's metadata_props).
// A DQ bias already at s_x * s_w[c] (the same float32 bits) is kept as it is: no rounding.
// A bias at another scale is requantized, which moves it by at most half a step of s_x*s_w[c].
#include <cmath>
#include <cstring>
#include <limits>

#include "qconv/diag.h"
#include "qconv/ir/tensor.h"
#include "qconv/pipeline/pass.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

constexpr double kInt32Max = std::numeric_limits<int32_t>::max();
constexpr double kInt32Min = std::numeric_limits<int32_t>::min();

struct ConvOperands {
  float x_scale = 0;
  std::vector<float> w_scale;  // expanded to M
  std::vector<float> bias;     // real bias values, float32 as the DQ computes them
  std::vector<int64_t> bias_int;
  std::vector<float> bias_dq_scale;  // expanded to M, when the bias comes through a DQ
  int64_t m = 0;
};

[[noreturn]] void fail(const PassContext& ctx, const ir::Node& n, const std::string& what) {
  throw Error(ExitCode::Unsupported, fmt::format("{}: node '{}' (QLinearConv): {}", ctx.path(), n.label(), what));
}

std::vector<float> floatsOf(const PassContext& ctx, const ir::Node& n, const ir::Value* v, const char* role) {
  std::string why = "not constant";
  auto f = v && v->isConstant() ? ir::readFloats(*v->initializer(), &why) : std::nullopt;
  if (!f || f->empty()) fail(ctx, n, fmt::format("{} is unusable: {}", role, why));
  return *f;
}

std::vector<float> expand(std::vector<float> v, int64_t m) {
  if (v.size() == 1) v.assign(static_cast<size_t>(m), v[0]);
  return v;
}

ConvOperands readOperands(const PassContext& ctx, const ir::Node& n) {
  ConvOperands ops;
  const ir::Value* w = n.input(3);
  if (!w || !w->isConstant() || w->initializer()->dims_size() < 1) fail(ctx, n, "weight is not a constant initializer");
  ops.m = w->initializer()->dims(0);
  auto xs = floatsOf(ctx, n, n.input(1), "x_scale");
  if (xs.size() != 1) fail(ctx, n, "x_scale is not a scalar");
  ops.x_scale = xs[0];
  ops.w_scale = expand(floatsOf(ctx, n, n.input(4), "w_scale"), ops.m);
  if (static_cast<int64_t>(ops.w_scale.size()) != ops.m) fail(ctx, n, "w_scale is neither a scalar nor [M]");

  const ir::Value* b = n.input(8);
  std::string why;
  if (ir::Node* dq = dequantizeFeeding(b)) {
    auto q = readConstQuant(*dq, &why);
    const ir::Value* bi = dq->input(0);
    auto ints = bi && bi->isConstant() ? ir::readInts(*bi->initializer(), &why) : std::nullopt;
    if (!q || !ints) fail(ctx, n, "bias DequantizeLinear is unusable: " + (why.empty() ? "input not constant" : why));
    if (static_cast<int64_t>(ints->size()) != ops.m) fail(ctx, n, "bias does not have one value per output channel");
    ops.bias_dq_scale = expand(q->scale, ops.m);
    ops.bias_int = *ints;
    for (int64_t c = 0; c < ops.m; ++c) ops.bias.push_back(static_cast<float>(ints->at(c)) * ops.bias_dq_scale[c]);
  } else {
    ops.bias = floatsOf(ctx, n, b, "bias");
    if (static_cast<int64_t>(ops.bias.size()) != ops.m) fail(ctx, n, "bias does not have one value per output channel");
  }
  return ops;
}

double requantized(float real, float x_scale, float w_scale) {
  return std::nearbyint(static_cast<double>(real) / static_cast<double>(x_scale * w_scale));
}

/// --raise-weight-scale: raise s_w[c] until the bias of channel c fits, requantize w[c].
void raiseWeightScale(ir::Graph& graph, PassContext& ctx, ir::Node& n, ConvOperands& ops,
                      const std::vector<int64_t>& channels) {
  const ir::Value* w = n.input(3);
  std::string why;
  auto wq = ir::readInts(*w->initializer(), &why);
  if (!wq) fail(ctx, n, "weight is unusable: " + why);
  if (const ir::Value* zp = n.input(5)) {
    auto z = zp->isConstant() ? ir::readInts(*zp->initializer(), &why) : std::nullopt;
    for (int64_t v : z.value_or(std::vector<int64_t>{1}))
      if (v != 0) fail(ctx, n, "cannot raise the weight scale: weight zero point is not constant 0");
  }
  const int32_t wtype = w->initializer()->data_type();
  auto [lo, hi] = ir::intRange(wtype);
  const size_t per = wq->size() / static_cast<size_t>(ops.m);
  for (int64_t c : channels) {
    const float old = ops.w_scale[c];
    float s = static_cast<float>(std::fabs(static_cast<double>(ops.bias[c])) / (ops.x_scale * (kInt32Max - 128.0)));
    s = std::max(s, old);
    while (std::fabs(requantized(ops.bias[c], ops.x_scale, s)) > kInt32Max)
      s = std::nextafter(s, std::numeric_limits<float>::infinity());
    for (size_t k = 0; k < per; ++k) {
      int64_t& v = (*wq)[static_cast<size_t>(c) * per + k];
      const double r = std::nearbyint(static_cast<double>(v) * old / s);
      v = static_cast<int64_t>(std::min<double>(hi, std::max<double>(lo, r)));
    }
    ops.w_scale[c] = s;
    ctx.approximate(n, fmt::format("output channel {}: bias {} does not fit int32 at scale x_scale*w_scale = {}; "
                                   "weight scale raised from {} to {} and the channel's weights requantized",
                                   c, ops.bias[c], ops.x_scale * old, old, s));
  }
  ir::Value* old_w = n.input(3);
  ir::Value* old_s = n.input(4);
  ir::Value* old_z = n.input(5);
  graph.setInput(&n, 3, graph.addInitializer(old_w->name(), ir::makeIntTensor(wtype, ir::dimsOf(*w->initializer()), *wq)));
  graph.setInput(&n, 4, graph.addInitializer(old_s->name(), ir::makeFloatTensor({ops.m}, ops.w_scale)));
  graph.setInput(&n, 5, graph.addInitializer("w_zero_point", ir::makeIntTensor(wtype, {ops.m}, std::vector<int64_t>(ops.m, 0))));
  for (ir::Value* v : {old_w, old_s, old_z}) graph.pruneIfDead(v);
}

}  // namespace

void fixBiasScale(ir::Model& model, PassContext& ctx) {
  ir::Graph& graph = model.graph;
  for (ir::Node* n : graph.nodeSnapshot()) {
    if (!graph.isAlive(n) || !n->is("QLinearConv") || !n->input(8)) continue;
    ir::Value* b = n->input(8);
    const bool floatConst = b->isConstant() && b->initializer()->data_type() == onnx::TensorProto::FLOAT;
    if (!floatConst && !dequantizeFeeding(b)) continue;  // an int32 bias, as QLinearConv defines it
    ConvOperands ops = readOperands(ctx, *n);

    // Already at s_x * s_w[c], zero point 0 (checked by the selector): keep the int32 tensor.
    bool sameScale = !ops.bias_dq_scale.empty();
    for (int64_t c = 0; sameScale && c < ops.m; ++c) {
      const float want = ops.x_scale * ops.w_scale[c];
      sameScale = std::memcmp(&want, &ops.bias_dq_scale[c], sizeof(float)) == 0;
    }
    if (sameScale) {
      graph.setInput(n, 8, dequantizeFeeding(b)->input(0));
      graph.pruneIfDead(b);
      ctx.count("bias kept at x_scale*w_scale");
      continue;
    }
    for (int64_t c = 0; c < ops.m; ++c)  // found by the fuzzer: a NaN bias reached an int cast
      if (!std::isfinite(ops.bias[c]))
        throw Error(ExitCode::BadInput, fmt::format("{}: node '{}' (QLinearConv): bias of output channel {} is {}",
                                                    ctx.path(), n->label(), c, ops.bias[c]));
    std::vector<int64_t> overflow;
    for (int64_t c = 0; c < ops.m; ++c) {
      const double q = requantized(ops.bias[c], ops.x_scale, ops.w_scale[c]);
      if (!(q >= kInt32Min && q <= kInt32Max)) overflow.push_back(c);
    }
    if (!overflow.empty() && !ctx.options().raise_weight_scale) {
      const int64_t c = overflow[0];
      fail(ctx, *n,
           fmt::format("bias of output channel {} is {} and does not fit int32 at scale x_scale*w_scale = {} "
                       "({} channel(s) overflow); rerun with --raise-weight-scale to raise those channels' "
                       "weight scales (an approximation)",
                       c, ops.bias[c], ops.x_scale * ops.w_scale[c], overflow.size()));
    }
    if (!overflow.empty()) raiseWeightScale(graph, ctx, *n, ops, overflow);
    std::vector<int64_t> q(static_cast<size_t>(ops.m));
    for (int64_t c = 0; c < ops.m; ++c)
      q[c] = static_cast<int64_t>(requantized(ops.bias[c], ops.x_scale, ops.w_scale[c]));
    graph.setInput(n, 8, graph.addInitializer(b->name() + "_int32", ir::makeIntTensor(onnx::TensorProto::INT32, {ops.m}, q)));
    graph.pruneIfDead(b);
    ctx.note(*n, "bias requantized to int32 at x_scale*w_scale");
    ctx.count("bias requantized");
  }
}

}  // namespace qconv
