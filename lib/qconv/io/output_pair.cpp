// The commit of an output: its data file and its model put in place as a pair.
//
//   before: OUT -> OUT.<a>.data              (the last output, or nothing)
//   1. lock the folder (flock, exclusive: one qconv commit at a time in it)
//   2. rename the new data file in as OUT.<b>.data   (b: a hash of its bytes; a != b unless
//      the bytes are the same, so the old pair is untouched)
//   3. rename the new model over OUT                 (OUT -> OUT.<b>.data: the new pair)
//   4. remove OUT.<x>.data for every x != b          (no model at OUT names them any more)
//   5. fsync the folder when durable (--fsync); unlock
//
// A failure at 3 removes what 2 brought in (unless it was there before, with the same bytes),
// and leaves the old pair. A writer killed between 2 and 3 leaves an unnamed data file, which
// the next commit to OUT removes at 4. The lock makes 2 to 4 one step for every qconv writing
// to the folder: without it a writer's step 4 could remove the data file another has just
// renamed in at its step 2. Where flock is not available (some network file systems) the
// commit goes on without it. SIGTERM, SIGINT, SIGHUP and SIGQUIT are held from 1 to 5: a
// signal then ends the run just after the commit, not inside it.
#include <dirent.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "qconv/diag.h"
#include "qconv/io/model_io.h"
#include "qconv/io/temp_file.h"

namespace qconv::io {

namespace {

constexpr size_t kTagDigits = 16;

/// An exclusive flock on a folder, released when destroyed (or when the process dies).
class FolderLock {
 public:
  explicit FolderLock(const std::string& dir) : fd_(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (fd_ < 0) return;
    while (flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) break;  // not supported here: go on unlocked
  }
  ~FolderLock() {
    if (fd_ >= 0) close(fd_);  // releases the lock
  }
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  /// The folder, open for reading (-1 when it could not be opened).
  int fd() const { return fd_; }

 private:
  int fd_;
};

/// SIGTERM, SIGINT, SIGHUP and SIGQUIT held back for the commit's few system calls, delivered
/// when it ends: a run interrupted there dies with the new pair in place, never with a linked
/// temporary between its link and its rename. (SIGKILL cannot be held: docs/robustness.md.)
class HoldInterrupts {
 public:
  HoldInterrupts() {
    sigset_t hold;
    sigemptyset(&hold);
    for (int s : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) sigaddset(&hold, s);
    pthread_sigmask(SIG_BLOCK, &hold, &old_);
  }
  ~HoldInterrupts() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  HoldInterrupts(const HoldInterrupts&) = delete;
  HoldInterrupts& operator=(const HoldInterrupts&) = delete;

 private:
  sigset_t old_;
};

/// Step 4: every regular file of `dir` named as a data file of `base`, but `keep`, and not
/// protected. Best effort: a file that cannot be removed is left (it is named by no model).
void removeStaleData(const std::string& dir, const std::string& base, const std::string& keep,
                     const WriteOptions& options) {
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  std::vector<std::string> names;
  if (options.data_file_names) {
    names = *options.data_file_names;
  } else {
    while (const dirent* e = readdir(d))
      if (isDataFileName(base, e->d_name)) names.emplace_back(e->d_name);
  }
  std::vector<std::string> stale;
  for (const std::string& name : names) {
    if (name == keep || !isDataFileName(base, name)) continue;
    struct stat st {};
    if (fstatat(dirfd(d), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    if (!options.protects(st.st_dev, st.st_ino)) stale.push_back(name);
  }
  for (const std::string& name : stale) unlinkat(dirfd(d), name.c_str(), 0);
  closedir(d);
}

/// Make the renames themselves durable: fsync the folder that holds them (`fd`, the lock's).
void syncFolder(int fd, const std::string& path) {
  if (fd < 0 || fsync(fd) != 0)
    throw Error(ExitCode::Output, fmt::format("{}: written, but its folder cannot be synced: {}", path, sysError()));
}

}  // namespace

std::string dataFileName(const std::string& base, uint64_t hash) { return fmt::format("{}.{:016x}.data", base, hash); }

bool isDataFileName(const std::string& base, const std::string& name) {
  const size_t want = base.size() + 1 + kTagDigits + 5;
  if (name.size() != want || name.compare(0, base.size(), base) != 0 || name[base.size()] != '.' ||
      name.compare(want - 5, 5, ".data") != 0)
    return false;
  return std::all_of(name.begin() + static_cast<long>(base.size()) + 1, name.end() - 5,
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f'); });
}

std::string dataFileOwner(const std::string& name) {
  const size_t tag = 1 + kTagDigits + 5;  // ".<16 hex>.data"
  if (name.size() <= tag) return {};
  std::string base = name.substr(0, name.size() - tag);
  return isDataFileName(base, name) ? base : std::string();
}

PendingWrite::PendingWrite(std::unique_ptr<TempFile> model, std::unique_ptr<TempFile> data, std::string dir,
                           std::string path, const WriteOptions& options)
    : model_(std::move(model)), data_(std::move(data)), dir_(std::move(dir)), path_(std::move(path)), options_(options) {
  options_.file_backed = nullptr;  // written already
}
PendingWrite::PendingWrite(PendingWrite&&) noexcept = default;
PendingWrite::~PendingWrite() = default;

void PendingWrite::commit() { commit({}); }

std::string PendingWrite::dataFile() const { return data_ ? data_->target() : std::string(); }

void PendingWrite::commit(const std::function<void()>& between) {
  QCONV_ASSERT(model_, "{}: PendingWrite committed twice", path_);
  std::shared_lock<std::shared_mutex> gate;
  if (options_.commit_gate) gate = std::shared_lock<std::shared_mutex>(*options_.commit_gate);
  HoldInterrupts hold;
  FolderLock lock(dir_);
  std::string keep;
  bool broughtIn = false;
  if (data_) {
    keep = splitPath(data_->target()).base;
    struct stat st {};
    broughtIn = lstat(data_->target().c_str(), &st) != 0;
    data_->commit();
  }
  try {
    if (between) between();
    model_->commit();
  } catch (...) {
    if (broughtIn) unlink(data_->target().c_str());
    throw;
  }
  removeStaleData(dir_, splitPath(path_).base, keep, options_);
  model_.reset();
  data_.reset();
  if (options_.durable) syncFolder(lock.fd(), path_);
}

}  // namespace qconv::io
