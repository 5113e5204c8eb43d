// What the int4 repack's transpose costs beside a copy of the same bytes, in memory (issue 49):
// one 4096 x 4096 int4 weight (8 MiB, an LLM's attention matrix: rows 2 KiB apart) transposed whole
// with each kernel the host runs, against memcpy of the same bytes. Prints GB/s of input per way.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "qconv/passes/common/nbits_layout.h"

namespace {

using qconv::nbits::NibbleKernel;

template <typename F>
double gbPerSecond(uint64_t bytes, int reps, F&& f) {
  const auto t = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  return static_cast<double>(bytes) * reps / s / 1e9;
}

}  // namespace

int main() {
  constexpr uint64_t K = 4096, N = 4096;
  std::string in(N * K / 2, '\0'), out(K * N / 2, '\0');
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<char>(i * 131 + i / 4099);
  constexpr int kReps = 20;
  for (int round = 0; round < 2; ++round) {  // the first warms the pages
    std::printf("memcpy %.2f\n", gbPerSecond(in.size(), kReps, [&] { std::memcpy(out.data(), in.data(), in.size()); }));
    for (auto [name, kernel] : {std::pair{"avx2", NibbleKernel::avx2}, {"sse2", NibbleKernel::sse2}, {"scalar", NibbleKernel::scalar}})
      if (qconv::nbits::runs(kernel))
        std::printf("%s %.2f\n", name, gbPerSecond(in.size(), kReps, [&] {
                      qconv::nbits::transposeNibbles(in, K / 2, N, K, out, N / 2, 8, kernel);
                    }));
    // the scales of that weight at blocks of 32, [N, k_blocks] floats -> [k_blocks, N], and back
    std::string scales(N * (K / 32) * 4, '\1'), blocked(scales.size(), '\0');
    std::printf("scales %.2f\n", gbPerSecond(scales.size(), kReps, [&] {
                  qconv::nbits::transposeElements(scales, N, K / 32, 4, blocked);
                }));
    std::printf("scales back %.2f\n", gbPerSecond(scales.size(), kReps, [&] {
                  qconv::nbits::transposeElements(blocked, K / 32, N, 4, scales);
                }));
  }
  return 0;
}
