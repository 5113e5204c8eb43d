#include "qconv/io/content_hash.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <string>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace qconv::io {

namespace {
constexpr uint64_t kMul1 = 0x9e3779b97f4a7c15ULL;  // 2^64 / golden ratio, odd
constexpr uint64_t kMul2 = 0xc2b2ae3d27d4eb4fULL;

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

uint64_t word(const unsigned char* b) {
  uint64_t w;
  std::memcpy(&w, b, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  w = __builtin_bswap64(w);  // little-endian on every host
#endif
  return w;
}

/// splitmix64's finalizer: every output bit depends on every input bit.
constexpr uint64_t avalanche(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// ContentHash's constants. A stripe's lane i takes key kKeys[s + i] at place s of its block;
// kKeys[kLanes + kStripes - 1 ...] key the scramble, the last stripe and the lanes' start.
constexpr int kLanes = 8;     // 64-bit words of a stripe
constexpr int kStripes = 16;  // stripes of a block (1 KiB), scrambled after it
constexpr uint64_t kScrambleMul = 0x9e3779b1ULL;  // 32-bit: a multiply by it is two 32 x 32-bit ones
constexpr int kScrambleKeys = kLanes + kStripes - 1, kLastKeys = kScrambleKeys + kLanes,
              kStartKeys = kLastKeys + kLanes, kKeyCount = kStartKeys + kLanes;

constexpr std::array<uint64_t, kKeyCount> makeKeys() {
  std::array<uint64_t, kKeyCount> k{};
  uint64_t x = 0x71636f6e76ULL;  // "qconv"
  for (auto& key : k) key = avalanche(x += kMul1);  // splitmix64's sequence
  return k;
}
constexpr std::array<uint64_t, kKeyCount> kKeys = makeKeys();

/// `count` stripes from `p` into `lanes`, the first at place `stripe` of its block; returns the
/// place after them. One word at a time.
unsigned stripesScalar(uint64_t* lanes, const unsigned char* p, uint64_t count, unsigned stripe) {
  uint64_t l[kLanes];  // in registers, where `lanes` might alias `p`'s bytes for all the compiler knows
  std::copy(lanes, lanes + kLanes, l);
  for (; count > 0; --count, p += 64) {
    for (int i = 0; i < kLanes; ++i) {
      const uint64_t d = word(p + 8 * i), k = d ^ kKeys[stripe + i];
      l[i ^ 1] += d;
      l[i] += (k & 0xffffffffULL) * (k >> 32);
    }
    if (++stripe == kStripes) {
      for (int i = 0; i < kLanes; ++i) {
        uint64_t a = l[i];
        a ^= a >> 47;
        a ^= kKeys[kScrambleKeys + i];
        l[i] = a * kScrambleMul;
      }
      stripe = 0;
    }
  }
  std::copy(l, l + kLanes, lanes);
  return stripe;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/// A stripe's four words `d` into lanes `a` (stripesScalar's inner loop).
__attribute__((target("avx2"))) inline __m256i accumulate(__m256i a, __m256i d, __m256i key) {
  const __m256i k = _mm256_xor_si256(d, key);
  const __m256i product = _mm256_mul_epu32(k, _mm256_srli_epi64(k, 32));
  return _mm256_add_epi64(a, _mm256_add_epi64(product, _mm256_shuffle_epi32(d, _MM_SHUFFLE(1, 0, 3, 2))));
}

/// stripesScalar's scramble of four lanes; the multiply by a 32-bit constant as two 32 x 32-bit ones.
__attribute__((target("avx2"))) inline __m256i scramble(__m256i a, const uint64_t* key) {
  const __m256i mul = _mm256_set1_epi64x(static_cast<long long>(kScrambleMul));
  a = _mm256_xor_si256(_mm256_xor_si256(a, _mm256_srli_epi64(a, 47)),
                       _mm256_loadu_si256(reinterpret_cast<const __m256i*>(key)));
  const __m256i lo = _mm256_mul_epu32(a, mul), hi = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), mul);
  return _mm256_add_epi64(lo, _mm256_slli_epi64(hi, 32));
}

/// stripesScalar with four lanes to a register.
__attribute__((target("avx2"))) unsigned stripesAvx2(uint64_t* lanes, const unsigned char* p, uint64_t count,
                                                      unsigned stripe) {
  __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lanes));
  __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lanes + 4));
  for (; count > 0; --count, p += 64) {
    const uint64_t* key = kKeys.data() + stripe;
    a0 = accumulate(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(key)));
    a1 = accumulate(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32)),
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(key + 4)));
    if (++stripe == kStripes) {
      a0 = scramble(a0, kKeys.data() + kScrambleKeys);
      a1 = scramble(a1, kKeys.data() + kScrambleKeys + 4);
      stripe = 0;
    }
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), a0);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes + 4), a1);
  return stripe;
}
#define QCONV_HASH_AVX2 1
#endif

