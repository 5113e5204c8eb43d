#include "qconv/passes/common/nbits_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "qconv/diag.h"
#include "qconv/ir/tensor.h"

namespace qconv::nbits {

using onnx::TensorProto;

int32_t standardType(int64_t bits, bool is_signed) {
  switch (bits) {
    case 2: return is_signed ? TensorProto::INT2 : TensorProto::UINT2;
    case 4: return is_signed ? TensorProto::INT4 : TensorProto::UINT4;
    case 8: return is_signed ? TensorProto::INT8 : TensorProto::UINT8;
    default: return 0;
  }
}

namespace {

/// The scalar transpose of rows [r0, r1) x columns [c0, c1) (all even), in 64 x 64 tiles.
void transposeNibblesScalar(const uint8_t* src, uint64_t in_stride, uint64_t r0, uint64_t r1, uint64_t c0, uint64_t c1,
                            uint8_t* dst, uint64_t out_stride, uint8_t both) {
  constexpr uint64_t kTile = 64;
  for (uint64_t rt = r0; rt < r1; rt += kTile)
    for (uint64_t ct = c0; ct < c1; ct += kTile)
      for (uint64_t r = rt; r < std::min(rt + kTile, r1); r += 2)
        for (uint64_t c = ct; c < std::min(ct + kTile, c1); c += 2) {
          const uint8_t a = src[r * in_stride + c / 2], b = src[(r + 1) * in_stride + c / 2];  // (r, c..c+1), (r+1, c..c+1)
          dst[c * out_stride + r / 2] = static_cast<uint8_t>(((a & 0x0f) | (b << 4)) ^ both);          // (c, r..r+1)
          dst[(c + 1) * out_stride + r / 2] = static_cast<uint8_t>(((a >> 4) | (b & 0xf0)) ^ both);    // (c+1, r..r+1)
        }
}

#if defined(__SSE2__)
/// x[r] byte c becomes x[c] byte r, 16 x 16 bytes: four rounds that each interleave register i
/// with i + 8, rotating a byte's address (4 bits of register, 4 of byte) left by one bit.
void transposeBytes16(__m128i (&x)[16]) {
  for (int round = 0; round < 4; ++round) {
    __m128i y[16];
    for (int i = 0; i < 8; ++i) {
      y[2 * i] = _mm_unpacklo_epi8(x[i], x[i + 8]);
      y[2 * i + 1] = _mm_unpackhi_epi8(x[i], x[i + 8]);
    }
    for (int i = 0; i < 16; ++i) x[i] = y[i];
  }
}

/// 32 rows x 32 columns: src at (r0, c0), dst at (c0, r0). Rows r and r + 1 give, for each input
/// byte j (columns 2j, 2j + 1), the output bytes of columns 2j (lo) and 2j + 1 (hi) at r / 2;
/// transposing the 16 x 16 bytes of each puts them in their output rows.
void transposeNibbles32(const uint8_t* src, uint64_t in_stride, uint8_t* dst, uint64_t out_stride, __m128i both) {
  const __m128i low = _mm_set1_epi8(0x0f);
  __m128i lo[16], hi[16];
  for (int p = 0; p < 16; ++p) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * static_cast<uint64_t>(p) * in_stride));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + (2 * static_cast<uint64_t>(p) + 1) * in_stride));
    lo[p] = _mm_xor_si128(_mm_or_si128(_mm_and_si128(a, low), _mm_slli_epi16(_mm_and_si128(b, low), 4)), both);
    hi[p] = _mm_xor_si128(_mm_or_si128(_mm_and_si128(_mm_srli_epi16(a, 4), low), _mm_andnot_si128(low, b)), both);
  }
  transposeBytes16(lo);
  transposeBytes16(hi);
  for (int j = 0; j < 16; ++j) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * static_cast<uint64_t>(j) * out_stride), lo[j]);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (2 * static_cast<uint64_t>(j) + 1) * out_stride), hi[j]);
  }
}


