// The commit of an output: its data file and its model put in place as a pair.
//
//   before: OUT -> OUT.<a>.data              (the last output, or nothing)
//   1. lock the folder (flock, exclusive: one qconv commit at a time in it)
//   2. list what step 5 may remove, and check it: see "The sweep" below
//   3. link the new data file in as OUT.<b>.data     (b: a hash of its bytes; a != b unless
//      the bytes are the same, so the old pair is untouched)
//   4. rename the new model over OUT                 (OUT -> OUT.<b>.data: the new pair)
//   5. remove what step 2 listed                     (no model at OUT names it any more)
//   6. fsync the folder when durable (--fsync); unlock
//
// The sweep removes, of the files of OUT's folder, only what qconv wrote for OUT and what no
// input of the run reads (WriteOptions::protected_files, pipeline/write_plan.h):
//   - OUT.<x>.data for x != b, a regular file whose bytes hash to x (so a file of the user's
//     that only looks like one stays): the data file of the model being replaced (read off
//     that model, io/external_refs.h, when the listing was made before the lock: a batch's one
//     listing, WriteOptions::data_file_names; so a commit by another process since is swept
//     too), and the ones a listing of the folder found (what killed runs left; listed here,
//     under the lock, for a lone run);
//   - the hidden temporaries a commit killed between its link and its rename left
//     (.OUT.qconv-P-N, .OUT.data.qconv-P-N, temp_file.h): temporaries get a name only inside a
//     commit, under this lock, so while it is held every one of them is a leftover. Only when the
//     lock is held (never on a file system without flock).
// The checks (the hashes) run before step 4, so that only the unlinks lie between the model's
// rename and the end of the commit.
//
// A failure at 4 removes what 3 brought in (unless it was there before, with the same bytes),
// and leaves the old pair. A writer killed between 3 and 4 leaves an unnamed data file, and one
// killed between 4 and 5 the old one: the next commit to OUT removes both. The lock makes 2 to 5
// one step for every qconv writing to the folder: without it a writer's step 5 could remove the
// data file another has just linked in at its step 3. Where flock is not available (some
// network file systems) the commit goes on without it. SIGTERM, SIGINT, SIGHUP and SIGQUIT are
// held from 1 to 6: a signal then ends the run just after the commit, not inside it.
#include <dirent.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

#include "qconv/diag.h"
#include "qconv/io/content_hash.h"
#include "qconv/io/external_refs.h"
#include "qconv/io/model_io.h"
#include "qconv/io/temp_file.h"

