// check-saturation: say where onnxruntime's x86 u8 x s8 kernels will not compute the model.
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
//   1. QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger with uint8 x and a constant int8 w;
//   2. QDQ groups onnxruntime fuses into those kernels: a Conv that fuse-qlinear-conv would
//      fuse, a MatMul or Gemm whose input 0 comes from a DequantizeLinear; with a constant int8
//      weight behind a DequantizeLinear, and int8 or uint8 activations (onnxruntime turns int8
//      activations into uint8 on x86 before it fuses).
// Each node with such pairs gets one warning with the count and the remedy; a summary follows.
#include <fmt/format.h>

#include <algorithm>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "qconv/ir/tensor.h"
#include "qconv/passes/conv_group.h"
#include "qconv/passes/qdq_select.h"
#include "qconv/pipeline/pass.h"

namespace qconv {

namespace {

using onnx::TensorProto;

struct Pairs {
  int64_t saturable = 0;
  int64_t total = 0;
};

/// Where the pairs are in a run of weights read in order: every element i whose mask is set
/// (the mask repeats with `period`) pairs with element i + stride, in the same period.
struct PairPattern {
  size_t period = 2;
  size_t stride = 1;
  std::vector<uint8_t> mask;  // one period
};

/// Saturable pairs in `len` elements of x: (x[i], x[i + stride]) for each i whose mask is 1:
/// |a + b| >= 129, which only two weights of one sign reach (127 + -1 = 126).
int64_t countBlock(const int8_t* x, const uint8_t* mask, size_t len, size_t stride) {
  if (len <= stride) return 0;
  const size_t n = len - stride;
  int64_t total = 0;
  size_t i = 0;
#if defined(__SSE2__)
  // 16 pairs at a time, on the biased bytes u = x + 128: a + b >= 129 <=> avg(ua, ub) >= 193,
  // a + b <= -129 <=> avg(255 - ua, 255 - ub) >= 192 (avg rounds up: pavgb); counts per byte
  // lane, summed every 255 steps
  const __m128i bias = _mm_set1_epi8(static_cast<char>(0x80)), ones = _mm_set1_epi8(-1);
  const __m128i hi = _mm_set1_epi8(static_cast<char>(193)), lo = _mm_set1_epi8(static_cast<char>(192));
  while (i + 16 <= n) {
    __m128i acc = _mm_setzero_si128();
    for (int step = 0; step < 255 && i + 16 <= n; ++step, i += 16) {
      const __m128i a = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)), bias);
      const __m128i b = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i + stride)), bias);
      const __m128i up = _mm_avg_epu8(a, b);
      const __m128i down = _mm_avg_epu8(_mm_xor_si128(a, ones), _mm_xor_si128(b, ones));
      const __m128i hit = _mm_or_si128(_mm_cmpeq_epi8(_mm_max_epu8(up, hi), up), _mm_cmpeq_epi8(_mm_max_epu8(down, lo), down));
      acc = _mm_add_epi8(acc, _mm_and_si128(hit, _mm_loadu_si128(reinterpret_cast<const __m128i*>(mask + i))));
    }
    const __m128i sums = _mm_sad_epu8(acc, _mm_setzero_si128());
    total += _mm_cvtsi128_si64(sums) + _mm_cvtsi128_si64(_mm_unpackhi_epi64(sums, sums));
  }
#endif
  for (; i < n; ++i) {
    const int sum = x[i] + x[i + stride];
    total += mask[i] & (sum >= 129 || sum <= -129);
  }
  return total;
}

/// `mask` filled with `size` elements of the pattern's mask repeated (by doubling copies).
void fillMask(std::vector<uint8_t>& mask, const PairPattern& pp, size_t size) {
  if (mask.size() < size) mask.resize(size);
  std::copy_n(pp.mask.begin(), std::min(pp.period, size), mask.begin());
  for (size_t filled = pp.period; filled < size; filled *= 2)
    std::copy_n(mask.begin(), std::min(filled, size - filled), mask.begin() + static_cast<std::ptrdiff_t>(filled));
}

/// Saturable pairs of a run of `count` elements (a whole number of periods) of `in`, read a
/// block of whole periods at a time.
std::optional<Pairs> countRun(ir::ByteStream& in, size_t count, const PairPattern& pp, std::vector<uint8_t>& mask) {
  Pairs p;
  const size_t block = std::max<size_t>(1, (size_t{1} << 20) / pp.period) * pp.period;
  if (count == 0) return p;
  fillMask(mask, pp, std::min(block, count));
  size_t ones = 0;
  for (uint8_t m : pp.mask) ones += m;
  for (size_t done = 0; done < count;) {
    const size_t len = std::min(block, count - done);
    const auto* x = reinterpret_cast<const int8_t*>(in.next(len));
    if (!x) return std::nullopt;
    p.saturable += countBlock(x, mask.data(), len, pp.stride);
    p.total += static_cast<int64_t>(len / pp.period * ones);
    done += len;
  }
  return p;
}

/// A weight the kernel multiplies: its tensor, dims, and how its reduction dimension is laid out.
struct Weight {
  const onnx::TensorProto* tensor = nullptr;
  std::vector<int64_t> dims;
  enum Layout { ConvMCk, MatrixKN, MatrixNK } layout = MatrixKN;
  int64_t group = 1;
};

PairPattern pattern(size_t period, size_t stride, size_t paired) {  // mask: the first `paired` of each period
  PairPattern pp{period, stride, std::vector<uint8_t>(period, 0)};
  for (size_t i = 0; i < paired; ++i) pp.mask[i] = 1;
  return pp;
}

/// The pairs of `w`, read once, in bounded memory; nullopt when its bytes cannot be read.
struct Scratch {
  std::string bytes;           // file bytes (ByteStream)
  std::vector<uint8_t> mask;   // pair masks (countRun)
};