#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define QCONV_NIBBLES_AVX2 1
/// transposeBytes16 on both 128-bit lanes at once: two 16 x 16 byte blocks side by side.
__attribute__((target("avx2"))) void transposeBytes16x2(__m256i (&x)[16]) {
  for (int round = 0; round < 4; ++round) {
    __m256i y[16];
    for (int i = 0; i < 8; ++i) {
      y[2 * i] = _mm256_unpacklo_epi8(x[i], x[i + 8]);
      y[2 * i + 1] = _mm256_unpackhi_epi8(x[i], x[i + 8]);
    }
    for (int i = 0; i < 16; ++i) x[i] = y[i];
  }
}

/// transposeNibbles32 for 32 rows x 64 columns: lane 0 holds columns 0-31, lane 1 columns 32-63.
__attribute__((target("avx2"))) void transposeNibbles64(const uint8_t* src, uint64_t in_stride, uint8_t* dst,
                                                        uint64_t out_stride, uint8_t both) {
  const __m256i low = _mm256_set1_epi8(0x0f), vboth = _mm256_set1_epi8(static_cast<char>(both));
  __m256i lo[16], hi[16];
  for (int p = 0; p < 16; ++p) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * static_cast<uint64_t>(p) * in_stride));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + (2 * static_cast<uint64_t>(p) + 1) * in_stride));
    lo[p] = _mm256_xor_si256(_mm256_or_si256(_mm256_and_si256(a, low), _mm256_slli_epi16(_mm256_and_si256(b, low), 4)), vboth);
    hi[p] = _mm256_xor_si256(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), low), _mm256_andnot_si256(low, b)), vboth);
  }
  transposeBytes16x2(lo);
  transposeBytes16x2(hi);
  for (uint64_t j = 0; j < 16; ++j) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * j * out_stride), _mm256_castsi256_si128(lo[j]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (2 * j + 1) * out_stride), _mm256_castsi256_si128(hi[j]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (32 + 2 * j) * out_stride), _mm256_extracti128_si256(lo[j], 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (33 + 2 * j) * out_stride), _mm256_extracti128_si256(hi[j], 1));
  }
}

/// Rows [0, rows) x columns [0, cols) (multiples of 32 and 64) in 32 x 64 blocks.
__attribute__((target("avx2"))) void transposeNibblesAvx2(const uint8_t* src, uint64_t in_stride, uint64_t rows,
                                                          uint64_t cols, uint8_t* dst, uint64_t out_stride, uint8_t both) {
  for (uint64_t c0 = 0; c0 < cols; c0 += 128)  // 64 input bytes of 32 rows at a time: whole cache lines
    for (uint64_t r0 = 0; r0 < rows; r0 += 32)
      for (uint64_t c = c0; c < std::min(c0 + 128, cols); c += 64)
        transposeNibbles64(src + r0 * in_stride + c / 2, in_stride, dst + c * out_stride + r0 / 2, out_stride, both);
}
#endif
#endif  // __SSE2__

}  // namespace

bool runs(NibbleKernel kernel) {
  switch (kernel) {
    case NibbleKernel::best:
    case NibbleKernel::scalar: return true;
#if defined(__SSE2__)
    case NibbleKernel::sse2: return true;
#endif
#if defined(QCONV_NIBBLES_AVX2)
    case NibbleKernel::avx2: return __builtin_cpu_supports("avx2");
#endif
    default: return false;
  }
}

