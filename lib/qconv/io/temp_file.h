// A temporary file beside an output, renamed over it only when whole.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace qconv::io {

/// A file created in the output's folder that is removed unless committed. It is anonymous
/// where the file system can (O_TMPFILE): it has no name until commit() links it in, straight
/// at the target when no file has that name, else at a hidden name (.BASE.qconv-PID-N) renamed
/// over the target at once. A run killed at any instant before (SIGKILL included) leaves
/// nothing behind; one killed between that link and its rename leaves the hidden name, which
/// the next commit to the same output removes (io/output_pair.cpp). Elsewhere it is a hidden file made by mkstemp (O_EXCL: never a followed link),
/// removed by the destructor on any error and by nobody if the process is killed.
/// Every failure throws Error(Output) naming the target.
class TempFile {
 public:
  /// In folder `dir`, to become `target`; `base` names the hidden file while it has a name.
  TempFile(const std::string& dir, const std::string& base, const std::string& target);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  int fd() const { return fd_; }
  /// Where the bytes written to this file are counted (a progress line), or null.
  void countInto(std::atomic<uint64_t>* counter) { counter_ = counter; }
  void counted(uint64_t bytes) const {
    if (counter_) counter_->fetch_add(bytes, std::memory_order_relaxed);
  }
  const std::string& target() const { return target_; }
  /// The path commit() renames to, when it is known only after the bytes are written.
  void retarget(std::string target) { target_ = std::move(target); }
  [[noreturn]] void fail(const std::string& what) const;

  /// Allocate the file's blocks before writing: a full disk fails here, before any work, and
  /// ext4 then has no delayed allocation to flush when the file is renamed over an old one.
  void reserve(uint64_t size);
  /// Permissions as a new file would get, flushed to disk if `durable`. The descriptor stays
  /// readable until commit.
  void finish(bool durable);
  /// Put the file at the target: a directory entry is replaced (a symlink there is replaced,
  /// not followed).
  void commit();

 private:
  /// Give the anonymous file a hidden name beside the target (a fresh one if taken).
  void linkIn();
  /// Link the anonymous file at `name`; false (errno set) when it cannot, e.g. EEXIST.
  bool linkAt(const std::string& name) const;

  std::string dir_, base_, path_, target_;
  int fd_ = -1;
  std::atomic<uint64_t>* counter_ = nullptr;
  bool anonymous_ = false;
  bool committed_ = false;
};

/// The BASE of a hidden name TempFile::commit links an anonymous file at (.BASE.qconv-PID-N),
/// or empty when `name` is not one. (The named fallback's .BASE.qconv-XXXXXX never matches.)
std::string linkedTemporaryBase(const std::string& name);

/// An exclusive flock on a folder, released when destroyed (or when the process dies): every
/// qconv commit into a folder holds it (io/output_pair.cpp, writeTextFile).
class FolderLock {
 public:
  explicit FolderLock(const std::string& dir);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  /// The folder, open for reading (-1 when it could not be opened).
  int fd() const { return fd_; }
  /// Whether the lock is held (false where the file system has no flock).
  bool locked() const { return locked_; }

 private:
  int fd_;
  bool locked_ = false;
};

}  // namespace qconv::io
