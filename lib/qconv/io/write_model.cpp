// The write stage: the model and its data file as temporaries beside the output (committed as
// a pair by output_pair.cpp).
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
#include "qconv/io/temp_file.h"
#include "qconv/io/content_hash.h"

namespace qconv::io {

namespace {

/// The most one system call writes or copies: a cancel (TempFile::counted) is seen between them.
constexpr uint64_t kPiece = uint64_t{64} << 20;

/// Write `size` bytes at `data` to `offset` of `out`; the bytes written. `mapped`: `data` is a
/// file's mapping (ExternalFiles::view), and a file shortened since stops the write short (the
/// kernel faults as EFAULT where a read in this process would be killed by SIGBUS).
uint64_t writeAll(const TempFile& out, const char* data, uint64_t size, uint64_t offset, bool mapped = false) {
  uint64_t done = 0;
  while (done < size) {
    const ssize_t w = pwrite(out.fd(), data + done, std::min(size - done, kPiece), static_cast<off_t>(offset + done));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EFAULT && mapped) break;
    if (w <= 0) out.fail(fmt::format("cannot write: {}", w < 0 ? sysError() : "no progress"));
    done += static_cast<uint64_t>(w);
    out.counted(static_cast<uint64_t>(w));
  }
  return done;
}

/// Read bytes [from, from + n) of input `in` into `to`, all of them: a read error, or an input
/// shorter than when it was read, fails `out` saying which.
void readInput(const TempFile& out, int in, uint64_t from, char* to, uint64_t n) {
  for (uint64_t got = 0; got < n;) {
    const ssize_t r = pread(in, to + got, n - got, static_cast<off_t>(from + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      out.fail(fmt::format("cannot copy tensor bytes from the input: {}",
                           r < 0 ? sysError() : "the input file is shorter than when it was read"));
    got += static_cast<uint64_t>(r);
  }
}

/// Copy [from, from + size) of `in` (an input data file, or the input model for bytes the reader
/// left there) to `offset` of `out`: from `mapped`, where a pass's view left those bytes mapped,
/// else (and for what a shortened file no longer has) in the kernel where it can, else through
/// a 1 MiB buffer, which says what is wrong. Never the whole tensor in memory.
void copyRange(int in, uint64_t from, uint64_t size, const TempFile& out, uint64_t offset,
               const char* mapped = nullptr) {
  const uint64_t written = mapped ? writeAll(out, mapped, size, offset, true) : 0;
  loff_t src = static_cast<loff_t>(from + written), dst = static_cast<loff_t>(offset + written);
  uint64_t left = size - written;
  while (left > 0) {
    const ssize_t n = copy_file_range(in, &src, out.fd(), &dst, std::min<uint64_t>(left, kPiece), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // not supported here (or the input is short): the loop below says which
    left -= static_cast<uint64_t>(n);
    out.counted(static_cast<uint64_t>(n));
  }
  std::string buffer;
  while (left > 0) {
    buffer.resize(std::min<uint64_t>(left, 1u << 20));
    readInput(out, in, static_cast<uint64_t>(src), buffer.data(), buffer.size());
    writeAll(out, buffer.data(), buffer.size(), static_cast<uint64_t>(dst));
    src += static_cast<loff_t>(buffer.size());
    dst += static_cast<loff_t>(buffer.size());
    left -= buffer.size();
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
/// (fd, from; or `memory`, where a view left it mapped), its raw_data (fd -1), or already
/// there (fd kInPlace: a taken KeptFile's).
struct Placement {
  onnx::TensorProto* tensor;
  int fd;
  uint64_t from, size, offset;
  const char* memory = nullptr;
};
constexpr int kInPlace = -2;

/// Write `p`'s bytes at its offset of `out` and add them to `hash`, a MiB at a time, each piece
/// hashed as the write left it in the cache: from memory (raw_data, or the pages a pass's view
/// left mapped), else read from its input file into `buffer`. A mapped file shortened since
/// stops the mapped write short; the rest is then read from the file, which says what is wrong
/// (the hash covers the bytes written, whatever happens).
void writeHashed(const TempFile& out, const Placement& p, ContentHash& hash, std::string& buffer) {
  constexpr uint64_t kHashPiece = uint64_t{1} << 20;
  const char* memory = p.fd < 0 ? p.tensor->raw_data().data() : p.memory;
  for (uint64_t done = 0; done < p.size;) {
    const uint64_t n = std::min(kHashPiece, p.size - done);
    if (memory) {
      const uint64_t w = writeAll(out, memory + done, n, p.offset + done, p.fd >= 0);
      hash.add(memory + done, w);
      done += w;
      if (w < n) memory = nullptr;  // the rest from the file
      continue;
    }
    buffer.resize(n);
    readInput(out, p.fd, p.from + done, buffer.data(), n);
    writeAll(out, buffer.data(), n, p.offset + done);
    hash.add(buffer.data(), n);
    done += n;
  }
}

/// Whether `kept` can become the data file: made beside this output, and every tensor in it is
/// one of the model's (else its dead bytes would be in the output).
bool takesKept(onnx::ModelProto& model, const FileBacked* file_backed, const KeptFile* kept) {
  if (!kept || !kept->file || !kept->beside_output) return false;
  uint64_t live = 0;
  for (auto& t : *model.mutable_graph()->mutable_initializer())
    if (const FileRange* r = findRange(file_backed, t); r && r->fd == kept->file->fd()) live += r->length;
  return live == kept->tensors;
}

/// Lay out every tensor of at least kExternalThreshold bytes (a resolved external one, or
/// raw_data), each at the next kExternalAlignment boundary: after `taken`'s tensors, which stay
/// where they are, when it is taken.
std::vector<Placement> layout(onnx::ModelProto& model, const FileBacked* file_backed, const KeptFile* taken) {
  std::vector<Placement> plan;
  uint64_t end = taken ? taken->end : 0;
  for (auto& t : *model.mutable_graph()->mutable_initializer()) {
    Placement p{&t, -1, 0, 0, 0};
    if (const FileRange* r = findRange(file_backed, t)) {
      if (taken && r->fd == taken->file->fd()) {
        plan.push_back({&t, kInPlace, r->offset, r->length, r->offset});
        continue;
      }
      p.fd = r->fd;
      p.from = r->offset;
      p.size = r->length;
      p.memory = r->memory;
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

/// Every tensor of at least kExternalThreshold bytes into the data file, named by its content
/// (dataFileName) once written; null if none went. The file is `kept`'s when takesKept, else new.
std::unique_ptr<TempFile> externalize(onnx::ModelProto& model, const FileBacked* file_backed,
                                      const std::shared_ptr<const Folder>& folder, const std::string& dir,
                                      const std::string& base, const std::string& path, KeptFile* kept,
                                      std::atomic<uint64_t>* written, std::atomic<uint64_t>* to_write,
                                      const std::atomic<bool>* cancel) {
  KeptFile* taken = takesKept(model, file_backed, kept) ? kept : nullptr;
  const std::vector<Placement> plan = layout(model, file_backed, taken);
  if (plan.empty()) return nullptr;
  std::unique_ptr<TempFile> data =
      taken ? std::move(taken->file) : std::make_unique<TempFile>(folder, base + ".data", path + "'s data file");
  uint64_t size = 0;
  for (const Placement& p : plan) size = std::max(size, p.offset + p.size);
  data->reserve(size);
  data->countInto(written, cancel);
  if (to_write) *to_write += size - (taken ? taken->end : 0);
  // Each tensor written and hashed a piece at a time, the file's bytes in order with the gaps as
  // the zeros they read as (the taken file's were hashed as they were kept): each piece is
  // hashed while the write's source is still in the cache. A tensor in an input file is read
  // into a buffer for it: read, hashed and written, its bytes cross memory once, where a copy
  // in the kernel and a read back for the hash crossed it twice.
  ContentHash hash = taken ? taken->hash : ContentHash();
  uint64_t hashed = taken ? taken->end : 0;
  static constexpr char kZeros[kExternalAlignment] = {};
  std::string buffer;
  for (const Placement& p : plan) {
    if (p.fd == kInPlace) continue;
    QCONV_ASSERT(p.offset >= hashed, "externalize: tensor at {} before {}", p.offset, hashed);
    for (; hashed < p.offset; hashed += std::min<uint64_t>(kExternalAlignment, p.offset - hashed))
      hash.add(kZeros, std::min<uint64_t>(kExternalAlignment, p.offset - hashed));
    writeHashed(*data, p, hash, buffer);
    hashed = p.offset + p.size;
  }
  const std::string name = dataFileName(base, hash.value());
  data->retarget(dir + "/" + name);
  for (const Placement& p : plan) setExternal(*p.tensor, name, p.offset, p.size);
  return data;
}

/// Serialized pieces into a temporary file: bytes through a 1 MiB buffer, file ranges copied in
/// the kernel (copyRange; from their mapping where a view left them mapped), each at the
/// position the pieces before it end.
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
  void mappedRange(const char* memory, int fd, uint64_t from, uint64_t size) override {
    flush();
    copyRange(fd, from, size, out_, written_, memory);
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

/// Serialized pieces into a string, file ranges read with pread.
class StringSink : public SpliceSink {
 public:
  explicit StringSink(std::string& out, const std::string& name) : out_(out), name_(name) {}
  void bytes(const char* data, size_t size) override { out_.append(data, size); }
  void fileRange(int fd, uint64_t from, uint64_t size) override {
    const size_t start = out_.size();
    out_.resize(start + size);
    for (uint64_t done = 0; done < size;) {
      const ssize_t n = pread(fd, out_.data() + start + done, size - done, static_cast<off_t>(from + done));
      if (n < 0 && errno == EINTR) continue;
      if (n == 0) throw changedWhileRead(fmt::format("{}: a tensor's file", name_));
      if (n < 0)
        throw Error(ExitCode::BadInput, fmt::format("{}: cannot read a tensor's bytes back from its file: {}", name_,
                                                    sysError()));
      done += static_cast<uint64_t>(n);
    }
  }

 private:
  std::string& out_;
  const std::string& name_;
};

/// Refuse when `name` in `folder` is a file the run reads (an output never replaces an input).
void refuseProtected(const Folder& folder, const std::string& name, const std::string& path, const WriteOptions& options) {
  struct stat st {};
  if (fstatat(folder.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && options.protects(st.st_dev, st.st_ino))
    throw Error(ExitCode::Usage,
                fmt::format("{}: this file is the input or holds its external data; qconv never modifies its input", path));
}

}  // namespace

void writeTextFile(const std::string& path, const std::string& text, std::shared_ptr<const Folder> folder) {
  const PathParts parts = splitPath(path);
  if (!parts.namesFile()) throw Error(ExitCode::Output, fmt::format("{}: the path names no file", path));
  if (!folder) folder = Folder::open(parts.dir, path);
  TempFile out(folder, parts.base, path);
  writeAll(out, text.data(), text.size(), 0);
  out.finish(false);
  FolderLock lock(*folder);  // its temporary gets a name only under the lock (output_pair.cpp)
  out.commit();
}

PendingWrite writeTemporary(onnx::ModelProto& model, const std::string& path, const WriteOptions& options) {
  const PathParts parts = splitPath(path);
  if (!parts.namesFile()) throw Error(ExitCode::Output, fmt::format("{}: output path names no file", path));
  const std::string& dir = parts.dir;
  const std::string& base = parts.base;
  const std::shared_ptr<const Folder> folder = options.folder ? options.folder : Folder::open(dir, path);
  refuseProtected(*folder, base, path, options);

  std::unique_ptr<TempFile> data;
  if (options.external_data) {
    data = externalize(model, options.file_backed, folder, dir, base, path, options.kept, options.written, options.to_write,
                       options.cancel);
    if (data) refuseProtected(*folder, splitPath(data->target()).base, data->target(), options);
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

  auto out = std::make_unique<TempFile>(folder, base, path);
  out->reserve(plan.size());
  out->countInto(options.written, options.cancel);
  if (options.to_write) *options.to_write += plan.size();
  FileSink sink(*out);
  plan.write(sink);
  // the file was sized for the plan: anything else would leave it corrupt, so never rename it
  const uint64_t written = sink.finish();
  QCONV_ASSERT(written == plan.size(), "{}: wrote {} bytes, expected {}", path, written, plan.size());
  if (data) data->finish(options.durable);
  out->finish(options.durable);
  return PendingWrite(std::move(out), std::move(data), folder, path, options);
}

std::string serializeModel(onnx::ModelProto& model, const FileBacked* file_backed, const std::string& name) {
  const InlineModel plan(model, kSpliceThreshold, file_backed);
  if (plan.size() > static_cast<uint64_t>(INT_MAX))
    throw Error(ExitCode::Unsupported,
                fmt::format("{}: the converted model would be {} bytes, over protobuf's 2 GB limit for a model held in "
                            "memory; give an output path (qconv then writes its large tensors to a data file beside it)",
                            name, plan.size()));
  std::string out;
  out.reserve(plan.size());
  StringSink sink(out, name);
  plan.write(sink);
  QCONV_ASSERT(out.size() == plan.size(), "{}: serialized {} bytes, expected {}", name, out.size(), plan.size());
  return out;
}

void writeModel(onnx::ModelProto& model, const std::string& path, const WriteOptions& options) {
  writeTemporary(model, path, options).commit();
}

}  // namespace qconv::io
