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

TempFile::TempFile(const std::string& dir, const std::string& base, const std::string& target)
    : dir_(dir), base_(base), target_(target) {
  fd_ = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  anonymous_ = fd_ >= 0 && canLink();
  if (fd_ >= 0 && !anonymous_) {
    close(fd_);
    fd_ = -1;
  }
  if (!anonymous_) {
    path_ = dir + "/." + base + ".qconv-XXXXXX";
    fd_ = mkostemp(path_.data(), O_CLOEXEC);
  }
  if (fd_ < 0) throw Error(ExitCode::Output, fmt::format("{}: cannot create a file in '{}': {}", target, dir, sysError()));
}

TempFile::~TempFile() {
  if (fd_ >= 0) close(fd_);
  if (!committed_ && !path_.empty()) unlink(path_.c_str());
}

void TempFile::fail(const std::string& what) const { throw Error(ExitCode::Output, fmt::format("{}: {}", target_, what)); }

void TempFile::reserve(uint64_t size) {
  if (size == 0) return;
  // a file system without fallocate (EOPNOTSUPP) just allocates as it writes
  if (fallocate(fd_, 0, 0, static_cast<off_t>(size)) != 0 && errno != EOPNOTSUPP && errno != ENOSYS)
    fail(fmt::format("cannot allocate {} bytes: {}", size, sysError()));
}

void TempFile::finish(bool durable) {
  const mode_t mask = umask(0);
  umask(mask);
  if (fchmod(fd_, 0666 & ~mask) != 0) fail(fmt::format("cannot set permissions: {}", sysError()));
  if (durable && fsync(fd_) != 0) fail(fmt::format("cannot sync: {}", sysError()));
}

void TempFile::commit() {
  const bool linked = anonymous_ && linkAt(target_);  // no name was ever between this file and its place
  if (anonymous_ && !linked) linkIn();
  const int fd = fd_;
  fd_ = -1;
  if (close(fd) != 0) {
    const std::string why = sysError();
    if (linked) unlink(target_.c_str());  // the name this just made: nothing is left in place
    fail(fmt::format("cannot close: {}", why));
  }
  if (linked) {
    path_.clear();
  } else if (rename(path_.c_str(), target_.c_str()) != 0) {
    fail(fmt::format("cannot rename the temporary file into place: {}", sysError()));
  }
  committed_ = true;
}

bool TempFile::linkAt(const std::string& name) const {
  const std::string proc = fmt::format("/proc/self/fd/{}", fd_);
  int r = linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW);
  if (r != 0 && errno == ENOENT) r = linkat(fd_, "", AT_FDCWD, name.c_str(), AT_EMPTY_PATH);
  return r == 0;
}

void TempFile::linkIn() {
  for (unsigned attempt = 0;; ++attempt) {
    path_ = fmt::format("{}/.{}.qconv-{}-{}", dir_, base_, getpid(), attempt);
    if (linkAt(path_)) return;
    if (errno != EEXIST || attempt > 100) {
      const std::string why = sysError();
      path_.clear();
      fail(fmt::format("cannot link the temporary file into '{}': {}", dir_, why));
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

FolderLock::FolderLock(const std::string& dir) : fd_(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
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
