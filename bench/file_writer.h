// The benchmark floor's writer (bench/roundtrip.cpp): serialized bytes to a file descriptor in
// 1 MiB writes, as qconv writes its buffered bytes (io::InlineModel through a 1 MiB buffer), so
// that the floor makes no more system calls than it must.
#pragma once

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <unistd.h>

#include <cerrno>

namespace qconv::bench {

/// protobuf 3.21's FileOutputStream ignores its block size and writes 8 KiB at a time (3,000
/// system calls for a 25 MB model, half the write stage's time). Wrapped in a
/// CopyingOutputStreamAdaptor of 1 MiB (kBlock), this writes 1 MiB at a time.
class FileWriter : public google::protobuf::io::CopyingOutputStream {
 public:
  static constexpr int kBlock = 1 << 20;

  explicit FileWriter(int fd) : fd_(fd) {}

  bool Write(const void* buffer, int size) override {
    const char* p = static_cast<const char*>(buffer);
    while (size > 0) {
      const ssize_t w = write(fd_, p, static_cast<size_t>(size));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        error_ = w < 0 ? errno : EIO;
        return false;
      }
      p += w;
      size -= static_cast<int>(w);
    }
    return true;
  }

  /// errno of the failed write; 0 if none failed.
  int error() const { return error_; }

 private:
  int fd_;
  int error_ = 0;
};

}  // namespace qconv::bench
