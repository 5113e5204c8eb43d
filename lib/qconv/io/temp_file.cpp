#include "qconv/io/temp_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>

#include "qconv/diag.h"

namespace qconv::io {

namespace {
/// An anonymous file is linked by /proc/self/fd (no privilege needed), or by AT_EMPTY_PATH
/// (needs CAP_DAC_READ_SEARCH): one of them must be there, else the named fallback is used.
bool canLink() { return access("/proc/self/fd", X_OK) == 0 || geteuid() == 0; }
}  // namespace

std::shared_ptr<const Folder> Folder::tryOpen(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  return std::shared_ptr<const Folder>(new Folder(fd, dir));
}

std::shared_ptr<const Folder> Folder::open(const std::string& dir, const std::string& for_path) {
  if (auto folder = tryOpen(dir)) return folder;
  throw Error(ExitCode::Output, fmt::format("{}: cannot open its folder '{}': {}", for_path, dir, sysError()));
}

Folder::~Folder() { close(fd_); }

TempFile::TempFile(std::shared_ptr<const Folder> folder, const std::string& base, const std::string& target)
    : folder_(std::move(folder)), base_(base) {
  retarget(target);
  fd_ = openat(folder_->fd(), ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  anonymous_ = fd_ >= 0 && canLink();
  if (fd_ >= 0 && !anonymous_) {
    close(fd_);
    fd_ = -1;
  }
  // elsewhere a hidden named file, created exclusively (never a followed link)
  for (unsigned attempt = 0; !anonymous_ && attempt < 100; ++attempt) {
    name_ = fmt::format(".{}.qconv-{:06x}", base, (static_cast<unsigned>(getpid()) * 2654435761u + attempt * 40503u) & 0xffffffu);
    fd_ = openat(folder_->fd(), name_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd_ >= 0 || errno != EEXIST) break;
  }
  if (fd_ < 0) {
    name_.clear();
    throw Error(ExitCode::Output, fmt::format("{}: cannot create a file in '{}': {}", target, folder_->path(), sysError()));
  }
}

TempFile::~TempFile() {
  if (fd_ >= 0) close(fd_);
  if (!committed_ && !name_.empty()) unlinkat(folder_->fd(), name_.c_str(), 0);
}

void TempFile::counted(uint64_t bytes) const {
  if (counter_) counter_->fetch_add(bytes, std::memory_order_relaxed);
  throwIfCancelled(cancel_, target_);
}

void TempFile::retarget(std::string target) {
  target_ = std::move(target);
  const size_t slash = target_.rfind('/');
  target_name_ = slash == std::string::npos ? target_ : target_.substr(slash + 1);
}

void TempFile::fail(const std::string& what) const { throw Error(ExitCode::Output, fmt::format("{}: {}", target_, what)); }

void TempFile::reserve(uint64_t size) { reserve(0, size); }

void TempFile::reserve(uint64_t offset, uint64_t size) {
  if (size == 0) return;
  // a file system without fallocate (EOPNOTSUPP) just allocates as it writes
  if (fallocate(fd_, 0, static_cast<off_t>(offset), static_cast<off_t>(size)) != 0 && errno != EOPNOTSUPP &&
      errno != ENOSYS)
    fail(fmt::format("cannot allocate {} bytes: {}", size, sysError()));
}

void TempFile::finish(bool durable) {
  const mode_t mask = umask(0);
  umask(mask);
  if (fchmod(fd_, 0666 & ~mask) != 0) fail(fmt::format("cannot set permissions: {}", sysError()));
  if (durable && fsync(fd_) != 0) fail(fmt::format("cannot sync: {}", sysError()));
}

void TempFile::commit() {
  const int dir = folder_->fd();
  const bool linked = anonymous_ && linkAt(target_name_);  // no name was ever between this file and its place
  if (anonymous_ && !linked) linkIn();
  const int fd = fd_;
  fd_ = -1;
  if (close(fd) != 0) {
    const std::string why = sysError();
    if (linked) unlinkat(dir, target_name_.c_str(), 0);  // the name this just made: nothing is left in place
    fail(fmt::format("cannot close: {}", why));
  }
  if (linked) {
    name_.clear();
  } else if (renameat(dir, name_.c_str(), dir, target_name_.c_str()) != 0) {
    fail(fmt::format("cannot rename the temporary file into place: {}", sysError()));
  }
  committed_ = true;
}

bool TempFile::linkAt(const std::string& name) const {
  const std::string proc = fmt::format("/proc/self/fd/{}", fd_);
  int r = linkat(AT_FDCWD, proc.c_str(), folder_->fd(), name.c_str(), AT_SYMLINK_FOLLOW);
  if (r != 0 && errno == ENOENT) r = linkat(fd_, "", folder_->fd(), name.c_str(), AT_EMPTY_PATH);
  return r == 0;
}

void TempFile::linkIn() {
  for (unsigned attempt = 0;; ++attempt) {
    name_ = fmt::format(".{}.qconv-{}-{}", base_, getpid(), attempt);
    if (linkAt(name_)) return;
    if (errno != EEXIST || attempt > 100) {
      const std::string why = sysError();
      name_.clear();
      fail(fmt::format("cannot link the temporary file into '{}': {}", folder_->path(), why));
    }
  }
}

std::string linkedTemporaryBase(const std::string& name) {
  // .BASE.qconv-<digits>-<digits>
  const size_t mark = name.rfind(".qconv-");
  if (name.size() < 2 || name[0] != '.' || mark == std::string::npos || mark < 2) return {};
  const std::string tail = name.substr(mark + 7);
  const size_t dash = tail.find('-');
  auto digits = [](const std::string& t) {
    return !t.empty() && std::all_of(t.begin(), t.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  };
  if (dash == std::string::npos || !digits(tail.substr(0, dash)) || !digits(tail.substr(dash + 1))) return {};
  return name.substr(1, mark - 1);
}

FolderLock::FolderLock(const Folder& folder) : fd_(openat(folder.fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
  if (fd_ < 0) return;
  int r;
  while ((r = flock(fd_, LOCK_EX)) != 0 && errno == EINTR) {
  }
  locked_ = r == 0;  // else not supported here: go on unlocked
}

FolderLock::~FolderLock() {
  if (fd_ >= 0) close(fd_);  // releases the lock
}

}  // namespace qconv::io
