#include "qconv/io/external_data.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <charconv>
#include <cstring>
#include <initializer_list>
#include <limits>

#include "qconv/diag.h"
#include "qconv/io/model_io.h"
#include "qconv/quant.h"

namespace qconv::io {

namespace {

/// A decimal external_data value: digits only, no sign, fits in 63 bits.
bool parseDecimal(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return std::from_chars(s.data(), s.data() + s.size(), *out).ec == std::errc() &&
         *out <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

std::vector<std::string> components(const std::string& location) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= location.size()) {
    size_t slash = location.find('/', start);
    if (slash == std::string::npos) slash = location.size();
    std::string part = location.substr(start, slash - start);
    if (!part.empty() && part != ".") parts.push_back(std::move(part));
    start = slash + 1;
  }
  return parts;
}

}  // namespace

Error changedWhileRead(const std::string& path) {
  return Error(ExitCode::BadInput, fmt::format("{}: changed while it was read (it is shorter than when it was opened); "
                                               "nothing was written", path));
}

namespace {
// buffers held for reuse: a weight, its scales, and the next ones'; never more than kSpareBytes
// in all, so that a model's largest tensors do not stay in memory twice over
constexpr size_t kSpares = 4;
constexpr size_t kSpareBytes = size_t{96} << 20;
}  // namespace

ExternalFiles::ExternalFiles(std::string modelPath, uint64_t viewWindow)
    : viewWindow_(viewWindow), modelPath_(std::move(modelPath)) {
  spares_.reserve(kSpares);  // recycle() runs on the writer's thread: it never allocates there (a
                             // thread's first malloc maps an arena of 64 MiB of address space)
}

ExternalFiles::~ExternalFiles() {
  keeping_.reset();  // its jobs write to kept_.file
  for (auto& [_, fd] : fds_) close(fd);
  if (dirfd_ >= 0) close(dirfd_);
  if (modelFd_ >= 0) close(modelFd_);
}

ir::FileBytes ExternalFiles::keep(onnx::TensorProto& t, std::string bytes) {
  const uint64_t length = bytes.size();
  return keepIn(t, length, [&bytes](std::string& piece) { piece = std::move(bytes); }, false);
}

ir::FileBytes ExternalFiles::keepPieces(onnx::TensorProto& t, uint64_t length, const std::function<void(std::string&)>& next) {
  return keepIn(t, length, next, true);
}

