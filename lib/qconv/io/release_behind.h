// The pages of a read-only file mapping that a forward walk has passed, dropped from this
// process's memory. Each page a walk touches maps its neighbours too (fault-around), so a walk
// over a large mapped model would otherwise show the whole file in its memory: io::openModel's
// walk and io::externalLocations' both drop what lies behind them, 8 MiB at a time.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>

namespace qconv::io {

class ReleaseBehind {
 public:
  static constexpr size_t kChunk = size_t{8} << 20;

  explicit ReleaseBehind(const void* mapping) : data_(static_cast<const char*>(mapping)) {}

  /// Everything before byte `upto` is read: drop those pages, once kChunk of them have gathered.
  void done(size_t upto) {
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    upto = upto / page * page;
    if (upto < released_ + kChunk) return;
    madvise(const_cast<char*>(data_) + released_, upto - released_, MADV_DONTNEED);
    released_ = upto;
  }

 private:
  const char* data_;
  size_t released_ = 0;
};

}  // namespace qconv::io