namespace {

/// The kernels straight from src to dst.
void transposeNibblesDirect(const uint8_t* src, uint64_t in_stride, uint64_t rows, uint64_t cols, uint8_t* dst,
                            uint64_t out_stride, unsigned flip, NibbleKernel kernel) {
  QCONV_ASSERT(runs(kernel), "transposeNibbles: a kernel this host does not run");
  const auto both = static_cast<uint8_t>(flip | flip << 4);
  uint64_t rv = 0, cv = 0;  // the part done in vector blocks: rows [0, rv), columns [0, cv)
#if defined(__SSE2__)  // every x86-64: the same bytes as the scalar loop, faster
  if (kernel != NibbleKernel::scalar) {
    rv = rows / 32 * 32;
    cv = cols / 32 * 32;
    uint64_t c_sse = 0;  // where the SSE2 blocks start: after the AVX2 ones
#if defined(QCONV_NIBBLES_AVX2)
    if (kernel == NibbleKernel::avx2 || (kernel == NibbleKernel::best && runs(NibbleKernel::avx2))) {
      c_sse = cols / 64 * 64;
      transposeNibblesAvx2(src, in_stride, rv, c_sse, dst, out_stride, both);
    }
#endif
    const __m128i vboth = _mm_set1_epi8(static_cast<char>(both));
    for (uint64_t c0 = c_sse; c0 < cv; c0 += 128)  // 64 input bytes of 32 rows at a time: whole cache lines
      for (uint64_t r0 = 0; r0 < rv; r0 += 32)
        for (uint64_t c = c0; c < std::min(c0 + 128, cv); c += 32)
          transposeNibbles32(src + r0 * in_stride + c / 2, in_stride, dst + c * out_stride + r0 / 2, out_stride, vboth);
  }
#endif
  transposeNibblesScalar(src, in_stride, 0, rv, cv, cols, dst, out_stride, both);
  transposeNibblesScalar(src, in_stride, rv, rows, 0, cols, dst, out_stride, both);
}


/// Whether rows `stride` bytes apart fall on few cache sets (a multiple of 256 bytes: an LLM's
/// rows are 2^n bytes): a kernel reading 32 such rows, or writing 64, then moves 3 GB/s where
/// rows apart by other strides move three times that (build/bench/qconv_nibble_cost).
bool aliases(uint64_t stride) { return stride % 256 == 0; }

/// `rows` rows of `bytes` bytes from `from` (rows `from_stride` apart) to `to` (`to_stride`):
/// a memcpy of constant size where `bytes` is `Full` (vector moves, where a memcpy of a size
/// known only when it runs is a `rep movs` whose start costs more than 128 bytes' copy).
template <typename Full>
void copyRows(uint8_t* to, uint64_t to_stride, const uint8_t* from, uint64_t from_stride, uint64_t rows, uint64_t bytes,
              Full) {
  if (bytes == Full::value)
    for (uint64_t r = 0; r < rows; ++r) std::memcpy(to + r * to_stride, from + r * from_stride, Full::value);
  else
    for (uint64_t r = 0; r < rows; ++r) std::memcpy(to + r * to_stride, from + r * from_stride, bytes);
}

/// transposeNibblesDirect in blocks of 256 rows x 512 columns, each written into a small tile
/// whose rows are then copied to dst whole (128 bytes each, where dst's rows are written 16
/// bytes at a time by the kernels), and read through a buffer of rows at a padded stride first
/// when src's rows alias (aliases).
void transposeNibblesAt(const uint8_t* src, uint64_t in_stride, uint64_t rows, uint64_t cols, uint8_t* dst,
                        uint64_t out_stride, unsigned flip, NibbleKernel kernel) {
  constexpr uint64_t kRows = 256, kCols = 512, kPad = 64;
  if (rows <= 64 || cols <= 64) return transposeNibblesDirect(src, in_stride, rows, cols, dst, out_stride, flip, kernel);
  constexpr uint64_t kBlockStride = kCols / 2 + kPad, kTileStride = kRows / 2 + 16;
  alignas(64) uint8_t block[kRows * kBlockStride];
  alignas(64) uint8_t tile[kCols * kTileStride];
  const bool copy_in = aliases(in_stride);
  for (uint64_t r0 = 0; r0 < rows; r0 += kRows) {
    const uint64_t nr = std::min(kRows, rows - r0);
    for (uint64_t c0 = 0; c0 < cols; c0 += kCols) {
      const uint64_t nc = std::min(kCols, cols - c0);
      const uint8_t* from = src + r0 * in_stride + c0 / 2;
      uint64_t stride = in_stride;
      if (copy_in) {
        copyRows(block, kBlockStride, from, in_stride, nr, nc / 2, std::integral_constant<uint64_t, kCols / 2>{});
        from = block;
        stride = kBlockStride;
      }
      transposeNibblesDirect(from, stride, nr, nc, tile, kTileStride, flip, kernel);
      uint8_t* to = dst + c0 * out_stride + r0 / 2;
#if defined(__SSE2__)
      // Whole tile rows into 16-byte aligned ones: stored past the cache, as nothing reads them
      // before the keeper writes them out, and each output line is written whole by one tile,
      // so a store need not read the line first (up to 11% less CPU for an LLM's int4 repack;
      // the cache then holds the next strip). Else a copy.
      if (nr == kRows && reinterpret_cast<uintptr_t>(to) % 16 == 0 && out_stride % 16 == 0) {
        for (uint64_t c = 0; c < nc; ++c)
          for (uint64_t b = 0; b < kRows / 2; b += 16)
            _mm_stream_si128(reinterpret_cast<__m128i*>(to + c * out_stride + b),
                             _mm_load_si128(reinterpret_cast<const __m128i*>(tile + c * kTileStride + b)));
        continue;
      }
#endif
      copyRows(to, out_stride, tile, kTileStride, nc, nr / 2, std::integral_constant<uint64_t, kRows / 2>{});
    }
  }
#if defined(__SSE2__)
  _mm_sfence();  // the streamed stores before anything that hands dst to another thread
#endif
}

}  // namespace

