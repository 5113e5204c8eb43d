#include "qconv/passes/target/weight_pairs.h"

#include <algorithm>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "qconv/ir/tensor.h"

namespace qconv {

namespace {

/// Where the pairs are in a run of weights read in order: every element i whose mask is set
/// (the mask repeats with `period`) pairs with element i + stride, in the same period.
struct PairPattern {
  size_t period = 2;
  size_t stride = 1;
  std::vector<uint8_t> mask;  // one period
};

#if defined(__x86_64__)
// The vector loops: 16 or 32 pairs at a time, on the biased bytes u = x + 128:
//   a + b >= 129 <=> avg(ua, ub) >= 193, a + b <= -129 <=> avg(255 - ua, 255 - ub) >= 192
// (avg rounds up: pavgb); counts per byte lane, summed every 255 steps. Each advances i and off
// (i's offset in its period) past the elements it counted.
int64_t countSse2(const int8_t* x, const uint8_t* mask, size_t period, size_t n, size_t stride, size_t& i, size_t& off) {
  const size_t step = 16 % period;
  const __m128i bias = _mm_set1_epi8(static_cast<char>(0x80)), ones = _mm_set1_epi8(-1);
  const __m128i hi = _mm_set1_epi8(static_cast<char>(193)), lo = _mm_set1_epi8(static_cast<char>(192));
  int64_t total = 0;
  while (i + 16 <= n) {
    __m128i acc = _mm_setzero_si128();
    for (int k = 0; k < 255 && i + 16 <= n; ++k, i += 16) {
      const __m128i a = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)), bias);
      const __m128i b = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i + stride)), bias);
      const __m128i up = _mm_avg_epu8(a, b);
      const __m128i down = _mm_avg_epu8(_mm_xor_si128(a, ones), _mm_xor_si128(b, ones));
      const __m128i hit = _mm_or_si128(_mm_cmpeq_epi8(_mm_max_epu8(up, hi), up), _mm_cmpeq_epi8(_mm_max_epu8(down, lo), down));
      acc = _mm_add_epi8(acc, _mm_and_si128(hit, _mm_loadu_si128(reinterpret_cast<const __m128i*>(mask + off))));
      off += step;
      if (off >= period) off -= period;
    }
    const __m128i sums = _mm_sad_epu8(acc, _mm_setzero_si128());
    total += _mm_cvtsi128_si64(sums) + _mm_cvtsi128_si64(_mm_unpackhi_epi64(sums, sums));
  }
  return total;
}

__attribute__((target("avx2"))) int64_t countAvx2(const int8_t* x, const uint8_t* mask, size_t period, size_t n,
                                                  size_t stride, size_t& i, size_t& off) {
  const size_t step = 32 % period;
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80)), ones = _mm256_set1_epi8(-1);
  const __m256i hi = _mm256_set1_epi8(static_cast<char>(193)), lo = _mm256_set1_epi8(static_cast<char>(192));
  int64_t total = 0;
  while (i + 32 <= n) {
    __m256i acc = _mm256_setzero_si256();
    for (int k = 0; k < 255 && i + 32 <= n; ++k, i += 32) {
      const __m256i a = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), bias);
      const __m256i b = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + stride)), bias);
      const __m256i up = _mm256_avg_epu8(a, b);
      const __m256i down = _mm256_avg_epu8(_mm256_xor_si256(a, ones), _mm256_xor_si256(b, ones));
      const __m256i hit = _mm256_or_si256(_mm256_cmpeq_epi8(_mm256_max_epu8(up, hi), up),
                                          _mm256_cmpeq_epi8(_mm256_max_epu8(down, lo), down));
      acc = _mm256_add_epi8(acc, _mm256_and_si256(hit, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(mask + off))));
      off += step;
      if (off >= period) off -= period;
    }
    const __m256i sums = _mm256_sad_epu8(acc, _mm256_setzero_si256());
    total += _mm256_extract_epi64(sums, 0) + _mm256_extract_epi64(sums, 1) + _mm256_extract_epi64(sums, 2) +
             _mm256_extract_epi64(sums, 3);
  }
  return total;
}
#endif

}  // namespace

int pairVectorWidth() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("avx2") ? 32 : 16;
#else
  return 1;
#endif
}

int64_t countSaturablePairs(const int8_t* x, const uint8_t* mask, size_t period, size_t len, size_t stride, int width) {
  if (len <= stride) return 0;
  const size_t n = len - stride;
  size_t i = 0, off = 0;
  int64_t total = 0;
#if defined(__x86_64__)
  if (width == 32) total += countAvx2(x, mask, period, n, stride, i, off);
  if (width >= 16) total += countSse2(x, mask, period, n, stride, i, off);  // AVX2's last 16 too
#else
  (void)width;
#endif
  for (; i < n; ++i) {
    const int sum = x[i] + x[i + stride];
    total += mask[off] & (sum >= 129 || sum <= -129);
    if (++off == period) off = 0;
  }
  return total;
}

