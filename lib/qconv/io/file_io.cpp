#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <onnx/checker.h>
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
    throw Error(ExitCode::BadInput, fmt::format("{}: not an ONNX model (protobuf parse failed)", path));
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

void writeModelAtomically(const onnx::ModelProto& model, const std::string& path) {
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty()) throw Error(ExitCode::Output, fmt::format("{}: output path names no file", path));
  std::string tmp = dir + "/." + base + ".qconv-XXXXXX";
  int fd = mkstemp(tmp.data());
  if (fd < 0) throw Error(ExitCode::Output, fmt::format("{}: cannot create a file in '{}': {}", path, dir, sysError()));
  auto fail = [&](const std::string& what) {
    close(fd);
    unlink(tmp.c_str());
    throw Error(ExitCode::Output, fmt::format("{}: {}", path, what));
  };
  {
    google::protobuf::io::FileOutputStream out(fd, 1 << 20);
    if (!model.SerializeToZeroCopyStream(&out) || !out.Flush())
      fail(fmt::format("cannot write: {}", out.GetErrno() ? std::strerror(out.GetErrno()) : "serialization failed"));
  }
  const mode_t mask = umask(0);
  umask(mask);
  if (fchmod(fd, 0666 & ~mask) != 0) fail(fmt::format("cannot set permissions: {}", sysError()));
  if (fsync(fd) != 0) fail(fmt::format("cannot sync: {}", sysError()));
  if (close(fd) != 0) {
    unlink(tmp.c_str());
    throw Error(ExitCode::Output, fmt::format("{}: cannot close: {}", path, sysError()));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = sysError();
    unlink(tmp.c_str());
    throw Error(ExitCode::Output, fmt::format("{}: cannot rename the temporary file into place: {}", path, err));
  }
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
