// The write stage: temporary files beside the output, renamed into place.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "qconv/diag.h"
#include "qconv/io/external_data.h"
#include "qconv/io/model_io.h"
#include "qconv/io/splice.h"

namespace qconv::io {

/// A file made by mkstemp (O_EXCL: never a followed link) that is removed unless committed.
// The temporary is anonymous where the file system can (O_TMPFILE): it has no name until
// commit() links it in and renames it over the target, so a run killed at any instant before
// (SIGKILL included) leaves nothing behind. Elsewhere it is a hidden named file, removed by the
// destructor on any error and by nobody if the process is killed.
class TempFile {
 public:
  TempFile(const std::string& dir, const std::string& base, const std::string& target)
      : dir_(dir), base_(base), target_(target) {
    fd_ = open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    anonymous_ = fd_ >= 0 && canLink();
    if (fd_ >= 0 && !anonymous_) {
      close(fd_);
      fd_ = -1;
    }
    if (!anonymous_) {
      path_ = dir + "/." + base + ".qconv-XXXXXX";
      fd_ = mkstemp(path_.data());
    }
    if (fd_ < 0) throw Error(ExitCode::Output, fmt::format("{}: cannot create a file in '{}': {}", target, dir, sysError()));
  }
  ~TempFile() {
    if (fd_ >= 0) close(fd_);
    if (!committed_ && !path_.empty()) unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  int fd() const { return fd_; }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ExitCode::Output, fmt::format("{}: {}", target_, what));
  }
  /// Permissions as a new file would get, flushed to disk if `durable`, closed.
  void finish(bool durable) {
    const mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd_, 0666 & ~mask) != 0) fail(fmt::format("cannot set permissions: {}", sysError()));
    if (durable && fsync(fd_) != 0) fail(fmt::format("cannot sync: {}", sysError()));
    if (anonymous_) return;  // kept open: commit() links it by its descriptor
    const int fd = fd_;
    fd_ = -1;
    if (close(fd) != 0) fail(fmt::format("cannot close: {}", sysError()));
  }
  /// Allocate the file's blocks before writing: a full disk fails here, before any work, and
  /// ext4 then has no delayed allocation to flush when the file is renamed over an old one.
  void reserve(uint64_t size) {
    if (size == 0) return;
    // a file system without fallocate (EOPNOTSUPP) just allocates as it writes
    if (fallocate(fd_, 0, 0, static_cast<off_t>(size)) != 0 && errno != EOPNOTSUPP && errno != ENOSYS)
      fail(fmt::format("cannot allocate {} bytes: {}", size, sysError()));
  }
  /// rename(2) replaces a directory entry (a symlink there is replaced, not followed).
  void commit() {
    if (anonymous_) linkIn();
    if (rename(path_.c_str(), target_.c_str()) != 0)
      fail(fmt::format("cannot rename the temporary file into place: {}", sysError()));
    committed_ = true;
  }

 private:
  /// An anonymous file is linked by /proc/self/fd (no privilege needed), or by AT_EMPTY_PATH
  /// (needs CAP_DAC_READ_SEARCH): one of them must be there, else the named fallback is used.
  static bool canLink() { return access("/proc/self/fd", X_OK) == 0 || geteuid() == 0; }

  /// Give the anonymous file a hidden name beside the target (a fresh one if taken), then close it.
  void linkIn() {
    const std::string proc = fmt::format("/proc/self/fd/{}", fd_);
    for (unsigned attempt = 0;; ++attempt) {
      path_ = fmt::format("{}/.{}.qconv-{}-{}", dir_, base_, getpid(), attempt);
      int r = linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, path_.c_str(), AT_SYMLINK_FOLLOW);
      if (r != 0 && errno == ENOENT) r = linkat(fd_, "", AT_FDCWD, path_.c_str(), AT_EMPTY_PATH);
      if (r == 0) break;
      if (errno != EEXIST || attempt > 100) {
        const std::string why = sysError();
        path_.clear();
        fail(fmt::format("cannot link the temporary file into '{}': {}", dir_, why));
      }
    }
    const int fd = fd_;
    fd_ = -1;
    if (close(fd) != 0) fail(fmt::format("cannot close: {}", sysError()));
  }

  std::string dir_, base_, path_, target_;
  int fd_ = -1;
  bool anonymous_ = false;
  bool committed_ = false;
};