void transposeNibbles(const std::string& in, uint64_t in_stride, uint64_t rows, uint64_t cols, std::string& out,
                      uint64_t out_stride, unsigned flip, NibbleKernel kernel) {
  transposeNibblesAt(reinterpret_cast<const uint8_t*>(in.data()), in_stride, rows, cols, reinterpret_cast<uint8_t*>(out.data()),
                     out_stride, flip, kernel);
}

bool transposeNibblesOf(const ir::Value& v, uint64_t in_stride, uint64_t rows, uint64_t cols, std::string& out,
                        uint64_t out_stride, unsigned flip, std::string* why) {
  const ir::FileBytes& file = v.fileBytes();
  if (v.initializer()->data_location() != TensorProto::EXTERNAL || !file) {
    const std::string in = rawBytes(v, why);
    if (!why->empty()) return false;
    transposeNibbles(in, in_stride, rows, cols, out, out_stride, flip);
    return true;
  }
  // A strip of rows a read, transposed while it is in the cache: the file's bytes cross memory
  // once. 256 rows (even, so whole pairs of rows) give each output row 128 bytes a strip; fewer
  // for rows wider than 4 KiB, so the strip stays near 1 MiB, but at least 128 (the tiled
  // path's). (Reading each row of an aliasing strip to a padded stride instead, by one preadv,
  // saved the tiles' copy and cost the kernel more: 40 ms more system time on a 1 GiB LLM.)
  const uint64_t strip_rows = std::clamp<uint64_t>((uint64_t{1} << 20) / in_stride, 128, 256) / 2 * 2;
  std::string strip(std::min(rows, strip_rows) * in_stride, '\0');
  for (uint64_t r0 = 0; r0 < rows; r0 += strip_rows) {
    const uint64_t n = std::min(strip_rows, rows - r0);
    file.source->read(file.span, r0 * in_stride, n * in_stride, strip.data());
    transposeNibblesAt(reinterpret_cast<const uint8_t*>(strip.data()), in_stride, n, cols,
                       reinterpret_cast<uint8_t*>(out.data()) + r0 / 2, out_stride, flip, NibbleKernel::best);
  }
  return true;
}