ir::FileBytes ExternalFiles::keepIn(onnx::TensorProto& t, uint64_t length, const std::function<void(std::string&)>& next,
                                    bool streamed) {
  constexpr uint64_t kStreamedInFlight = uint64_t{4} << 20;
  if (!kept_.file) {
    if (keptOutput_.empty()) {
      const char* env = std::getenv("TMPDIR");
      const std::string tmp = env && *env ? env : "/tmp";
      const std::string what = fmt::format("{}: the temporary file of the tensors qconv makes", modelPath_);
      kept_.file = std::make_unique<TempFile>(Folder::open(tmp, what), "qconv-made-tensors", what);
    } else {
      const PathParts parts = splitPath(keptOutput_);
      kept_.file = std::make_unique<TempFile>(keptFolder_ ? keptFolder_ : Folder::open(parts.dir, keptOutput_),
                                              parts.base + ".data", keptOutput_ + "'s data file");
      kept_.beside_output = true;
    }
  }
  const uint64_t gap = kept_.end, offset = (gap + kExternalAlignment - 1) / kExternalAlignment * kExternalAlignment;
  kept_.file->reserve(offset, length);  // blocks allocated now: the writes cost less, and a full disk fails here
  kept_.end = offset + length;
  kept_.tensors += length;
  const ir::FileBytes made = addSpan(t, {{"offset", std::to_string(offset)}, {"length", std::to_string(length)}},
                                     kept_.file->fd(), offset, length, false,
                                     fmt::format("{}: tensor '{}' qconv made", modelPath_, t.name()));
  spans_.back().made = true;
  std::shared_ptr<std::atomic<unsigned>> flaws;  // a float tensor's: checked as it is written
  if (t.data_type() == onnx::TensorProto::FLOAT) spans_.back().flaws = flaws = std::make_shared<std::atomic<unsigned>>(0);
  if (!keeping_) keeping_ = std::make_unique<WriteQueue>(uint64_t{64} << 20);
  keeping_->push(0, [this, gap, offset] {
    static constexpr char kZeros[kExternalAlignment] = {};
    kept_.hash.add(kZeros, offset - gap);
  });
  for (uint64_t at = 0; at < length;) {  // the jobs run in order: the hash sees the bytes in file order
    std::string bytes;
    next(bytes);
    QCONV_ASSERT(!bytes.empty() && bytes.size() <= length - at, "{}: tensor '{}': a piece of {} bytes at {} of {}",
                 modelPath_, t.name(), bytes.size(), at, length);
    const uint64_t where = offset + at;
    at += bytes.size();
    // a streamed tensor is made as fast as it is written: 4 MiB in flight, not the queue's 64.
    // The buffer goes back to the spares on this thread, when the queue reaps the job.
    auto piece = std::make_shared<std::string>(std::move(bytes));
    keeping_->push(piece->size(), [this, piece, where, flaws] {
      // 256 KiB at a time, hashed (and a float tensor's values checked) and written while it is
      // in the cache: the bytes cross memory once
      constexpr size_t kPiece = size_t{256} << 10;
      const std::string& b = *piece;
      // a float tensor's values checked: whole values, where floats can be read
      const bool values = flaws && b.size() % 4 == 0 && where % 4 == 0 &&
                          reinterpret_cast<uintptr_t>(b.data()) % alignof(float) == 0;
      if (flaws && !values) flaws->fetch_or(kFlawsUnknown);
      for (size_t at = 0; at < b.size(); at += kPiece) {
        const size_t end = std::min(b.size(), at + kPiece);
        kept_.hash.add(b.data() + at, end - at);
        if (values)
          flaws->fetch_or(scaleFlaws(reinterpret_cast<const float*>(b.data() + at), (end - at) / 4), std::memory_order_relaxed);
        for (size_t done = at; done < end;) {
          const ssize_t w = pwrite(kept_.file->fd(), b.data() + done, end - done, static_cast<off_t>(where + done));
          if (w < 0 && errno == EINTR) continue;
          if (w <= 0) kept_.file->fail(fmt::format("cannot write: {}", w < 0 ? sysError() : "no space"));
          done += static_cast<size_t>(w);
        }
      }
    }, streamed ? kStreamedInFlight : 0, [this, piece] { recycle(std::move(*piece)); });
  }
  return made;
}

std::string ExternalFiles::buffer(size_t n) {
  if (keeping_) keeping_->collect();  // the buffers of the writes done go back to the spares
  std::string out;
  {
    std::lock_guard<std::mutex> lock(sparesMutex_);
    // The spare that costs least: one whose bytes already hold n (resize writes nothing), else one
    // with room for n (resize writes what it grows by), the smallest of either; else the largest
    // (it grows). Weights and their scales come in turns, and a weight's buffer handed out for
    // scales and back would otherwise write zeros over most of it for the next weight.
    auto rank = [n](const std::string& b) { return b.size() >= n ? 0 : b.capacity() >= n ? 1 : 2; };
    auto better = [&](const std::string& a, const std::string& b) {  // a before b
      if (rank(a) != rank(b)) return rank(a) < rank(b);
      return rank(a) < 2 ? a.capacity() < b.capacity() : a.capacity() > b.capacity();
    };
    // A spare more than twice as large as n is left for a larger request: handed out for n, it
    // would come back holding n bytes, and the next large request would write over the rest.
    auto best = spares_.end();
    for (auto it = spares_.begin(); it != spares_.end(); ++it)
      if (it->capacity() / 2 <= n && (best == spares_.end() || better(*it, *best))) best = it;
    if (best != spares_.end()) {
      out = std::move(*best);
      spares_.erase(best);
    }
  }
  out.resize(n);  // a spare's old bytes stay: only what it grows by is written
  return out;
}

void ExternalFiles::recycle(std::string bytes) {
  std::lock_guard<std::mutex> lock(sparesMutex_);
  size_t held = bytes.capacity();
  for (const auto& s : spares_) held += s.capacity();
  if (spares_.size() < kSpares && held <= kSpareBytes) spares_.push_back(std::move(bytes));
}