std::optional<Pairs> countPairs(const Weight& w, Scratch& scratch) {
  ir::ByteStream in(*w.tensor, scratch.bytes);
  const auto& d = w.dims;
  const size_t total = static_cast<size_t>(in.size());
  if (w.layout == Weight::ConvMCk) {  // per output channel: K = position * Cg + channel
    const auto m = static_cast<size_t>(d[0]), cg = static_cast<size_t>(d[1]);
    size_t np = 1;
    for (size_t i = 2; i < d.size(); ++i) np *= static_cast<size_t>(d[i]);
    if (cg == 1 && m / static_cast<size_t>(w.group) == 1) return Pairs{};  // depthwise: no pairs
    if (cg % 2 == 0) return countRun(in, total, pattern(2 * np, np, np), scratch.mask);  // channels (c, c+1) at each position
    // odd channel count: pairs straddle positions. Each output channel's weights are put in
    // onnxruntime's K order (position major, channel minor), then counted as consecutive pairs.
    Pairs p;
    const size_t k = cg * np;
    std::vector<int8_t> ordered(k);
    fillMask(scratch.mask, pattern(2, 1, 1), k);
    for (size_t oc = 0; oc < m; ++oc) {
      const auto* row = reinterpret_cast<const int8_t*>(in.next(k));
      if (!row) return std::nullopt;
      for (size_t pos = 0; pos < np; ++pos)
        for (size_t c = 0; c < cg; ++c) ordered[pos * cg + c] = row[c * np + pos];
      p.saturable += countBlock(ordered.data(), scratch.mask.data(), k - k % 2, 1);
      p.total += static_cast<int64_t>(k / 2);
    }
    return p;
  }
  const size_t r = d.size();
  const auto rows = static_cast<size_t>(r >= 2 ? d[r - 2] : d[0]), cols = static_cast<size_t>(r >= 2 ? d[r - 1] : 1);
  if (w.layout == Weight::MatrixNK) {  // [N, K]: consecutive pairs within each row
    PairPattern pp = pattern(cols % 2 ? cols : 2, 1, 0);
    for (size_t j = 0; j + 1 < pp.period; j += 2) pp.mask[j] = 1;
    return countRun(in, total, pp, scratch.mask);
  }
  Pairs p;  // [..., K, N]: rows (k, k+1), column by column; an odd last row of each batch alone
  const size_t batches = total / (rows * cols);
  for (size_t b = 0; b < batches; ++b) {
    auto part = countRun(in, (rows - rows % 2) * cols, pattern(2 * cols, cols, cols), scratch.mask);
    if (!part) return std::nullopt;
    p.saturable += part->saturable;
    p.total += part->total;
    if (rows % 2 && !in.next(cols)) return std::nullopt;
  }
  return p;
}

/// The int8 constant weight `v`, or nullopt.
std::optional<Weight> int8Weight(const ir::Value* v, Weight::Layout layout, int64_t group) {
  if (!v || !v->isConstant() || v->initializer()->data_type() != TensorProto::INT8) return std::nullopt;
  Weight w{v->initializer(), ir::dimsOf(*v->initializer()), layout, group};
  if (w.dims.empty() || (layout == Weight::ConvMCk && (w.dims.size() < 3 || group <= 0 || w.dims[0] % group)))
    return std::nullopt;
  for (int64_t x : w.dims)
    if (x <= 0) return std::nullopt;
  return w;
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
    return int8Weight(n.input(w), conv ? Weight::ConvMCk : Weight::MatrixKN, group);
  }
  std::string why;
  if (n.is("Conv")) {
    auto g = selectConvGroup(n, &why);
    if (!g || g->w.params.elem_type != TensorProto::INT8) return std::nullopt;
    return int8Weight(g->w.quantized(), Weight::ConvMCk, group);
  }
  if (n.is("MatMul") || n.is("Gemm")) {
    auto x = dequantizedInput(n, 0, "A", &why);
    auto w = dequantizedInput(n, 1, "B", &why);
    if (!x || !w || w->params.elem_type != TensorProto::INT8) return std::nullopt;
    const bool nk = n.is("Gemm") && n.attrInt("transB", 0) != 0;
    return int8Weight(w->quantized(), nk ? Weight::MatrixNK : Weight::MatrixKN, 1);
  }
  return std::nullopt;
}

}  // namespace

void checkSaturation(ir::Model& model, PassContext& ctx) {
  int64_t nodes = 0, flagged = 0, pairs = 0;
  Scratch scratch;
  for (const auto& owned : model.graph.nodes()) {
    ir::Node& n = *owned;
    auto w = u8s8Weight(n);
    if (!w) continue;
    ++nodes;
    const auto counted = countPairs(*w, scratch);
    if (!counted) {
      ctx.note(n, "weight pairs not counted: its weight cannot be read");
      continue;
    }
    const Pairs p = *counted;
    if (p.saturable == 0) continue;
    ++flagged;
    pairs += p.saturable;
    ctx.warn(n.label(), fmt::format("{} of {} weight pairs can saturate onnxruntime's u8 x s8 kernel on x86 CPUs "
                                    "without VNNI; --weight-type uint8 computes exactly on every CPU",
                                    p.saturable, p.total));
  }
  if (flagged)
    ctx.warn(ctx.path(), fmt::format("{} of {} u8 x s8 nodes ({} weight pairs) can saturate onnxruntime's x86 kernels "
                                     "on CPUs without VNNI (AVX2, AVX-512 without VNNI), where their results may be off "
                                     "by many steps: convert with --weight-type uint8 for exact results on every CPU "
                                     "(docs/onnxruntime-cpu.md)",
                                     flagged, nodes, pairs));
}

}  // namespace qconv
