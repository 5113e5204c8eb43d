// A 64-bit hash of a file's bytes, to name a data file by its content.
#pragma once

#include <cstdint>

namespace qconv::io {

/// A hash of the first `size` bytes of `fd` (read with pread, 1 MiB at a time, never the whole
/// file in memory). Not cryptographic: four lanes of 64-bit multiply-rotate rounds over
/// little-endian words, joined with the length and a final avalanche; fast enough to run over
/// every data file qconv writes (several GB/s). The same bytes give the same value on every
/// run and host. Returns false with errno set when the file cannot be read.
bool hashFile(int fd, uint64_t size, uint64_t& out);

/// The same hash over bytes in memory (for tests, and for the same stream in pieces).
class ContentHash {
 public:
  void add(const char* data, uint64_t size);
  uint64_t value() const;

 private:
  void block(const char* p);

  uint64_t lanes_[4] = {0x243f6a8885a308d3ULL, 0x13198a2e03707344ULL, 0xa4093822299f31d0ULL, 0x082efa98ec4e6c89ULL};
  char tail_[32] = {};
  uint64_t tailSize_ = 0;
  uint64_t total_ = 0;
};

}  // namespace qconv::io
