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
// The vector loops. Each advances i (and off, i's offset in its period) past the elements it
// counted; counts are kept per lane and summed before they can wrap.
// SSE2 (any x86-64): 16 pairs at a time, on the biased bytes u = x + 128:
//   a + b >= 129 <=> avg(ua, ub) >= 193, a + b <= -129 <=> avg(255 - ua, 255 - ub) >= 192
// (avg rounds up: pavgb).
int64_t countSse2(const int8_t* x, const uint8_t* mask, size_t period, size_t n, size_t stride, size_t& at, size_t& at_off) {
  size_t i = at, off = at_off;  // in registers: x's bytes may alias the references
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
  at = i;
  at_off = off;
  return total;
}

// AVX2: a pair hits when its weights have one sign and |a| + |b| >= 129, i.e. when
// avg(|a|, |b|) >= 65 (pabsb gives -128 as 128; avg rounds up).
__attribute__((target("avx2"), always_inline)) inline __m256i hitsAvx2(__m256i a, __m256i b) {
  const __m256i m = _mm256_avg_epu8(_mm256_abs_epi8(a), _mm256_abs_epi8(b));
  const __m256i big = _mm256_cmpeq_epi8(_mm256_max_epu8(m, _mm256_set1_epi8(65)), m);
  const __m256i mixed = _mm256_cmpgt_epi8(_mm256_setzero_si256(), _mm256_xor_si256(a, b));  // signs differ
  return _mm256_andnot_si256(mixed, big);
}

__attribute__((target("avx2"))) int64_t sumBytesAvx2(__m256i acc) {
  const __m256i sums = _mm256_sad_epu8(acc, _mm256_setzero_si256());
  return _mm256_extract_epi64(sums, 0) + _mm256_extract_epi64(sums, 1) + _mm256_extract_epi64(sums, 2) +
         _mm256_extract_epi64(sums, 3);
}

/// Any pattern: 32 elements at a time, each with its partner `stride` on, the mask picking the
/// pairs.
__attribute__((target("avx2"))) int64_t countAvx2(const int8_t* x, const uint8_t* mask, size_t period, size_t n,
                                                  size_t stride, size_t& at, size_t& at_off) {
  size_t i = at, off = at_off;  // in registers: x's bytes may alias the references
  const size_t step = 32 % period;
  int64_t total = 0;
  while (i + 32 <= n) {
    __m256i acc = _mm256_setzero_si256();
    for (int k = 0; k < 255 && i + 32 <= n; ++k, i += 32) {
      const __m256i hit = hitsAvx2(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)),
                                   _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + stride)));
      const __m256i picked = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(mask + off));  // 0 or 1
      acc = _mm256_add_epi8(acc, _mm256_and_si256(hit, picked));
      off += step;
      if (off >= period) off -= period;
    }
    total += sumBytesAvx2(acc);
  }
  at = i;
  at_off = off;
  return total;
}

/// Pairs (0, 1), (2, 3), ...: 16 pairs in 32 bytes, each pair's sum exact in 16 bits (pmaddubsw
/// by ones), counted where |sum| > 128. Whole vectors from i, which stays at a period's start.
__attribute__((target("avx2"))) int64_t countAdjacentAvx2(const int8_t* x, size_t len, size_t& at) {
  size_t i = at;
  const __m256i ones = _mm256_set1_epi8(1), limit = _mm256_set1_epi16(128);
  int64_t total = 0;
  while (i + 32 <= len) {
    __m256i acc = _mm256_setzero_si256();  // 16-bit counts: at most 1 << 14 steps
    for (int k = 0; k < (1 << 14) && i + 32 <= len; ++k, i += 32) {
      const __m256i sums = _mm256_maddubs_epi16(ones, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
      acc = _mm256_sub_epi16(acc, _mm256_cmpgt_epi16(_mm256_abs_epi16(sums), limit));
    }
    const __m256i wide = _mm256_madd_epi16(acc, _mm256_set1_epi16(1));  // 8 x int32
    const __m128i half = _mm_add_epi32(_mm256_castsi256_si128(wide), _mm256_extracti128_si256(wide, 1));
    const __m128i quarter = _mm_add_epi32(half, _mm_unpackhi_epi64(half, half));
    total += _mm_cvtsi128_si32(quarter) + _mm_cvtsi128_si32(_mm_srli_si128(quarter, 4));
  }
  at = i;
  return total;
}

/// Periods of 2 * stride whose first half pairs with the second (a conv's channels (c, c + 1)
/// at each kernel position, a matrix's rows (k, k + 1)), stride >= 32: the halves compared 32
/// at a time, every lane a pair; the rest of each period's half alone. Whole periods from i.
__attribute__((target("avx2"))) int64_t countHalvesAvx2(const int8_t* x, size_t len, size_t stride, size_t& at) {
  int64_t total = 0;
  size_t i = at;
  __m256i acc = _mm256_setzero_si256();
  int steps = 0;
  for (; i + 2 * stride <= len; i += 2 * stride) {
    size_t j = 0;
    for (; j + 32 <= stride; j += 32) {
      const __m256i hit = hitsAvx2(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + j)),
                                   _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + j + stride)));
      acc = _mm256_sub_epi8(acc, hit);
      if (++steps == 255) {
        total += sumBytesAvx2(acc);
        acc = _mm256_setzero_si256();
        steps = 0;
      }
    }
    for (; j < stride; ++j) {
      const int sum = x[i + j] + x[i + j + stride];
      total += sum >= 129 || sum <= -129;
    }
  }
  at = i;
  return total + sumBytesAvx2(acc);
}
#endif

/// Whether one period of `mask` is its first half set, its second clear.
[[maybe_unused]] bool firstHalf(const uint8_t* mask, size_t period) {
  for (size_t j = 0; j < period; ++j)
    if ((mask[j] != 0) != (j < period / 2)) return false;
  return true;
}

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
  if (width == 32) {
    if (period == 2 && stride == 1 && mask[0] && !mask[1]) total += countAdjacentAvx2(x, len, i);
    else if (period == 2 * stride && stride >= 32 && firstHalf(mask, period))
      total += countHalvesAvx2(x, len, stride, i);
    else total += countAvx2(x, mask, period, n, stride, i, off);
  }
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
