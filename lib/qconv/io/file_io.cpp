#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string>

#include "qconv/diag.h"
#include "qconv/io/model_io.h"

namespace qconv::io {

namespace {

std::string sysError() { return std::strerror(errno); }

/// Closes a file descriptor and unmaps a mapping when it goes out of scope.
struct MappedFile {
  int fd = -1;
  void* data = MAP_FAILED;
  size_t size = 0;
  ~MappedFile() {
    if (data != MAP_FAILED) munmap(data, size);
    if (fd >= 0) close(fd);
  }
};

}  // namespace

onnx::ModelProto readModelFile(const std::string& path) {
  MappedFile f;
  f.fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) throw Error(ExitCode::BadInput, fmt::format("{}: cannot open: {}", path, sysError()));
  struct stat st {};
  if (fstat(f.fd, &st) != 0) throw Error(ExitCode::BadInput, fmt::format("{}: cannot stat: {}", path, sysError()));
  if (!S_ISREG(st.st_mode)) throw Error(ExitCode::BadInput, fmt::format("{}: not a regular file", path));
  if (st.st_size == 0) throw Error(ExitCode::BadInput, fmt::format("{}: empty file, not an ONNX model", path));
  if (st.st_size > INT_MAX)
    throw Error(ExitCode::BadInput,
                fmt::format("{}: {} bytes is over protobuf's 2 GB message limit", path, st.st_size));
  f.size = static_cast<size_t>(st.st_size);
  f.data = mmap(nullptr, f.size, PROT_READ, MAP_PRIVATE, f.fd, 0);
  if (f.data == MAP_FAILED) throw Error(ExitCode::BadInput, fmt::format("{}: cannot map: {}", path, sysError()));

  onnx::ModelProto model;
  google::protobuf::io::CodedInputStream in(static_cast<const uint8_t*>(f.data), static_cast<int>(f.size));
  in.SetRecursionLimit(256);
  if (!model.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
    throw Error(ExitCode::BadInput, fmt::format("{}: not an ONNX model (protobuf parse failed: malformed, truncated, or nested deeper "
                                            "than 256 levels)", path));
  if (!model.has_graph() || model.ir_version() <= 0)
    throw Error(ExitCode::BadInput,
                fmt::format("{}: not an ONNX model (no graph or no ir_version)", path));
  return model;
}

bool hasExternalData(const onnx::ModelProto& model) {
  for (const auto& t : model.graph().initializer())
    if (t.data_location() == onnx::TensorProto::EXTERNAL) return true;
  return false;
}

std::string checkModel(const onnx::ModelProto& model) {
  if (model.ir_version() > 8) return {};  // newer than Debian's checker (see docs/architecture.md)
  // external data is checked by io::ExternalFiles, more strictly than this checker would
  if (hasExternalData(model)) return {};
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    for (auto& c : msg)
      if (c == '\n') c = ' ';
    return msg.empty() ? "rejected by the ONNX checker" : msg;
  }
  return {};
}

void loadCheckerSchemas() {
  // the registry fills itself, once and thread-safely, on its first lookup
  (void)onnx::OpSchemaRegistry::Schema("Conv", 1, onnx::ONNX_DOMAIN);
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

}  // namespace qconv::io
