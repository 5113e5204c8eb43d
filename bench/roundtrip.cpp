// The benchmark floor: what any converter must at least do to read a model and write it again,
// and nothing more (no checks, no IR). bench/bench_convert.py measures qconv against it.
//
//   inline tensors:   mmap the model, parse it into a ModelProto, serialize it to OUT.
//   external tensors: the same for the model, and each tensor's bytes copied in the kernel
//                     (copy_file_range) from its data file to OUT.data at 4096-aligned offsets,
//                     as qconv writes them.
//
// Bench input only: locations are trusted, errors end the process with a bare exit code.
#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <onnx/onnx_pb.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "file_writer.h"

namespace {

std::string folderOf(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

/// Copy every external tensor's bytes into `out_data` and point the tensor at it.
bool copyExternal(onnx::ModelProto& model, const std::string& in_path, const std::string& out_path) {
  std::map<std::string, int> inputs;
  int out = -1;
  const std::string out_name = out_path.substr(out_path.find_last_of('/') + 1) + ".data";
  uint64_t end = 0;
  for (auto& t : *model.mutable_graph()->mutable_initializer()) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL) continue;
    std::string location;
    uint64_t offset = 0, length = 0;
    for (const auto& e : t.external_data()) {
      if (e.key() == "location") location = e.value();
      if (e.key() == "offset") offset = std::strtoull(e.value().c_str(), nullptr, 10);
      if (e.key() == "length") length = std::strtoull(e.value().c_str(), nullptr, 10);
    }
    int& in = inputs[location];
    if (in == 0) in = open((folderOf(in_path) + "/" + location).c_str(), O_RDONLY);
    if (out < 0) out = open((folderOf(out_path) + "/" + out_name).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0) return false;
    const uint64_t at = (end + 4095) / 4096 * 4096;
    loff_t src = static_cast<loff_t>(offset), dst = static_cast<loff_t>(at);
    for (uint64_t left = length; left > 0;) {
      const ssize_t n = copy_file_range(in, &src, out, &dst, left, 0);
      if (n <= 0) return false;
      left -= static_cast<uint64_t>(n);
    }
    end = at + length;
    t.clear_external_data();
    for (const auto& [k, v] : std::map<std::string, std::string>{
             {"location", out_name}, {"offset", std::to_string(at)}, {"length", std::to_string(length)}}) {
      auto* e = t.add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
  }
  for (const auto& [name, fd] : inputs) close(fd);
  return out < 0 || close(out) == 0;
}

/// One model: IN read and parsed, OUT written. 0, or the exit code of the failure.
int roundtrip(const char* in_path, const char* out_path) {
  int fd = open(in_path, O_RDONLY);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) return 3;
  void* data = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  if (data == MAP_FAILED) return 3;
  onnx::ModelProto model;
  google::protobuf::io::CodedInputStream in(static_cast<const uint8_t*>(data), static_cast<int>(st.st_size));
  if (!model.ParseFromCodedStream(&in)) return 3;
  munmap(data, static_cast<size_t>(st.st_size));
  close(fd);
  if (!copyExternal(model, in_path, out_path)) return 5;
  int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (out < 0) return 5;
  {
    qconv::bench::FileWriter file(out);  // 1 MiB writes (bench/file_writer.h: no qconv code)
    google::protobuf::io::CopyingOutputStreamAdaptor os(&file, qconv::bench::FileWriter::kBlock);
    if (!model.SerializeToZeroCopyStream(&os) || !os.Flush()) return 5;
  }
  return close(out) == 0 ? 0 : 5;
}

}  // namespace

/// IN OUT, or several pairs: the floor of a batch, in one process (bench/bench_batch.py).
int main(int argc, char** argv) {
  if (argc < 3 || argc % 2 != 1) {
    std::fprintf(stderr, "usage: qconv_roundtrip IN OUT [IN OUT ...]\n");
    return 2;
  }
  for (int i = 1; i + 1 < argc; i += 2)
    if (int code = roundtrip(argv[i], argv[i + 1])) return code;
  return 0;
}