namespace {

void writeAll(const TempFile& out, const char* data, uint64_t size, uint64_t offset) {
  uint64_t done = 0;
  while (done < size) {
    const ssize_t w = pwrite(out.fd(), data + done, size - done, static_cast<off_t>(offset + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) out.fail(fmt::format("cannot write: {}", w < 0 ? sysError() : "no progress"));
    done += static_cast<uint64_t>(w);
  }
}

/// Copy [from, from + size) of `in` (an input data file, or the input model for bytes the reader
/// left there) to `offset` of `out`: in the kernel where it can, else through a 1 MiB buffer.
/// Never the whole tensor in memory.
void copyRange(int in, uint64_t from, uint64_t size, const TempFile& out, uint64_t offset) {
  loff_t src = static_cast<loff_t>(from), dst = static_cast<loff_t>(offset);
  uint64_t left = size;
  while (left > 0) {
    const ssize_t n = copy_file_range(in, &src, out.fd(), &dst, std::min<uint64_t>(left, 1u << 30), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // not supported here (or the input is short): the loop below says which
    left -= static_cast<uint64_t>(n);
  }
  std::string buffer;
  while (left > 0) {
    buffer.resize(std::min<uint64_t>(left, 1u << 20));
    const ssize_t r = pread(in, buffer.data(), buffer.size(), src);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      out.fail(fmt::format("cannot copy tensor bytes from the input: {}",
                           r < 0 ? sysError() : "the input file is shorter than when it was read"));
    writeAll(out, buffer.data(), static_cast<uint64_t>(r), static_cast<uint64_t>(dst));
    src += r;
    dst += r;
    left -= static_cast<uint64_t>(r);
  }
}

void setExternal(onnx::TensorProto& t, const std::string& location, uint64_t offset, uint64_t length) {
  t.clear_raw_data();
  t.clear_external_data();
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  for (auto [k, v] : {std::pair<const char*, std::string>{"location", location}, {"offset", std::to_string(offset)},
                      {"length", std::to_string(length)}}) {
    auto* e = t.add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
}

/// One tensor's place in the data file, and where its bytes come from: an input data file
/// (fd, from) or its raw_data (fd -1).
struct Placement {
  onnx::TensorProto* tensor;
  int fd;
  uint64_t from, size, offset;
};

/// Lay out every tensor of at least kExternalThreshold bytes (a resolved external one, or
/// raw_data), each at the next kExternalAlignment boundary.
std::vector<Placement> layout(onnx::ModelProto& model, const FileBacked* file_backed) {
  std::vector<Placement> plan;
  uint64_t end = 0;
  for (auto& t : *model.mutable_graph()->mutable_initializer()) {
    Placement p{&t, -1, 0, 0, 0};
    if (const FileRange* r = findRange(file_backed, t)) {
      p.fd = r->fd;
      p.from = r->offset;
      p.size = r->length;
    } else {
      if (!t.has_raw_data() || t.raw_data().size() < kExternalThreshold) continue;
      p.size = t.raw_data().size();
    }
    p.offset = (end + kExternalAlignment - 1) / kExternalAlignment * kExternalAlignment;
    end = p.offset + p.size;
    plan.push_back(p);
  }
  return plan;
}

/// Every tensor of at least kExternalThreshold bytes into the data file; false if none went.
bool externalize(onnx::ModelProto& model, const FileBacked* file_backed, const std::string& location,
                 TempFile& data) {
  const std::vector<Placement> plan = layout(model, file_backed);
  if (plan.empty()) return false;
  data.reserve(plan.back().offset + plan.back().size);
  for (const Placement& p : plan) {
    if (p.fd >= 0) copyRange(p.fd, p.from, p.size, data, p.offset);
    else writeAll(data, p.tensor->raw_data().data(), p.size, p.offset);
    setExternal(*p.tensor, location, p.offset, p.size);
  }
  return true;
}

/// Serialized pieces into a temporary file: bytes through a 1 MiB buffer, file ranges copied in
/// the kernel (copyRange), each at the position the pieces before it end.
class FileSink : public SpliceSink {
 public:
  static constexpr size_t kBlock = size_t{1} << 20;

  explicit FileSink(const TempFile& out) : out_(out) { buffer_.reserve(kBlock); }
  void bytes(const char* data, size_t size) override {
    if (buffer_.size() + size > kBlock) flush();
    if (size >= kBlock) {
      writeAll(out_, data, size, written_);
      written_ += size;
    } else {
      buffer_.append(data, size);
    }
  }
  void fileRange(int fd, uint64_t from, uint64_t size) override {
    flush();
    copyRange(fd, from, size, out_, written_);
    written_ += size;
  }
  /// Flush; the bytes written in all.
  uint64_t finish() {
    flush();
    return written_;
  }

 private:
  void flush() {
    writeAll(out_, buffer_.data(), buffer_.size(), written_);
    written_ += buffer_.size();
    buffer_.clear();
  }

  const TempFile& out_;
  std::string buffer_;
  uint64_t written_ = 0;
};

/// Make the renames themselves durable: fsync the folder that holds them.
void syncFolder(const std::string& dir, const std::string& path) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const bool ok = fd >= 0 && fsync(fd) == 0;
  const std::string why = ok ? "" : sysError();
  if (fd >= 0) close(fd);
  if (!ok) throw Error(ExitCode::Output, fmt::format("{}: written, but its folder cannot be synced: {}", path, why));
}

void refuseProtected(const std::string& path, const WriteOptions& options) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return;
  for (const auto& [dev, ino] : options.protected_files)
    if (dev == static_cast<uint64_t>(st.st_dev) && ino == static_cast<uint64_t>(st.st_ino))
      throw Error(ExitCode::Usage,
                  fmt::format("{}: this file holds the input's external data; qconv never modifies its input", path));
}

}  // namespace

PendingWrite::PendingWrite(std::unique_ptr<TempFile> model, std::unique_ptr<TempFile> data, std::string dir,
                           std::string path, bool durable)
    : model_(std::move(model)), data_(std::move(data)), dir_(std::move(dir)), path_(std::move(path)), durable_(durable) {}
PendingWrite::PendingWrite(PendingWrite&&) noexcept = default;
PendingWrite::~PendingWrite() = default;

void PendingWrite::commit() {
  QCONV_ASSERT(model_, "{}: PendingWrite committed twice", path_);
  if (data_) data_->commit();  // the data first: the model never names a file not yet there
  model_->commit();
  model_.reset();
  data_.reset();
  if (durable_) syncFolder(dir_, path_);
}

PendingWrite writeTemporary(onnx::ModelProto& model, const std::string& path, const WriteOptions& options) {
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty() || base == "." || base == "..")
    throw Error(ExitCode::Output, fmt::format("{}: output path names no file", path));
  const std::string dataName = base + ".data";
  const std::string dataPath = dir + "/" + dataName;
  refuseProtected(path, options);

