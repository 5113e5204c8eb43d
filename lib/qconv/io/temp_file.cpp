#include "qconv/io/temp_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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
  if (anonymous_) linkIn();
  const int fd = fd_;
  fd_ = -1;
  if (close(fd) != 0) fail(fmt::format("cannot close: {}", sysError()));
  if (rename(path_.c_str(), target_.c_str()) != 0)
    fail(fmt::format("cannot rename the temporary file into place: {}", sysError()));
  committed_ = true;
}

void TempFile::linkIn() {
  const std::string proc = fmt::format("/proc/self/fd/{}", fd_);
  for (unsigned attempt = 0;; ++attempt) {
    path_ = fmt::format("{}/.{}.qconv-{}-{}", dir_, base_, getpid(), attempt);
    int r = linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, path_.c_str(), AT_SYMLINK_FOLLOW);
    if (r != 0 && errno == ENOENT) r = linkat(fd_, "", AT_FDCWD, path_.c_str(), AT_EMPTY_PATH);
    if (r == 0) return;
    if (errno != EEXIST || attempt > 100) {
      const std::string why = sysError();
      path_.clear();
      fail(fmt::format("cannot link the temporary file into '{}': {}", dir_, why));
    }
  }
}

}  // namespace qconv::io
