// nbits::transposeNibbles against its definition, element by element (nbits::unpack): the
// 32 x 32 SSE2 blocks, the scalar rest, padded rows and the int4 <-> uint4 flip, at sizes that
// are and are not multiples of the block.
#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "qconv/passes/common/nbits_layout.h"

namespace {

std::string randomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

}  // namespace

TEST_CASE("transposeNibbles: out[c][r] = in[r][c] ^ flip, for every size and stride, with every kernel the host runs") {
  using qconv::nbits::NibbleKernel;
  using qconv::nbits::transposeNibbles;
  using qconv::nbits::unpack;
  uint32_t seed = 1;
  for (NibbleKernel kernel : {NibbleKernel::best, NibbleKernel::avx2, NibbleKernel::sse2, NibbleKernel::scalar}) {
  if (!qconv::nbits::runs(kernel)) continue;  // the bytes are the same whichever runs: only the coverage differs
  for (uint64_t rows : {2u, 30u, 32u, 34u, 64u, 98u, 160u, 258u, 512u, 520u})  // past the 256 x 512 blocks of the tiled path too (512: whole blocks into aligned rows, streamed)
    for (uint64_t cols : {2u, 32u, 62u, 64u, 96u, 128u, 130u, 288u, 1090u, 2048u})
      for (uint64_t in_pad : {0u, 3u})
        for (uint64_t out_pad : {0u, 5u})
          for (unsigned flip : {0u, 8u}) {
            const uint64_t in_stride = cols / 2 + in_pad, out_stride = rows / 2 + out_pad;
            const std::string in = randomBytes(rows * in_stride, seed++);
            std::string out(cols * out_stride, '\x5a');  // bytes past each row's end are left as they were
            transposeNibbles(in, in_stride, rows, cols, out, out_stride, flip, kernel);
            uint64_t wrong = 0;
            for (uint64_t r = 0; r < rows; ++r)
              for (uint64_t c = 0; c < cols; ++c)
                wrong += unpack(out, c * out_stride * 2 + r, 4) != (unpack(in, r * in_stride * 2 + c, 4) ^ flip);
            for (uint64_t c = 0; c < cols; ++c)
              for (uint64_t b = rows / 2; b < out_stride; ++b) wrong += out[c * out_stride + b] != '\x5a';
            INFO("kernel " << static_cast<int>(kernel) << ", " << rows << " x " << cols << ", strides " << in_stride << " -> "
                           << out_stride << ", flip " << flip);
            CHECK(wrong == 0);
          }
  }
}

TEST_CASE("transposeElements: out[c][r] = in[r][c] for elements of 1, 2, 4 and 8 bytes, at every size") {
  uint32_t seed = 100;
  for (size_t width : {1u, 2u, 4u, 8u})
    for (uint64_t rows : {1u, 3u, 4u, 8u, 66u, 129u})
      for (uint64_t cols : {1u, 4u, 5u, 64u, 130u}) {
        const std::string in = randomBytes(rows * cols * width, seed++);
        std::string out(in.size(), '\0');
        qconv::nbits::transposeElements(in, rows, cols, width, out);
        uint64_t wrong = 0;
        for (uint64_t r = 0; r < rows; ++r)
          for (uint64_t c = 0; c < cols; ++c)
            wrong += in.compare((r * cols + c) * width, width, out, (c * rows + r) * width, width) != 0;
        INFO(width << "-byte elements, " << rows << " x " << cols);
        CHECK(wrong == 0);
      }
}
