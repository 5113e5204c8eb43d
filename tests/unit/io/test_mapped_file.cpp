// io::MappedFile: a file shortened under a mapping reads as zeros and says so (never SIGBUS);
// a SIGBUS that is not ours goes to the handler that was there before; and when the last
// mapping goes, that handler is back, as it was.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "qconv/diag.h"
#include "qconv/io/external_data.h"
#include "qconv/io/mapped_file.h"

namespace fs = std::filesystem;
using qconv::io::MappedFile;

namespace {

struct TempPath {
  fs::path path;
  explicit TempPath(const std::string& name)
      : path(fs::temp_directory_path() / ("qconv-mapped-" + std::to_string(getpid()) + "-" + name)) {}
  ~TempPath() { fs::remove(path); }
};

/// A file of `bytes` bytes, each 0x5a.
void writeFile(const fs::path& path, size_t bytes) {
  std::ofstream(path, std::ios::binary) << std::string(bytes, '\x5a');
}

std::atomic<int> theirs{0};  // the test's own handler, as a host's (Python's faulthandler) would be
void theirHandler(int) { ++theirs; }

}  // namespace

TEST_CASE("a file shortened under a MappedFile reads as zeros past its end, and faulted() says so") {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  TempPath f("shrunk");
  writeFile(f.path, 8 * page);
  const int fd = open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  {
    const MappedFile map(fd, 8 * page);
    REQUIRE(map.data());
    REQUIRE(qconv::io::guardInstalled());
    REQUIRE(map.data()[5 * page] == '\x5a');  // read once: in this process's page tables
    REQUIRE_FALSE(map.faulted());
    fs::resize_file(f.path, 2 * page);  // what a deploy script's truncate does mid-read
    long sum = 0;
    for (size_t i = 0; i < 8 * page; i += 512) sum += map.data()[i];  // no SIGBUS
    REQUIRE(sum == 0x5a * static_cast<long>(2 * page / 512));  // the pages kept, then zeros
    REQUIRE(map.faulted());
  }
  close(fd);
  REQUIRE_FALSE(qconv::io::guardInstalled());
}

TEST_CASE("MappedFile chains a SIGBUS not its own to the handler before it, and puts that back") {
  struct sigaction mine {}, before {}, after {};
  mine.sa_handler = theirHandler;
  sigemptyset(&mine.sa_mask);
  REQUIRE(sigaction(SIGBUS, &mine, &before) == 0);
  TempPath f("chain");
  writeFile(f.path, 4096);
  const int fd = open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
  {
    const MappedFile map(fd, 4096);
    REQUIRE(qconv::io::guardInstalled());
    theirs = 0;
    raise(SIGBUS);  // a SIGBUS at no address of a mapping: the host's
    REQUIRE(theirs == 1);
    REQUIRE_FALSE(map.faulted());
  }
  close(fd);
  REQUIRE(sigaction(SIGBUS, nullptr, &after) == 0);
  REQUIRE(after.sa_handler == theirHandler);  // put back, as it was
  REQUIRE(sigaction(SIGBUS, &before, nullptr) == 0);
}

TEST_CASE("MappedFile from many threads at once: each mapping's fault is its own") {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::atomic<int> faulted{0}, clean{0};
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      TempPath f("thread-" + std::to_string(t));
      writeFile(f.path, 4 * page);
      const int fd = open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
      {
        const MappedFile map(fd, 4 * page);
        if (t % 2) fs::resize_file(f.path, page);  // the odd ones shrink
        long sum = 0;
        for (size_t i = 0; i < 4 * page; i += page) sum += map.data()[i];
        const bool shrunk = t % 2 == 1;
        if (shrunk && map.faulted() && sum == 0x5a) ++faulted;         // its first page, then zeros
        if (!shrunk && !map.faulted() && sum == 0x5a * 4) ++clean;     // another's fault is not its own
      }
      close(fd);
    });
  for (auto& t : threads) t.join();
  REQUIRE(faulted == kThreads / 2);
  REQUIRE(clean == kThreads / 2);
  REQUIRE_FALSE(qconv::io::guardInstalled());
}

TEST_CASE("ExternalFiles: a data file shortened after a view of it was read is reported before any commit") {
  const fs::path dir = fs::temp_directory_path() / ("qconv-mapped-view-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  writeFile(dir / "w.data", 4 * page);
  {
    qconv::io::ExternalFiles files((dir / "m.onnx").string());
    onnx::TensorProto t;
    t.set_name("w");
    t.set_data_type(onnx::TensorProto::INT8);
    t.add_dims(static_cast<int64_t>(4 * page));
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    auto* e = t.add_external_data();
    e->set_key("location");
    e->set_value("w.data");
    const qconv::ir::FileBytes bytes = files.resolve(t, "initializer 'w'");
    const char* v = files.view(bytes.span, 0, 4 * page);
    REQUIRE(v);
    REQUIRE(v[3 * page] == '\x5a');
    files.checkUnchanged();  // nothing changed yet
    fs::resize_file(dir / "w.data", page);
    REQUIRE(v[3 * page] == 0);  // zeros, no signal
    try {
      files.checkUnchanged();
      FAIL("a shortened data file passed");
    } catch (const qconv::Error& err) {
      REQUIRE(err.code() == qconv::ExitCode::BadInput);
      REQUIRE(std::string(err.what()) ==
              (dir / "m.onnx").string() + ": initializer 'w' (bytes in 'w.data'): changed while it was read (it is "
                                          "shorter than when it was opened); nothing was written");
    }
  }
  fs::remove_all(dir);
  REQUIRE_FALSE(qconv::io::guardInstalled());
}

namespace {
/// How many of the first `size` bytes' pages of `fd` are in the page cache (mincore).
size_t residentPages(int fd, size_t size) {
  const MappedFile map(fd, size);
  const bool mapped = map.data() != nullptr;  // (not the pointer: Catch would print it as a string)
  REQUIRE(mapped);
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in((size + page - 1) / page);
  REQUIRE(mincore(const_cast<char*>(map.data()), size, in.data()) == 0);
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}
}  // namespace

TEST_CASE("readInCold: a file out of the page cache is read in whole; a short or shortened one is no error") {
  const TempPath p("cold");
  constexpr size_t kSize = size_t{8} << 20;
  writeFile(p.path, kSize);
  const int fd = open(p.path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  const size_t pages = (kSize + static_cast<size_t>(sysconf(_SC_PAGESIZE)) - 1) / static_cast<size_t>(sysconf(_SC_PAGESIZE));
  REQUIRE(fdatasync(fd) == 0);  // clean pages leave the cache when dropped
  REQUIRE(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
  const size_t before = residentPages(fd, kSize);
  INFO("resident before: " << before << " of " << pages << " (a file system that keeps them, tmpfs, tests the rest)");
  qconv::io::readInCold(fd, kSize);
  CHECK(residentPages(fd, kSize) == pages);
  // a size past the file's end (shortened meanwhile): it reads what there is and returns
  qconv::io::readInCold(fd, kSize + (size_t{1} << 20));
  // under 4 MiB: left as it is, whatever the cache holds
  qconv::io::readInCold(fd, size_t{1} << 20);
  close(fd);
}
