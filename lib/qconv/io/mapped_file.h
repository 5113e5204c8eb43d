// A read-only mapping of a file that a shrinking file cannot turn into a signal.
//
// Reading a mapped page past a file's end kills the process with SIGBUS: a model or a data file
// truncated while qconv reads it in place (the parse, a pass's view, the write plan's scan)
// would kill the CLI, or the Python interpreter that called the library. So every mapping qconv
// makes is a MappedFile. While one exists, a SIGBUS handler is installed; a fault inside a
// MappedFile puts a page of zeros where the file's page was gone (MAP_FIXED, anonymous), marks
// the mapping faulted, and returns, so that the read goes on with zeros; the owner asks
// faulted() when it is done reading and reports the file as changed while it was read (exit 3),
// before anything it read is used for output. A fault anywhere else goes to the handler that
// was there before (chained, as if ours were not installed: Python's faulthandler, a host's
// own), and when the last MappedFile goes, that handler is put back as it was: no process-wide
// state outlives the mappings.
//
// The one piece of process-wide state in qconv, by necessity (a signal handler finds nothing
// else): a fixed table of the live mappings' ranges, read lock-free by the handler, and the
// handler that was there before ours, with a count of the mappings needing ours, under a mutex.
// A mapping that finds the table full is not made (data() is null): the callers then read the
// file with pread, as they do where mmap fails.
#pragma once

#include <cstddef>
#include <cstdint>

namespace qconv::io {

class MappedFile {
 public:
  /// Map `size` bytes of `fd` from offset 0, read-only and private. `sequential`: the pages are
  /// read front to back (madvise). data() is null when the file cannot be mapped (errno says why;
  /// ENOMEM when the address space is full) or the table of guarded mappings is full.
  MappedFile(int fd, size_t size, bool sequential = false);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return data_; }
  size_t size() const { return size_; }
  /// Whether a read found a page the file no longer has (it read as zeros): the file shrank
  /// while it was mapped, and what was read from it is not the file's.
  bool faulted() const;

  /// How many mappings the table holds at most.
  static constexpr size_t kMaxMappings = 4096;

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
  size_t slot_ = kMaxMappings;  // this mapping's entry in the table
};

/// When the first `size` bytes of `fd` (at least 4 MiB) are out of the page cache (a sample of
/// 16 bytes read with RWF_NOWAIT), read them in through the read path first: sendfile to
/// /dev/null, which copies nothing. The read path fills the cache with large folios, where a
/// mapping's faults and small reads leave pages one at a time, and a mapping of large folios
/// faults in and unmaps in fewer, larger steps: a ResNet-50-shape model (26 MB) read cold cost
/// qconv 21.6 ms of CPU, and 13.0 after this (cp: 8.4). For a file the run reads whole (an input,
/// its data files). A file in the cache is left as it is (the sample costs 16 system calls).
void readInCold(int fd, uint64_t size);

/// Whether qconv's SIGBUS handler is installed now (a MappedFile exists): for tests of what it
/// leaves behind.
bool guardInstalled();

}  // namespace qconv::io