unsigned stripes(uint64_t* lanes, const unsigned char* p, uint64_t count, unsigned stripe, bool scalar) {
#if defined(QCONV_HASH_AVX2)
  if (!scalar && __builtin_cpu_supports("avx2")) return stripesAvx2(lanes, p, count, stripe);
#endif
  return stripesScalar(lanes, p, count, stripe);
}
}  // namespace

ContentHash::ContentHash(Kernel kernel) : scalar_(kernel == Kernel::scalar) {
  std::copy(kKeys.begin() + kStartKeys, kKeys.end(), lanes_);
}

namespace {
/// Bytes [p, p + size) in whole blocks of `kBlock` bytes to `blocks(first, count)`, the ones
/// before a whole block kept in `tail` (`tail_size` of them) until the next call completes it.
template <uint64_t kBlock, typename Blocks>
void inBlocks(unsigned char* tail, uint64_t& tail_size, const unsigned char* p, uint64_t size, Blocks&& blocks) {
  if (tail_size > 0) {
    const uint64_t take = std::min<uint64_t>(size, kBlock - tail_size);
    std::memcpy(tail + tail_size, p, take);
    tail_size += take;
    p += take;
    size -= take;
    if (tail_size < kBlock) return;
    blocks(tail, 1);
    tail_size = 0;
  }
  if (size >= kBlock) blocks(p, size / kBlock);
  std::memcpy(tail, p + size / kBlock * kBlock, size % kBlock);
  tail_size = size % kBlock;
}
}  // namespace

void ContentHash::add(const char* data, uint64_t size) {
  total_ += size;
  inBlocks<64>(tail_, tailSize_, reinterpret_cast<const unsigned char*>(data), size,
               [this](const unsigned char* p, uint64_t count) { stripe_ = stripes(lanes_, p, count, stripe_, scalar_); });
}

uint64_t ContentHash::value() const {
  uint64_t lanes[kLanes];
  std::copy(lanes_, lanes_ + kLanes, lanes);
  unsigned char last[64] = {};  // the tail, zeros after it (the length tells them apart)
  std::memcpy(last, tail_, tailSize_);
  for (int i = 0; i < kLanes; ++i) {
    const uint64_t d = word(last + 8 * i), k = d ^ kKeys[kLastKeys + i];
    lanes[i] += (k & 0xffffffffULL) * (k >> 32) + rotl(d, 17);
  }
  uint64_t h = avalanche(total_ * kMul2);
  for (int i = 0; i < kLanes; ++i) h = avalanche(h ^ rotl(lanes[i], 7 * i + 1));
  return h;
}

namespace {
uint64_t wordV1(const char* p) { return word(reinterpret_cast<const unsigned char*>(p)); }
uint64_t roundV1(uint64_t acc, uint64_t w) { return rotl(acc + w * kMul2, 31) * kMul1; }
}  // namespace

void ContentHashV1::block(const char* p) {
  for (int i = 0; i < 4; ++i) lanes_[i] = roundV1(lanes_[i], wordV1(p + 8 * i));
}

void ContentHashV1::add(const char* data, uint64_t size) {
  total_ += size;
  inBlocks<32>(tail_, tailSize_, reinterpret_cast<const unsigned char*>(data), size,
               [this](const unsigned char* p, uint64_t count) {
                 for (; count > 0; --count, p += 32) block(reinterpret_cast<const char*>(p));
               });
}

uint64_t ContentHashV1::value() const {
  uint64_t h = avalanche(total_);
  for (int i = 0; i < 4; ++i) h = avalanche(h ^ rotl(lanes_[i], 7 * i + 1));
  char last[32] = {};
  std::memcpy(last, tail_, tailSize_);
  for (int i = 0; i < 4; ++i) h = avalanche(roundV1(h, wordV1(last + 8 * i)));
  return h;
}

bool hashFile(int fd, uint64_t size, uint64_t& current, uint64_t& v1) {
  ContentHash hash;
  ContentHashV1 hashV1;
  std::string buffer(std::min<uint64_t>(size, uint64_t{1} << 20), '\0');
  uint64_t at = 0;
  while (at < size) {
    const ssize_t r = pread(fd, buffer.data(), std::min<uint64_t>(buffer.size(), size - at), static_cast<off_t>(at));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r == 0) errno = EIO;  // shorter than written
      return false;
    }
    hash.add(buffer.data(), static_cast<uint64_t>(r));
    hashV1.add(buffer.data(), static_cast<uint64_t>(r));
    at += static_cast<uint64_t>(r);
  }
  current = hash.value();
  v1 = hashV1.value();
  return true;
}

}  // namespace qconv::io