namespace {

/// `mask` filled with one period of the pattern's mask and a vector's elements more (cyclic).
void cyclicMask(std::vector<uint8_t>& mask, const PairPattern& pp) {
  mask.resize(pp.period + kMaxPairVector);
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = pp.mask[i % pp.period];
}

/// Saturable pairs of a run of `count` elements (a whole number of periods) of `in`, read a
/// block of whole periods at a time.
std::optional<WeightPairs> countRun(ir::ByteStream& in, size_t count, const PairPattern& pp, std::vector<uint8_t>& mask,
                                    int width) {
  WeightPairs p;
  const size_t block = std::max<size_t>(1, (size_t{1} << 20) / pp.period) * pp.period;
  if (count == 0) return p;
  cyclicMask(mask, pp);
  size_t ones = 0;
  for (uint8_t m : pp.mask) ones += m;
  for (size_t done = 0; done < count;) {
    const size_t len = std::min(block, count - done);
    const auto* x = reinterpret_cast<const int8_t*>(in.next(len));
    if (!x) return std::nullopt;
    p.saturable += countSaturablePairs(x, mask.data(), pp.period, len, pp.stride, width);
    p.total += static_cast<int64_t>(len / pp.period * ones);
    done += len;
  }
  return p;
}

PairPattern pattern(size_t period, size_t stride, size_t paired) {  // mask: the first `paired` of each period
  PairPattern pp{period, stride, std::vector<uint8_t>(period, 0)};
  for (size_t i = 0; i < paired; ++i) pp.mask[i] = 1;
  return pp;
}

}  // namespace

/// The pairs of `w`, read once, in bounded memory.
std::optional<WeightPairs> countWeightPairs(const ir::Value& w, PairLayout layout, int64_t group,
                                            PairScratch& scratch) {
  ir::ByteStream in(w, scratch.bytes);
  const int width = pairVectorWidth();
  const std::vector<int64_t> d = ir::dimsOf(*w.initializer());
  const size_t total = static_cast<size_t>(in.size());
  if (layout == PairLayout::ConvMCk) {  // per output channel: K = position * Cg + channel
    const auto m = static_cast<size_t>(d[0]), cg = static_cast<size_t>(d[1]);
    size_t np = 1;
    for (size_t i = 2; i < d.size(); ++i) np *= static_cast<size_t>(d[i]);
    if (cg == 1 && m / static_cast<size_t>(group) == 1) return WeightPairs{};  // depthwise: no pairs
    if (cg % 2 == 0) return countRun(in, total, pattern(2 * np, np, np), scratch.mask, width);  // channels (c, c+1) at each position
    // odd channel count: pairs straddle positions. Each output channel's weights are put in
    // onnxruntime's K order (position major, channel minor), then counted as consecutive pairs.
    WeightPairs p;
    const size_t k = cg * np;
    std::vector<int8_t> ordered(k);
    const PairPattern consecutive = pattern(2, 1, 1);
    cyclicMask(scratch.mask, consecutive);
    for (size_t oc = 0; oc < m; ++oc) {
      const auto* row = reinterpret_cast<const int8_t*>(in.next(k));
      if (!row) return std::nullopt;
      for (size_t pos = 0; pos < np; ++pos)
        for (size_t c = 0; c < cg; ++c) ordered[pos * cg + c] = row[c * np + pos];
      p.saturable += countSaturablePairs(ordered.data(), scratch.mask.data(), consecutive.period, k - k % 2, 1, width);
      p.total += static_cast<int64_t>(k / 2);
    }
    return p;
  }
  const size_t r = d.size();
  const auto rows = static_cast<size_t>(r >= 2 ? d[r - 2] : d[0]), cols = static_cast<size_t>(r >= 2 ? d[r - 1] : 1);
  if (layout == PairLayout::MatrixNK) {  // [N, K]: consecutive pairs within each row
    PairPattern pp = pattern(cols % 2 ? cols : 2, 1, 0);
    for (size_t j = 0; j + 1 < pp.period; j += 2) pp.mask[j] = 1;
    return countRun(in, total, pp, scratch.mask, width);
  }
  WeightPairs p;  // [..., K, N]: rows (k, k+1), column by column; an odd last row of each batch alone
  const size_t batches = total / (rows * cols);
  for (size_t b = 0; b < batches; ++b) {
    auto part = countRun(in, (rows - rows % 2) * cols, pattern(2 * cols, cols, cols), scratch.mask, width);
    if (!part) return std::nullopt;
    p.saturable += part->saturable;
    p.total += part->total;
    if (rows % 2 && !in.next(cols)) return std::nullopt;
  }
  return p;
}

}  // namespace qconv