namespace qconv::io {

namespace {

constexpr size_t kTagDigits = 16;

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

/// tagMatches for `name` of `dirfd`, a regular file described by `st`.
bool tagMatchesAt(int dirfd, const std::string& name, const struct stat& st) {
  const std::string owner = dataFileOwner(name);
  if (owner.empty()) return false;
  const int fd = openat(dirfd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return false;
  uint64_t hash = 0, v1 = 0;
  const bool read = hashFile(fd, static_cast<uint64_t>(st.st_size), hash, v1);
  close(fd);
  // the name qconv gives those bytes, or the name an earlier qconv gave them (ContentHashV1)
  return read && (name == dataFileName(owner, hash) || name == dataFileName(owner, v1));
}

/// Whether `name` ends in ".onnx", in any case: what the sweep reads as a model.
bool isModelName(const std::string& name) {
  if (name.size() < 5) return false;
  std::string tail = name.substr(name.size() - 5);
  std::transform(tail.begin(), tail.end(), tail.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return tail == ".onnx";
}

/// The external-data locations the models of the folder name, but OUT itself (`base`), which
/// is being replaced: every regular file *.onnx there (io/external_refs.h reads only their
/// message headers), sorted.
std::vector<std::string> namedByOtherModels(int dirfd, const std::string& base) {
  std::vector<std::string> named;
  const int fd = dup(dirfd);
  if (fd < 0) return named;
  DIR* d = fdopendir(fd);
  if (!d) {
    close(fd);
    return named;
  }
  rewinddir(d);  // a dup shares the folder's offset
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == base || !isModelName(name)) continue;
    for (std::string& location : externalLocationsAt(dirfd, name)) named.push_back(std::move(location));
  }
  closedir(d);
  std::sort(named.begin(), named.end());
  return named;
}

/// Step 2: what step 5 removes (see the top of this file). `old` names what the model being
/// replaced reads.
std::vector<std::string> sweepList(int dirfd, const std::string& base, const std::string& keep,
                                   const WriteOptions& options, bool locked, const std::vector<std::string>& old) {
  std::vector<std::string> names;
  if (options.data_file_names) {
    names = *options.data_file_names;
  } else if (const int fd = dup(dirfd); fd >= 0) {
    if (DIR* d = fdopendir(fd)) {  // owns fd now
      rewinddir(d);  // a dup shares the folder's offset: another listing may have read it to the end
      while (const dirent* e = readdir(d))
        if (isSweptName(base, e->d_name)) names.emplace_back(e->d_name);
      closedir(d);
    } else {
      close(fd);
    }
  }
  for (const std::string& location : old)
    if (isDataFileName(base, location)) names.push_back(location);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::vector<std::string> stale;
  bool data_files = false;
  for (const std::string& name : names) {
    if (name == keep || !isSweptName(base, name)) continue;
    struct stat st {};
    if (fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    if (options.protects(st.st_dev, st.st_ino)) continue;
    const bool data_file = isDataFileName(base, name);
    if (data_file ? tagMatchesAt(dirfd, name, st) : locked) stale.push_back(name);
    data_files = data_files || data_file;
  }
  if (data_files) {  // a data file another model of the folder names stays (a copy of OUT, say)
    const std::vector<std::string> named = namedByOtherModels(dirfd, base);
    stale.erase(std::remove_if(stale.begin(), stale.end(), [&](const std::string& name) {
                  return std::binary_search(named.begin(), named.end(), name);
                }), stale.end());
  }
  return stale;
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

bool tagMatches(const std::string& path) {
  const PathParts parts = splitPath(path);
  const int dirfd = open(parts.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) return false;
  struct stat st {};
  const bool match = fstatat(dirfd, parts.base.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
                     tagMatchesAt(dirfd, parts.base, st);
  close(dirfd);
  return match;
}

bool tagMatchesIn(const Folder& folder, const std::string& name) {
  struct stat st {};
  return fstatat(folder.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
         tagMatchesAt(folder.fd(), name, st);
}

bool isSweptName(const std::string& base, const std::string& name) {
  if (isDataFileName(base, name)) return true;
  const std::string linked = linkedTemporaryBase(name);
  return linked == base || linked == base + ".data";
}

std::vector<std::string> sweptNameOwners(const std::string& name) {
  if (std::string owner = dataFileOwner(name); !owner.empty()) return {owner};
  std::string linked = linkedTemporaryBase(name);
  if (linked.empty()) return {};
  std::vector<std::string> owners{linked};
  if (linked.size() > 5 && linked.compare(linked.size() - 5, 5, ".data") == 0) owners.push_back(linked.substr(0, linked.size() - 5));
  return owners;
}

PendingWrite::PendingWrite(std::unique_ptr<TempFile> model, std::unique_ptr<TempFile> data,
                           std::shared_ptr<const Folder> folder, std::string path, const WriteOptions& options)
    : model_(std::move(model)), data_(std::move(data)), folder_(std::move(folder)), path_(std::move(path)), options_(options) {
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
  FolderLock lock(*folder_);
  const int dir = folder_->fd();  // the folder the plan checked, whatever its path names now
  const std::string base = splitPath(path_).base;
  const std::string keep = data_ ? splitPath(data_->target()).base : std::string();
  std::vector<std::string> stale;
  if (lock.fd() >= 0) {
    struct stat st {};
    // A listing made before the lock (a batch's) can miss a data file another process linked in
    // since: the model being replaced names it. A listing made here, under the lock, cannot.
    const bool replaces = options_.data_file_names && fstatat(dir, base.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                          S_ISREG(st.st_mode);  // a symlink's target is not replaced
    stale = sweepList(dir, base, keep, options_, lock.locked(),
                      replaces ? externalLocationsAt(dir, base) : std::vector<std::string>{});
  }
  bool broughtIn = false;
  if (data_) {
    struct stat st {};
    broughtIn = fstatat(dir, keep.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0;
    data_->commit();
  }
  try {
    if (between) between();
    model_->commit();
  } catch (...) {
    if (broughtIn) unlinkat(dir, keep.c_str(), 0);
    throw;
  }
  for (const std::string& name : stale) unlinkat(dir, name.c_str(), 0);
  model_.reset();
  data_.reset();
  if (options_.durable) syncFolder(lock.fd(), path_);
}

}  // namespace qconv::io