namespace {

/// out[c][r] = in[r][c] for rows [r0, r1) x columns [c0, c1) of a rows x cols matrix of T, in
/// 64 x 64 tiles.
template <typename T>
void transposeTyped(const std::string& in, uint64_t rows, uint64_t cols, std::string& out, uint64_t r0, uint64_t r1,
                    uint64_t c0, uint64_t c1) {
  constexpr uint64_t kTile = 64;
  for (uint64_t rt = r0; rt < r1; rt += kTile)
    for (uint64_t ct = c0; ct < c1; ct += kTile)
      for (uint64_t r = rt; r < std::min(rt + kTile, r1); ++r)
        for (uint64_t c = ct; c < std::min(ct + kTile, c1); ++c) {
          T v;
          std::memcpy(&v, &in[(r * cols + c) * sizeof(T)], sizeof(T));
          std::memcpy(&out[(c * rows + r) * sizeof(T)], &v, sizeof(T));
        }
}

/// transposeTyped of 4-byte elements (float scales), in 64 x 64 tiles: each transposed into a
/// buffer (4 x 4 blocks of SSE2 shuffles on x86-64, the scalar loop for the rest) whose rows are
/// then copied out whole, at a constant size for a whole tile (vector moves: a `rep movs` of 256
/// bytes held [N, 128] -> [128, N] to 14 GB/s, now 21; build/bench/qconv_nibble_cost). Straight
/// into the output, a [N, k_blocks] -> [k_blocks, N] transpose wrote 64 rows N * 4 bytes apart
/// (16 KiB for N = 4096: a few cache sets) and moved 2.7 GB/s.
void transpose32(const std::string& in, uint64_t rows, uint64_t cols, std::string& out) {
  constexpr uint64_t kT = 64, kTileRow = kT * 4 + 16;
  alignas(16) char tile[kT * kTileRow];
  const uint64_t in_row = cols * 4, out_row = rows * 4;
  for (uint64_t rt = 0; rt < rows; rt += kT) {
    const uint64_t nr = std::min(kT, rows - rt);
    for (uint64_t ct = 0; ct < cols; ct += kT) {
      const uint64_t nc = std::min(kT, cols - ct);
      uint64_t rv = 0, cv = 0;  // done in blocks: rows [0, rv), columns [0, cv) of the tile
#if defined(__SSE2__)
      rv = nr / 4 * 4;
      cv = nc / 4 * 4;
      for (uint64_t r = 0; r < rv; r += 4)
        for (uint64_t c = 0; c < cv; c += 4) {
          const char* src = in.data() + (rt + r) * in_row + (ct + c) * 4;
          char* dst = tile + c * kTileRow + r * 4;
          const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
          const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + in_row));
          const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * in_row));
          const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 3 * in_row));
          const __m128i ab01 = _mm_unpacklo_epi32(a, b), ed01 = _mm_unpacklo_epi32(e, d);  // a0 b0 a1 b1, e0 d0 e1 d1
          const __m128i ab23 = _mm_unpackhi_epi32(a, b), ed23 = _mm_unpackhi_epi32(e, d);
          _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm_unpacklo_epi64(ab01, ed01));  // a0 b0 e0 d0
          _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + kTileRow), _mm_unpackhi_epi64(ab01, ed01));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * kTileRow), _mm_unpacklo_epi64(ab23, ed23));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 3 * kTileRow), _mm_unpackhi_epi64(ab23, ed23));
        }
#endif
      for (uint64_t r = 0; r < nr; ++r)
        for (uint64_t c = (r < rv ? cv : 0); c < nc; ++c)
          std::memcpy(tile + c * kTileRow + r * 4, in.data() + (rt + r) * in_row + (ct + c) * 4, 4);
      copyRows(reinterpret_cast<uint8_t*>(out.data()) + ct * out_row + rt * 4, out_row,
               reinterpret_cast<const uint8_t*>(tile), kTileRow, nc, nr * 4, std::integral_constant<uint64_t, kT * 4>{});
    }
  }
}

}  // namespace

void transposeElements(const std::string& in, uint64_t rows, uint64_t cols, size_t width, std::string& out) {
  QCONV_ASSERT(out.size() == in.size() && in.size() == rows * cols * width, "transposeElements: {} bytes for {} x {} x {}",
               in.size(), rows, cols, width);
  switch (width) {  // a copy of a known width is a move, not a call
    case 1: return transposeTyped<uint8_t>(in, rows, cols, out, 0, rows, 0, cols);
    case 2: return transposeTyped<uint16_t>(in, rows, cols, out, 0, rows, 0, cols);
    case 4: return transpose32(in, rows, cols, out);
    case 8: return transposeTyped<uint64_t>(in, rows, cols, out, 0, rows, 0, cols);
    default: QCONV_ASSERT(false, "transposeElements: elements of {} bytes", width);
  }
}

std::string buffer(ir::ByteKeeper* keeper, size_t n, bool zeroed) {
  if (!keeper) return std::string(n, '\0');
  std::string out = keeper->buffer(n);
  if (zeroed) std::fill(out.begin(), out.end(), '\0');
  return out;
}

void recycle(ir::ByteKeeper* keeper, std::string bytes) {
  if (keeper) keeper->recycle(std::move(bytes));
}

