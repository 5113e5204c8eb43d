// The benchmark floor: mmap a model, parse it into a ModelProto, serialize it to a file.
// What any converter must at least do; qconv is measured against it (bench/bench_convert.py).
#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <onnx/onnx_pb.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: qconv_roundtrip IN OUT\n");
    return 2;
  }
  int fd = open(argv[1], O_RDONLY);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) return 3;
  void* data = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  if (data == MAP_FAILED) return 3;
  onnx::ModelProto model;
  google::protobuf::io::CodedInputStream in(static_cast<const uint8_t*>(data), static_cast<int>(st.st_size));
  if (!model.ParseFromCodedStream(&in)) return 3;
  munmap(data, static_cast<size_t>(st.st_size));
  close(fd);
  int out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (out < 0) return 5;
  google::protobuf::io::FileOutputStream os(out, 1 << 20);
  if (!model.SerializeToZeroCopyStream(&os) || !os.Flush()) return 5;
  os.Close();
  return 0;
}
