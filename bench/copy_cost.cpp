// What reading a model's weights costs beside copying them (issue 39): one process per way,
// timed whole by bench_floor.py --copy-cost, on the same file:
//   copy        copy_file_range of the file to OUT (what cp and qconv's writer do);
//   copy+read   the same, then every byte read into a 1 MiB buffer with pread (qconv today:
//               the saturation check reads each weight once besides the writer's copy);
//   read+write  pread 1 MiB, touch it, write it to OUT (a check done while the writer copies);
//   map         the file mapped, every byte read there, then written to OUT from the mapping
//               (qconv since: the check reads each weight in place, the writer writes the
//               pages it mapped).
// Usage: qconv_copy_cost WAY IN OUT. Exit 0, or 1 with a message.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

bool copyAll(int in, int out, size_t n) {
  loff_t from = 0, to = 0;
  while (static_cast<size_t>(from) < n) {
    const ssize_t r = copy_file_range(in, &from, out, &to, n - static_cast<size_t>(from), 0);
    if (r <= 0) return false;
  }
  return true;
}

/// Each byte read into `buf` with pread, one in 64 summed (so that the reads are not elided);
/// with `out`, each block written there too.
bool readAll(int in, int out, size_t n, std::vector<char>& buf, unsigned long& sum) {
  for (size_t at = 0; at < n;) {
    const ssize_t r = pread(in, buf.data(), buf.size(), static_cast<off_t>(at));
    if (r <= 0) return false;
    for (ssize_t i = 0; i < r; i += 64) sum += static_cast<unsigned char>(buf[static_cast<size_t>(i)]);
    if (out >= 0 && write(out, buf.data(), static_cast<size_t>(r)) != r) return false;
    at += static_cast<size_t>(r);
  }
  return true;
}

/// The file mapped, one byte in 64 summed, then all of it written to `out` from the mapping.
bool mapAll(int in, int out, size_t n, unsigned long& sum) {
  void* m = mmap(nullptr, n, PROT_READ, MAP_PRIVATE, in, 0);
  if (m == MAP_FAILED) return false;
  const auto* p = static_cast<const char*>(m);
  for (size_t i = 0; i < n; i += 64) sum += static_cast<unsigned char>(p[i]);
  for (size_t at = 0; at < n;) {
    const ssize_t w = write(out, p + at, n - at);
    if (w <= 0) return false;
    at += static_cast<size_t>(w);
  }
  return munmap(m, n) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: qconv_copy_cost copy|copy+read|read+write|map IN OUT\n");
    return 1;
  }
  const std::string way = argv[1];
  const int in = open(argv[2], O_RDONLY);
  struct stat st {};
  if (in < 0 || fstat(in, &st) != 0) {
    std::perror(argv[2]);
    return 1;
  }
  const int out = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (out < 0) {
    std::perror(argv[3]);
    return 1;
  }
  const auto n = static_cast<size_t>(st.st_size);
  std::vector<char> buf(size_t{1} << 20);
  unsigned long sum = 0;
  bool ok = false;
  if (way == "copy") ok = copyAll(in, out, n);
  else if (way == "copy+read") ok = copyAll(in, out, n) && readAll(in, -1, n, buf, sum);
  else if (way == "read+write") ok = readAll(in, out, n, buf, sum);
  else if (way == "map") ok = mapAll(in, out, n, sum);
  else std::fprintf(stderr, "qconv_copy_cost: unknown way %s\n", argv[1]);
  if (close(out) != 0) ok = false;
  std::printf("%lu\n", sum);  // the sum: what the reads computed
  return ok ? 0 : 1;
}
