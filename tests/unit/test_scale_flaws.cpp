// scaleFlaws (quant.h), the one scale check validate and verify share: each flaw found in every
// position of runs of every length (the AVX2 loop's eight lanes and the scalar rest), and the
// boundaries of each class, against a classification of one value at a time.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "qconv/quant.h"

namespace {

float fromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

/// The flaws of one value, by <cmath>.
unsigned flawsOf(float f) {
  unsigned flaws = 0;
  if (!std::isfinite(f)) flaws |= qconv::kScaleNotFinite;
  if (f == 0.0f) flaws |= qconv::kScaleZero;
  if (std::signbit(f)) flaws |= qconv::kScaleNegative;
  if (std::fpclassify(f) == FP_SUBNORMAL) flaws |= qconv::kScaleSubnormal;
  return flaws;
}

}  // namespace

TEST_CASE("scaleFlaws: each flaw at every position of runs of 1 to 40 values, and none in good scales") {
  const float odd[] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                       std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                       0.0f, -0.0f, -1.5f, fromBits(1), fromBits(0x007fffff), -fromBits(0x00000010),
                       std::numeric_limits<float>::max(), std::numeric_limits<float>::min(), fromBits(0x7f800001)};
  for (size_t n = 1; n <= 40; ++n) {
    std::vector<float> s(n);
    for (size_t i = 0; i < n; ++i) s[i] = 0.001f * static_cast<float>(i + 1);
    REQUIRE(qconv::scaleFlaws(s.data(), n) == 0);
    for (size_t at = 0; at < n; ++at)
      for (float f : odd) {
        const float keep = s[at];
        s[at] = f;
        INFO("run of " << n << ", value " << f << " at " << at);
        REQUIRE(qconv::scaleFlaws(s.data(), n) == flawsOf(f));
        s[at] = keep;
      }
  }
  // two flaws in one run: both said
  std::vector<float> two(19, 1.0f);
  two[3] = 0.0f;
  two[17] = fromBits(5);
  REQUIRE(qconv::scaleFlaws(two.data(), two.size()) == (qconv::kScaleZero | qconv::kScaleSubnormal));
  REQUIRE(qconv::scaleFlaws(two.data(), 0) == 0);
}
