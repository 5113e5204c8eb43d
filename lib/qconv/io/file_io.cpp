#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
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

/// Closes a file descriptor when it goes out of scope.
struct OpenFile {
  int fd = -1;
  ~OpenFile() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

// Read through a 64 KiB buffer, not a mapping of the whole file: the parse takes as long
// either way, and a mapping would hold a second copy of every tensor in the process's memory
// until the parse ends (docs/benchmarks.md).
onnx::ModelProto readModelFile(const std::string& path) {
  OpenFile f;
  f.fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) throw Error(ExitCode::BadInput, fmt::format("{}: cannot open: {}", path, sysError()));
  struct stat st {};
  if (fstat(f.fd, &st) != 0) throw Error(ExitCode::BadInput, fmt::format("{}: cannot stat: {}", path, sysError()));
  if (!S_ISREG(st.st_mode)) throw Error(ExitCode::BadInput, fmt::format("{}: not a regular file", path));
  if (st.st_size == 0) throw Error(ExitCode::BadInput, fmt::format("{}: empty file, not an ONNX model", path));
  if (st.st_size > INT_MAX)
    throw Error(ExitCode::BadInput,
                fmt::format("{}: {} bytes is over protobuf's 2 GB message limit", path, st.st_size));

  onnx::ModelProto model;
  google::protobuf::io::FileInputStream file(f.fd, 1 << 16);
  bool parsed = false;
  {
    google::protobuf::io::CodedInputStream in(&file);
    in.SetRecursionLimit(256);
    parsed = model.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
  }
  if (file.GetErrno() != 0)
    throw Error(ExitCode::BadInput, fmt::format("{}: cannot read: {}", path, std::strerror(file.GetErrno())));
  if (!parsed)
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
