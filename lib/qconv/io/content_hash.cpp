#include "qconv/io/content_hash.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace qconv::io {

namespace {
constexpr uint64_t kMul1 = 0x9e3779b97f4a7c15ULL;  // 2^64 / golden ratio, odd
constexpr uint64_t kMul2 = 0xc2b2ae3d27d4eb4fULL;

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

uint64_t word(const char* p) {
  unsigned char b[8];
  std::memcpy(b, p, 8);
  uint64_t w = 0;
  for (int i = 7; i >= 0; --i) w = (w << 8) | b[i];  // little-endian on every host
  return w;
}

uint64_t round(uint64_t acc, uint64_t w) { return rotl(acc + w * kMul2, 31) * kMul1; }

/// splitmix64's finalizer: every output bit depends on every input bit.
uint64_t avalanche(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

void ContentHash::block(const char* p) {
  for (int i = 0; i < 4; ++i) lanes_[i] = round(lanes_[i], word(p + 8 * i));
}

void ContentHash::add(const char* data, uint64_t size) {
  total_ += size;
  if (tailSize_ > 0) {
    const uint64_t take = std::min<uint64_t>(size, 32 - tailSize_);
    std::memcpy(tail_ + tailSize_, data, take);
    tailSize_ += take;
    data += take;
    size -= take;
    if (tailSize_ < 32) return;
    block(tail_);
    tailSize_ = 0;
  }
  for (; size >= 32; data += 32, size -= 32) block(data);
  std::memcpy(tail_, data, size);
  tailSize_ = size;
}

uint64_t ContentHash::value() const {
  uint64_t h = avalanche(total_);
  for (int i = 0; i < 4; ++i) h = avalanche(h ^ rotl(lanes_[i], 7 * i + 1));
  char last[32] = {};
  std::memcpy(last, tail_, tailSize_);
  for (int i = 0; i < 4; ++i) h = avalanche(round(h, word(last + 8 * i)));
  return h;
}

namespace {

/// Add bytes [from, to) of `fd` to `hash` (pread, 1 MiB at a time). False with errno set when
/// the file cannot be read.
bool hashFileRange(int fd, uint64_t from, uint64_t to, ContentHash& hash) {
  std::string buffer(std::min<uint64_t>(to - from, uint64_t{1} << 20), '\0');
  uint64_t at = from;
  while (at < to) {
    const ssize_t r = pread(fd, buffer.data(), std::min<uint64_t>(buffer.size(), to - at), static_cast<off_t>(at));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r == 0) errno = EIO;  // shorter than written
      return false;
    }
    hash.add(buffer.data(), static_cast<uint64_t>(r));
    at += static_cast<uint64_t>(r);
  }
  return true;
}

}  // namespace

bool hashFile(int fd, uint64_t size, uint64_t& out) {
  ContentHash hash;
  if (!hashFileRange(fd, 0, size, hash)) return false;
  out = hash.value();
  return true;
}

}  // namespace qconv::io
