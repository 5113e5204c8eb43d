#include <fcntl.h>
#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/stubs/common.h>
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <set>
#include <unordered_map>
#include <string>
#include <vector>

#include "qconv/diag.h"
#include "qconv/io/external_data.h"
#include "qconv/io/external_refs.h"
#include "qconv/io/mapped_file.h"
#include "qconv/io/model_io.h"
#include "qconv/io/op_schemas.h"
#include "qconv/io/release_behind.h"
#include "qconv/ir/tensor.h"

namespace qconv::io {

namespace {

/// Closes a file descriptor when it goes out of scope.
struct OpenFile {
  int fd = -1;
  ~OpenFile() {
    if (fd >= 0) close(fd);
  }
};

/// The model file mapped read-only (MappedFile: a file shortened meanwhile reads as zeros and
/// says so) and handed to protobuf in 8 MiB chunks; each chunk's pages leave this process's
/// memory when protobuf asks for the next one. The parse copies every tensor out of the mapping
/// once (no read() copy in between), and the mapping never holds more than two chunks: peak
/// memory is the parsed model plus 16 MiB, not twice the file.
class MappedChunks : public google::protobuf::io::ZeroCopyInputStream {
 public:
  static constexpr size_t kChunk = size_t{8} << 20;

  MappedChunks(int fd, size_t size) : map_(fd, size, true), size_(size) {}

  bool mapped() const { return map_.data() != nullptr; }
  bool faulted() const { return map_.faulted(); }

  bool Next(const void** data, int* size) override {
    release();
    if (pos_ >= size_) return false;
    const size_t n = std::min(kChunk, size_ - pos_);
    *data = map_.data() + pos_;
    *size = static_cast<int>(n);
    pos_ += n;
    return true;
  }
  void BackUp(int count) override { pos_ -= static_cast<size_t>(count); }
  bool Skip(int count) override {
    release();
    if (static_cast<size_t>(count) > size_ - pos_) {
      pos_ = size_;
      return false;
    }
    pos_ += static_cast<size_t>(count);
    return true;
  }
  int64_t ByteCount() const override { return static_cast<int64_t>(pos_); }

 private:
  /// Drop the pages before the current position (whole pages; the file stays in the page cache).
  void release() {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t upto = pos_ / page * page;
    if (upto > released_ + kChunk) {
      madvise(const_cast<char*>(map_.data()) + released_, upto - released_, MADV_DONTNEED);
      released_ = upto;
    }
  }