  std::unique_ptr<TempFile> data;
  if (options.external_data) {
    refuseProtected(dataPath, options);
    data = std::make_unique<TempFile>(dir, dataName, dataPath);
    if (!externalize(model, options.file_backed, dataName, *data)) data.reset();
  }
  // after externalize, what it moved names the new data file: nothing is file-backed any more
  const InlineModel plan(model, kSpliceThreshold, data ? nullptr : options.file_backed);
  if (plan.size() > static_cast<uint64_t>(INT_MAX))
    throw Error(ExitCode::Unsupported,
                plan.readsDataFiles()
                    ? fmt::format("{}: with every tensor inline the model would be {} bytes, over protobuf's 2 GB limit; "
                                  "keep its external data (drop --inline-data)",
                                  path, plan.size())
                    : fmt::format("{}: the model would be {} bytes, over protobuf's 2 GB limit", path, plan.size()));

  auto out = std::make_unique<TempFile>(dir, base, path);
  out->reserve(plan.size());
  FileSink sink(*out);
  plan.write(sink);
  // the file was sized for the plan: anything else would leave it corrupt, so never rename it
  const uint64_t written = sink.finish();
  QCONV_ASSERT(written == plan.size(), "{}: wrote {} bytes, expected {}", path, written, plan.size());
  if (data) data->finish(options.durable);
  out->finish(options.durable);
  return PendingWrite(std::move(out), std::move(data), dir, path, options.durable);
}

void writeModel(onnx::ModelProto& model, const std::string& path, const WriteOptions& options) {
  writeTemporary(model, path, options).commit();
}

}  // namespace qconv::io