void ExternalFiles::awaitKept() const {
  if (keeping_) keeping_->wait();
}

void ExternalFiles::keepBeside(const std::string& output, std::shared_ptr<const Folder> folder) {
  QCONV_ASSERT(!kept_.file, "{}: keepBeside after keep", modelPath_);
  keptOutput_ = output;
  keptFolder_ = std::move(folder);
}

void ExternalFiles::adoptFolder(int dirfd) {
  QCONV_ASSERT(dirfd_ < 0, "{}: the model's folder adopted twice", modelPath_);
  dirfd_ = dirfd;
}

void ExternalFiles::checkUnchanged() const {
  awaitKept();
  std::map<int, const Span*> furthest;  // per file, the span that ends last: one fstat a file
  for (const Span& s : spans_) {
    if (s.made) continue;
    const Span*& f = furthest[s.fd];
    if (!f || s.offset + s.length > f->offset + f->length) f = &s;
    if (const auto m = maps_.find(s.fd); m != maps_.end() && m->second.file && m->second.file->faulted())
      throw changedWhileRead(s.what);
  }
  for (const auto& [fd, s] : furthest) {
    struct stat st {};
    if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < s->offset + s->length) throw changedWhileRead(s->what);
  }
}

void ExternalFiles::adoptModelFile(int fd, std::unique_ptr<MappedFile> map) {
  QCONV_ASSERT(modelFd_ < 0, "{}: the model file adopted twice", modelPath_);
  modelFd_ = fd;
  if (map && map->data()) {
    Mapping& m = maps_[fd];
    m.data = map->data();
    m.size = map->size();
    m.file = std::move(map);
  }
}

ir::FileBytes ExternalFiles::addSpan(onnx::TensorProto& t,
                                     std::initializer_list<std::pair<const char*, std::string>> entries, int fd,
                                     uint64_t offset, uint64_t length, bool data_file, std::string what) {
  QCONV_ASSERT(spans_.size() < UINT32_MAX, "{}: more file-backed tensors than spans", modelPath_);
  t.clear_raw_data();
  t.clear_external_data();
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  for (const auto& [k, v] : entries) {
    auto* e = t.add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  spans_.push_back({fd, offset, length, data_file, std::move(what), false, nullptr});
  return {this, static_cast<uint32_t>(spans_.size() - 1), length};
}

ir::FileBytes ExternalFiles::pointIntoModelFile(onnx::TensorProto& t, uint64_t offset, uint64_t length) {
  QCONV_ASSERT(modelFd_ >= 0, "{}: tensor '{}' points into a model file that is not open", modelPath_, t.name());
  return addSpan(t, {{"offset", std::to_string(offset)}, {"length", std::to_string(length)}}, modelFd_, offset, length,
                 false, fmt::format("{}: initializer '{}'", modelPath_, t.name()));
}

void ExternalFiles::read(uint32_t span, uint64_t at, uint64_t n, char* out) const {
  QCONV_ASSERT(span < spans_.size(), "{}: span {} of {}", modelPath_, span, spans_.size());
  const Span& s = spans_[span];
  if (s.made) awaitKept();  // the input's bytes are read while keep()'s go out
  QCONV_ASSERT(at <= s.length && n <= s.length - at, "{}: bytes [{}, {}) of a {}-byte tensor", s.what, at, at + n,
               s.length);
  for (uint64_t done = 0; done < n;) {
    const ssize_t r = pread(s.fd, out + done, n - done, static_cast<off_t>(s.offset + at + done));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) throw changedWhileRead(s.what);
    if (r < 0) throw Error(ExitCode::BadInput, fmt::format("{}: cannot read its bytes: {}", s.what, sysError()));
    done += static_cast<uint64_t>(r);
  }
}

const ExternalFiles::Mapping& ExternalFiles::mapping(int fd) const {
  auto [it, fresh] = maps_.try_emplace(fd);
  struct stat st {};
  if (fresh && fstat(fd, &st) == 0 && st.st_size > 0) {
    Mapping& m = it->second;
    m.file = std::make_unique<MappedFile>(fd, static_cast<size_t>(st.st_size));
    if (m.file->data()) {
      m.data = m.file->data();
      m.size = static_cast<uint64_t>(st.st_size);
    }
  }
  return it->second;
}