  MappedFile map_;
  size_t size_ = 0, pos_ = 0, released_ = 0;
};

/// Open the model file for reading, in the folder open as `dirfd` (AT_FDCWD: the path as it is):
/// a regular, non-empty file protobuf can hold. Throws Error(BadInput) naming the file.
void openInput(const std::string& path, OpenFile& f, size_t* size, int dirfd = AT_FDCWD, struct stat* id = nullptr) {
  // O_NONBLOCK: a FIFO would block open() until some writer came; it is refused below instead
  const std::string name = dirfd == AT_FDCWD ? path : splitPath(path).base;
  f.fd = openat(dirfd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f.fd < 0) throw Error(ExitCode::BadInput, fmt::format("{}: cannot open: {}", path, sysError()));
  struct stat st {};
  if (fstat(f.fd, &st) != 0) throw Error(ExitCode::BadInput, fmt::format("{}: cannot stat: {}", path, sysError()));
  if (!S_ISREG(st.st_mode))
    throw Error(ExitCode::BadInput, fmt::format("{}: not a regular file ({}); qconv reads models from regular files",
                                                path, fileKind(st.st_mode)));
  if (st.st_size == 0) throw Error(ExitCode::BadInput, fmt::format("{}: empty file, not an ONNX model", path));
  if (st.st_size > INT_MAX)
    throw Error(ExitCode::BadInput,
                fmt::format("{}: {} bytes is over protobuf's 2 GB message limit", path, st.st_size));
  *size = static_cast<size_t>(st.st_size);
  if (id) *id = st;
}

void requireModel(const onnx::ModelProto& model, const std::string& path) {
  if (!model.has_graph() || model.ir_version() <= 0)
    throw Error(ExitCode::BadInput, fmt::format("{}: not an ONNX model (no graph or no ir_version)", path));
}

/// Protobuf parses the whole file.
onnx::ModelProto parseWhole(int fd, size_t size, const std::string& path) {
  onnx::ModelProto model;
  MappedChunks file(fd, size);
  if (!file.mapped()) {
    if (errno == ENOMEM) throw std::bad_alloc();  // the address space is full: exit 6, as any allocation
    throw Error(ExitCode::BadInput, fmt::format("{}: cannot map: {}", path, sysError()));
  }
  bool parsed = false;
  {
    google::protobuf::io::CodedInputStream in(&file);
    in.SetRecursionLimit(kRecursionLimit);
    parsed = model.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
  }
  if (file.faulted()) throw changedWhileRead(path);
  if (!parsed)
    throw Error(ExitCode::BadInput, fmt::format("{}: not an ONNX model (protobuf parse failed: malformed, truncated, or nested deeper "
                                            "than {} levels)", path, kRecursionLimit));
  requireModel(model, path);
  return model;
}

}  // namespace

InputModel parseModel(std::string_view bytes, const std::string& name) {
  if (bytes.empty()) throw Error(ExitCode::BadInput, fmt::format("{}: no bytes, not an ONNX model", name));
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    throw Error(ExitCode::BadInput, fmt::format("{}: {} bytes is over protobuf's 2 GB message limit", name, bytes.size()));
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  const std::vector<std::string> locations = externalLocations(data, bytes.size());
  if (!locations.empty())
    throw Error(ExitCode::Usage,
                fmt::format("{}: a tensor keeps its data in the external file '{}', which a model given in memory cannot "
                            "reach: give the model's path instead (or load it with its external data)",
                            name, locations.front()));
  InputModel in;
  bool parsed = false;
  {
    google::protobuf::io::CodedInputStream stream(data, static_cast<int>(bytes.size()));
    stream.SetRecursionLimit(kRecursionLimit);
    parsed = in.proto.ParseFromCodedStream(&stream) && stream.ConsumedEntireMessage();
  }
  if (!parsed)
    throw Error(ExitCode::BadInput, fmt::format("{}: not an ONNX model (protobuf parse failed: malformed, truncated, or nested "
                                                "deeper than {} levels)", name, kRecursionLimit));
  requireModel(in.proto, name);
  return in;
}

onnx::ModelProto readModelFile(const std::string& path) {
  OpenFile f;
  size_t size = 0;
  openInput(path, f, &size);
  return parseWhole(f.fd, size, path);
}

InputModel openModel(const std::string& path, int folder) {
  // the model's folder, opened once: the model file and every data file it names are read
  // from this one folder, whatever its path names meanwhile (a folder swapped by a rename).
  // O_PATH: search permission is all it needs, as opening the model by its path did
  const int dirfd = folder >= 0 ? fcntl(folder, F_DUPFD_CLOEXEC, 0)
                                : open(splitPath(path).dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0)
    throw Error(ExitCode::BadInput, fmt::format("{}: cannot open: its folder cannot be opened: {}", path, sysError()));
  InputModel in;
  in.files = std::make_shared<ExternalFiles>(path);
  in.files->adoptFolder(dirfd);
  OpenFile f;
  size_t size = 0;
  struct stat st {};
  openInput(path, f, &size, dirfd, &st);
  in.files->setModelIdentity(static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino));
  bool walked = false;
  // A file within the views' window keeps its mapping: the passes and the writer read its
  // tensors through it, on the pages the walk mapped (mapping a file twice cost its page faults
  // twice, and the walk's unmapping besides). A larger one is walked through a mapping of its
  // own whose pages are dropped behind the walk, or the file would show in this process's memory.
  const bool keep = size <= ExternalFiles::kViewWindow;
  readInCold(f.fd, size);  // when externalLocations did not, as for a model the API reads
  auto map = std::make_unique<MappedFile>(f.fd, size);
  if (const auto* data = reinterpret_cast<const uint8_t*>(map->data())) {
    ReleaseBehind behind(data);
    walked = parseLeavingTensors(data, size, &in.proto, &in.spans, kSpliceThreshold, [&](size_t upto) {
      if (!keep) behind.done(upto);
    });
  }
  if (map->faulted()) throw changedWhileRead(path);
  if (!keep) map.reset();
  if (walked) requireModel(in.proto, path);
  else in.proto = parseWhole(f.fd, size, path);  // what protobuf rejects, and how, as ever
  if (!in.spans.empty()) {
    in.files->adoptModelFile(f.fd, std::move(map));
    f.fd = -1;
  }
  return in;
}

