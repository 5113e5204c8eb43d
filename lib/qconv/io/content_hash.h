// A 64-bit hash of a file's bytes, to name a data file by its content.
#pragma once

#include <cstdint>

namespace qconv::io {

/// The hash of a stream of bytes, given in pieces of any size (the same bytes give the same
/// value however they are cut, on every run and host). Not cryptographic: eight 64-bit lanes,
/// one per little-endian word of each 64-byte stripe, each adding the word's 32 x 32-bit product
/// under a key that changes with the stripe's place in its 1 KiB block (so moving a stripe
/// changes the value), and its neighbour lane the word itself (so no bit is lost); the lanes
/// scrambled after each block, then joined with the length and an avalanche. Vector code where
/// the CPU has AVX2 computes the same values as the word-at-a-time code: about 4x the speed of
/// the hash it replaced (ContentHashV1), so naming the data file costs little beside writing it.
class ContentHash {
 public:
  enum class Kernel { best, scalar };  // `scalar`: the word-at-a-time code on any CPU (for tests)
  explicit ContentHash(Kernel kernel = Kernel::best);
  void add(const char* data, uint64_t size);
  uint64_t value() const;

 private:
  uint64_t lanes_[8];
  unsigned char tail_[64] = {};
  uint64_t tailSize_ = 0;
  uint64_t total_ = 0;
  unsigned stripe_ = 0;  // the next stripe's place in its block
  bool scalar_;
};

/// The hash qconv named data files with before ContentHash (four lanes of 64-bit
/// multiply-rotate rounds, about 22 GB/s): kept so the sweep still knows the data files an
/// earlier qconv wrote as its own (io/output_pair.h).
class ContentHashV1 {
 public:
  void add(const char* data, uint64_t size);
  uint64_t value() const;

 private:
  void block(const char* p);

  uint64_t lanes_[4] = {0x243f6a8885a308d3ULL, 0x13198a2e03707344ULL, 0xa4093822299f31d0ULL, 0x082efa98ec4e6c89ULL};
  unsigned char tail_[32] = {};
  uint64_t tailSize_ = 0;
  uint64_t total_ = 0;
};

/// ContentHash and ContentHashV1 of the first `size` bytes of `fd`, in one read (pread, 1 MiB
/// at a time, never the whole file in memory). Returns false with errno set when the file
/// cannot be read.
bool hashFile(int fd, uint64_t size, uint64_t& current, uint64_t& v1);

}  // namespace qconv::io