ir::Value* addMadeTensor(ir::Graph& graph, ir::ByteKeeper* keeper, const std::string& hint,
                         std::unique_ptr<TensorProto> t, std::string bytes) {
  if (!keeper || bytes.size() < (size_t{1} << 20)) {
    if (bytes.capacity() > bytes.size() + bytes.size() / 4) {
      // a recycled buffer (an 8 MiB weight's, holding 512 KiB of scales): the model holds only
      // the bytes, and the buffer goes back (kept inline whole, 100 of them held 300 MiB)
      t->set_raw_data(bytes.data(), bytes.size());
      recycle(keeper, std::move(bytes));
    } else {
      t->set_raw_data(std::move(bytes));
    }
    return graph.addInitializer(hint, std::move(t));
  }
  t->set_name(hint);
  const ir::FileBytes kept = keeper->keep(*t, std::move(bytes));
  ir::Value* v = graph.newValue(hint, t->data_type());
  graph.setInitializer(v, std::move(t), kept);
  return v;
}

ir::Value* transposedTensor(ir::Graph& graph, ir::ByteKeeper* keeper, const std::string& hint,
                            std::unique_ptr<TensorProto> t, const ir::Value& v, uint64_t in_stride, uint64_t rows,
                            uint64_t cols, uint64_t out_stride, int bits, unsigned flip, std::string* why) {
  const uint64_t width = bits == 4 ? 0 : static_cast<uint64_t>(bits) / 8;  // bytes an element (0: half of one)
  QCONV_ASSERT(bits == 4 ? rows % 2 == 0 && cols % 2 == 0 && in_stride >= cols / 2 && out_stride >= rows / 2
                         : (width == 1 || width == 2 || width == 4 || width == 8) && in_stride == cols * width &&
                               out_stride == rows * width,
               "transposedTensor: {} x {} of {} bits, strides {} -> {}", rows, cols, bits, in_stride, out_stride);
  const uint64_t length = cols * out_stride;
  const bool padded = bits == 4 && out_stride > rows / 2;
  const ir::FileBytes& file = v.fileBytes();
  if (length <= kWholeBytes || !keeper || !file || v.initializer()->data_location() != TensorProto::EXTERNAL) {
    std::string out = buffer(keeper, length, padded);
    if (bits == 4) {
      if (!transposeNibblesOf(v, in_stride, rows, cols, out, out_stride, flip, why)) return nullptr;
    } else {
      std::string in = rawBytes(v, why, keeper);
      if (!why->empty()) return nullptr;
      transposeElements(in, rows, cols, width, out);
      recycle(keeper, std::move(in));
    }
    return addMadeTensor(graph, keeper, hint, std::move(t), std::move(out));
  }
  // A piece is the output's rows [c0, c0 + per): column c0.. of every input row, one read a row.
  uint64_t per = std::max<uint64_t>(1, kWholeBytes / out_stride);
  if (bits == 4) per = std::max<uint64_t>(2, per / 2 * 2);
  const uint64_t at_byte = bits == 4 ? 1 : 2 * width;  // twice the bytes of a column
  std::string gather;
  uint64_t c0 = 0;
  t->set_name(hint);
  const ir::FileBytes kept = keeper->keepPieces(*t, length, [&](std::string& piece) {
    const uint64_t n = std::min(per, cols - c0), row_bytes = n * at_byte / 2;
    gather.resize(rows * row_bytes);
    for (uint64_t r = 0; r < rows; ++r)
      file.source->read(file.span, r * in_stride + c0 * at_byte / 2, row_bytes, gather.data() + r * row_bytes);
    piece = keeper->buffer(n * out_stride);
    if (padded) std::fill(piece.begin(), piece.end(), '\0');
    if (bits == 4)
      transposeNibbles(gather, row_bytes, rows, n, piece, out_stride, flip);
    else
      transposeElements(gather, rows, n, width, piece);
    c0 += n;
  });
  ir::Value* made = graph.newValue(hint, t->data_type());
  graph.setInitializer(made, std::move(t), kept);
  return made;
}

std::string rawBytes(const ir::Value& v, std::string* why, ir::ByteKeeper* keeper) {
  const ir::FileBytes& file = v.fileBytes();
  std::string out = file ? buffer(keeper, file.length, false) : std::string();
  if (!ir::storageBytes(*v.initializer(), file, out, why)) return {};
  return out;
}

}  // namespace qconv::nbits
