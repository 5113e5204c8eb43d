// A temporary file beside an output, renamed over it only when whole.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace qconv::io {

/// An output's folder, opened once: every later step of a write (its temporaries, the lock, the
/// sweep, the renames, the checks against the files the run reads) is made relative to this
/// descriptor, never by resolving the folder's path again. A folder swapped for a symbolic link
/// to another one during the run (the input's, say) is not followed: the output goes where the
/// write plan checked it would (pipeline/write_plan.h opens it).
class Folder {
 public:
  /// Throws Error(Output) naming `for_path` when `dir` cannot be opened as a folder.
  static std::shared_ptr<const Folder> open(const std::string& dir, const std::string& for_path);
  /// nullptr when it cannot (the write opens it again later, and fails with the reason).
  static std::shared_ptr<const Folder> tryOpen(const std::string& dir);
  ~Folder();
  Folder(const Folder&) = delete;
  Folder& operator=(const Folder&) = delete;
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  Folder(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

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
  /// In `folder`, to become `target` (a path in it: its last component is the name it gets,
  /// the whole names it in messages); `base` names the hidden file while it has a name.
  TempFile(std::shared_ptr<const Folder> folder, const std::string& base, const std::string& target);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  int fd() const { return fd_; }
  /// Where the bytes written to this file are counted (a progress line), or null; `cancel`: the
  /// caller's flag (throwIfCancelled, diag.h), read as each piece is written.
  void countInto(std::atomic<uint64_t>* counter, const std::atomic<bool>* cancel = nullptr) {
    counter_ = counter;
    cancel_ = cancel;
  }
  /// `bytes` more were written; throws Error(Cancelled) when the caller cancelled.
  void counted(uint64_t bytes) const;
  const std::string& target() const { return target_; }
  /// The path commit() renames to, when it is known only after the bytes are written (in the
  /// same folder: its last component is the name).
  void retarget(std::string target);
  const Folder& folder() const { return *folder_; }
  [[noreturn]] void fail(const std::string& what) const;

  /// Allocate the file's blocks before writing: a full disk fails here, before any work, and
  /// ext4 then has no delayed allocation to flush when the file is renamed over an old one.
  void reserve(uint64_t size);
  /// reserve() bytes [offset, offset + size), as a file written piece by piece learns its size
  /// (ExternalFiles' kept tensors): writing into allocated blocks costs ext4 about 40% less CPU
  /// than its delayed allocation (1 GiB in 512 KiB writes: 160 -> 94 ms).
  void reserve(uint64_t offset, uint64_t size);
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

  std::shared_ptr<const Folder> folder_;
  std::string base_;
  std::string name_;    // the hidden name in folder_ while it has one, else empty
  std::string target_;  // a path, for messages
  std::string target_name_;  // its last component: the name it gets in folder_
  int fd_ = -1;
  std::atomic<uint64_t>* counter_ = nullptr;
  const std::atomic<bool>* cancel_ = nullptr;
  bool anonymous_ = false;
  bool committed_ = false;
};

/// The BASE of a hidden name TempFile::commit links an anonymous file at (.BASE.qconv-PID-N),
/// or empty when `name` is not one. (The named fallback's .BASE.qconv-XXXXXX never matches.)
std::string linkedTemporaryBase(const std::string& name);

/// An exclusive flock on a folder, released when destroyed (or when the process dies): every
/// qconv commit into a folder holds it (io/output_pair.cpp, writeTextFile). It opens the folder
/// anew through `folder`'s descriptor ("." relative to it): a lock of its own (flock belongs to
/// an open file description), on the same folder, whatever its path names now.
class FolderLock {
 public:
  explicit FolderLock(const Folder& folder);
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