namespace {

/// What onnx::checker::check_model(model) does, with a context whose schemas are ours: ONNX
/// exports the model-level check only with a context of its own making (and libonnx's full
/// registry), so this makes the same checks around its exported check_graph and
/// check_model_local_functions. Throws onnx::checker::ValidationError.
void checkWithSchemas(const onnx::ModelProto& model, const OpSchemas& schemas) {
  using onnx::checker::ValidationError;
  if (!model.ir_version()) throw ValidationError("The model does not have an ir_version set properly.");
  if (model.ir_version() > onnx::IR_VERSION)
    throw ValidationError(fmt::format("Your model ir_version {} is higher than the checker's ({}).", model.ir_version(),
                                      static_cast<int>(onnx::IR_VERSION)));
  std::set<std::string> keys;
  for (const auto& entry : model.metadata_props())
    if (!keys.insert(entry.key()).second) throw ValidationError("Your model has duplicate keys in metadata_props.");
  onnx::checker::CheckerContext ctx;
  ctx.set_schema_registry(&schemas);
  ctx.set_ir_version(static_cast<int>(model.ir_version()));
  std::unordered_map<std::string, int> imports;
  for (const auto& o : model.opset_import()) {
    if (o.version() < 0 || o.version() > INT_MAX)
      throw ValidationError(fmt::format("opset_import version {} of domain '{}' is out of range", o.version(), o.domain()));
    imports[o.domain()] = static_cast<int>(o.version());
  }
  if (model.ir_version() >= 3 && imports.empty())
    throw ValidationError("model with IR version >= 3 must specify opset_import for ONNX");
  if (model.ir_version() < 3) {
    if (!imports.empty()) throw ValidationError("model with IR version < 3 cannot have opset_import specified");
    imports[""] = 1;
  }
  ctx.set_opset_imports(imports);
  onnx::checker::LexicalScopeContext scope;
  onnx::checker::check_graph(model.graph(), ctx, scope);
  if (model.ir_version() >= 8) onnx::checker::check_model_local_functions(model, ctx, scope);
}

/// While it lives, a file-backed or external tensor is shown to the checker as stored
/// externally at a location starting with '#', which the checker takes as not a file
/// (onnx/checker.cc, resolve_external_data_location): its bytes and their length were checked
/// on import (io::ExternalFiles), and the checker would otherwise resolve a relative location
/// against the working folder, or want a file-backed tensor's bytes in memory.
class CheckerStandIn {
 public:
  explicit CheckerStandIn(onnx::TensorProto& t)
      : t_(t), had_raw_(t.has_raw_data()), had_location_(t.has_data_location()), location_(t.data_location()) {
    if (had_raw_) t_.mutable_raw_data()->swap(raw_);
    t_.clear_raw_data();
    t_.mutable_external_data()->Swap(&external_);
    t_.set_data_location(onnx::TensorProto::EXTERNAL);
    auto* entry = t_.add_external_data();
    entry->set_key("location");
    entry->set_value("#qconv: checked on import");
  }
  ~CheckerStandIn() {
    if (had_raw_) t_.mutable_raw_data()->swap(raw_);  // has_raw_data() is part of the bytes written
    t_.mutable_external_data()->Swap(&external_);
    if (had_location_) t_.set_data_location(location_);
    else t_.clear_data_location();
  }
  CheckerStandIn(const CheckerStandIn&) = delete;
  CheckerStandIn& operator=(const CheckerStandIn&) = delete;

 private:
  onnx::TensorProto& t_;
  bool had_raw_;
  bool had_location_;
  onnx::TensorProto::DataLocation location_;
  std::string raw_;
  google::protobuf::RepeatedPtrField<onnx::StringStringEntryProto> external_;
};

}  // namespace

std::string checkModel(onnx::ModelProto& model, const FileBacked* file_backed, const OpSchemas* schemas) {
  std::vector<std::unique_ptr<CheckerStandIn>> standIns;
  for (auto& t : *model.mutable_graph()->mutable_initializer())
    if (findRange(file_backed, t) || t.data_location() == onnx::TensorProto::EXTERNAL)
      standIns.push_back(std::make_unique<CheckerStandIn>(t));
  std::unique_ptr<OpSchemas> own;
  if (!schemas) schemas = (own = std::make_unique<OpSchemas>()).get();
  try {
    checkWithSchemas(model, *schemas);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    for (auto& c : msg)
      if (c == '\n') c = ' ';
    return msg.empty() ? "rejected by the ONNX checker" : msg;
  }
  return {};
}

PathParts splitPath(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

int64_t minIrVersionForOpset(int64_t opset) {
  if (opset >= 25) return 13;
  if (opset >= 24) return 12;
  if (opset >= 23) return 11;
  if (opset >= 21) return 10;
  if (opset >= 19) return 9;
  if (opset >= 15) return 8;
  if (opset >= 13) return 7;
  if (opset >= 11) return 6;
  if (opset >= 10) return 5;
  return 3;
}

std::string builtWith() {
  const auto& ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  const auto ai_onnx = ranges.find("");
  const int p = GOOGLE_PROTOBUF_VERSION;  // e.g. 3021012
  return fmt::format("ONNX {} (IR version {}, ai.onnx opsets up to {}), protobuf {}.{}.{}", QCONV_ONNX_VERSION,
                     static_cast<int>(onnx::IR_VERSION), ai_onnx == ranges.end() ? 0 : ai_onnx->second.second,
                     p / 1000000, p / 1000 % 1000, p % 1000);
}

}  // namespace qconv::io