void ExternalFiles::letGo(uint32_t span, uint64_t upto) const {
  Held& h = held_[span];
  const Span& s = spans_[span];
  const Mapping& m = maps_.at(s.fd);
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  // whole pages: the span's last page too once all of it goes (a neighbour sharing a page with
  // it maps it again if it reads it), and only the pages before `upto` while it is being read
  const uint64_t begin = (s.offset + h.from) / page * page;
  const uint64_t end = upto == h.to ? std::min(m.size, (s.offset + upto + page - 1) / page * page)
                                    : (s.offset + upto) / page * page;
  if (end > begin) madvise(const_cast<char*>(m.data) + begin, end - begin, MADV_DONTNEED);
  heldBytes_ -= upto - h.from;
  h.from = upto;
  if (h.from == h.to) h = {};
}

std::optional<unsigned> ExternalFiles::writtenFloatFlaws(uint32_t span) const {
  QCONV_ASSERT(span < spans_.size(), "{}: span {} of {}", modelPath_, span, spans_.size());
  const Span& s = spans_[span];
  if (!s.made || !s.flaws) return std::nullopt;
  awaitKept();  // every write of it done (and its flaws or'ed in)
  const unsigned flaws = s.flaws->load();
  if (flaws & kFlawsUnknown) return std::nullopt;
  return flaws;
}

const char* ExternalFiles::view(uint32_t span, uint64_t at, uint64_t n) const {
  QCONV_ASSERT(span < spans_.size(), "{}: span {} of {}", modelPath_, span, spans_.size());
  const Span& s = spans_[span];
  QCONV_ASSERT(at <= s.length && n <= s.length - at, "{}: bytes [{}, {}) of a {}-byte tensor", s.what, at, at + n,
               s.length);
  if (s.made || n == 0) return nullptr;
  const Mapping& m = mapping(s.fd);
  // a file shortened since it was mapped would kill this process (SIGBUS) where read() says so
  struct stat st {};
  if (!m.data || s.offset > m.size || s.length > m.size - s.offset || fstat(s.fd, &st) != 0 ||
      static_cast<uint64_t>(st.st_size) < s.offset + s.length)
    return nullptr;
  if (held_.size() < spans_.size()) held_.resize(spans_.size());
  Held& h = held_[span];
  if (h.from == h.to) {
    h = {at, at + n};
    heldBytes_ += n;
    holding_.push_back(span);
  } else {
    const uint64_t from = std::min(h.from, at), to = std::max(h.to, at + n);
    heldBytes_ += (h.from - from) + (to - h.to);
    h = {from, to};
  }
  // Past the window: the other tensors' pages leave memory, oldest first, then this one's
  // behind where it is read.
  for (auto it = holding_.begin(); heldBytes_ > viewWindow_ && it != holding_.end();) {
    if (*it == span) {
      ++it;
      continue;
    }
    if (held_[*it].from != held_[*it].to) letGo(*it, held_[*it].to);
    it = holding_.erase(it);
  }
  if (heldBytes_ > viewWindow_ && h.from < at) letGo(span, at);
  return m.data + s.offset + at;
}

FileRange ExternalFiles::range(const ir::FileBytes& bytes) const {
  QCONV_ASSERT(bytes.source == this && bytes.span < spans_.size(), "{}: a span of another model", modelPath_);
  const Span& s = spans_[bytes.span];
  if (s.made) awaitKept();  // the range is read as a file's
  FileRange r{s.fd, s.offset, s.length, s.data_file, nullptr, &s.what};
  if (bytes.span < held_.size() && held_[bytes.span].from == 0 && held_[bytes.span].to == s.length && s.length)
    r.memory = maps_.at(s.fd).data + s.offset;  // mapped by a view: written from there
  return r;
}

void ExternalFiles::inlineBytes(onnx::TensorProto& t, const std::string& where) {
  std::string bytes = ir::loadBytes(resolve(t, where));
  t.clear_external_data();
  t.set_data_location(onnx::TensorProto::DEFAULT);
  t.set_raw_data(std::move(bytes));
}

int ExternalFiles::openBelowModelDir(const std::string& location, const std::string& where) {
  auto bad = [&](const std::string& what) {
    return Error(ExitCode::BadInput,
                 fmt::format("{}: {}: external data location '{}' {}", modelPath_, where, location, what));
  };
  if (location.empty()) throw bad("is empty");
  if (location.find('\0') != std::string::npos) throw bad("contains a NUL byte");
  if (location.front() == '/') throw bad("is an absolute path; it must be relative to the model's folder");
  const std::vector<std::string> parts = components(location);
  for (const auto& p : parts)
    if (p == "..") throw bad("contains '..'; it must stay inside the model's folder");
  if (parts.empty()) throw bad("names no file");

  if (dirfd_ < 0) {
    dirfd_ = open(splitPath(modelPath_).dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd_ < 0) throw bad(fmt::format("cannot be read: cannot open the model's folder: {}", sysError()));
  }
  // Walk down one component at a time, never following a symbolic link: nothing outside the
  // model's folder can be reached.
  int cur = dirfd_;
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool last = i + 1 == parts.size();
    const int flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | (last ? O_NONBLOCK : O_DIRECTORY);
    const int fd = openat(cur, parts[i].c_str(), flags);
    const int err = errno;
    if (cur != dirfd_) close(cur);
    if (fd < 0) {
      if (err == ELOOP || (err == ENOTDIR && !last)) throw bad("is or passes through a symbolic link (or not a folder)");
      throw bad(fmt::format("cannot be opened: {}", std::strerror(err)));
    }
    cur = fd;
  }
  struct stat st {};
  if (fstat(cur, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(cur);
    throw bad("is not a regular file");
  }
  if (st.st_nlink > 1) {
    close(cur);
    throw bad(fmt::format("has {} hard links; a data file must have one", st.st_nlink));
  }
  ids_.emplace_back(static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino));
  readInCold(cur, static_cast<uint64_t>(st.st_size));  // the run reads the tensors it holds
  return cur;
}

ir::FileBytes ExternalFiles::resolve(onnx::TensorProto& t, const std::string& where) {
  auto bad = [&](const std::string& what) {
    return Error(ExitCode::BadInput, fmt::format("{}: {}: external data {}", modelPath_, where, what));
  };
  std::string location;
  uint64_t offset = 0, length = 0;
  bool haveLocation = false, haveOffset = false, haveLength = false;
  for (const auto& e : t.external_data()) {
    const std::string& k = e.key();
    bool* seen = k == "location" ? &haveLocation : k == "offset" ? &haveOffset : k == "length" ? &haveLength : nullptr;
    if (!seen) continue;  // checksum and keys of other tools: not ours to interpret
    if (*seen) throw bad(fmt::format("lists the key '{}' twice", k));
    *seen = true;
    if (k == "location") location = e.value();
    else if (!parseDecimal(e.value(), k == "offset" ? &offset : &length))
      throw bad(fmt::format("{} '{}' is not a non-negative decimal number", k, e.value()));
  }
  if (!haveLocation) throw bad("has no location");
  if (!ir::byteWidth(t.data_type()) && !ir::dataBytes(t) && ir::numElements(t))
    throw bad(fmt::format("of type {} is not supported", ir::typeName(t.data_type())));
  const auto bytes = ir::dataBytes(t);
  if (!bytes || *bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw bad("belongs to a tensor with invalid or absurd dims");
  const uint64_t need = *bytes;
  if (haveLength && length != need)
    throw bad(fmt::format("length {} is not the {} bytes the tensor's type and dims need", length, need));

  auto it = fds_.find(location);
  if (it == fds_.end()) it = fds_.emplace(location, openBelowModelDir(location, where)).first;
  struct stat st {};
  if (fstat(it->second, &st) != 0) throw bad(fmt::format("file '{}' cannot be read: {}", location, sysError()));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (offset > size || need > size - offset)
    throw bad(fmt::format("range [{}, {}) lies outside '{}' ({} bytes)", offset, offset + need, location, size));

  return addSpan(t, {{"location", location}, {"offset", std::to_string(offset)}, {"length", std::to_string(need)}},
                 it->second, offset, need, true, fmt::format("{}: {} (bytes in '{}')", modelPath_, where, location));
}

}  // namespace qconv::io
