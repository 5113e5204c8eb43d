#include "qconv/io/external_refs.h"
#include "qconv/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string_view>

#include "qconv/io/release_behind.h"
#include "qconv/io/wire.h"

namespace qconv::io {

namespace {

/// The messages on a path to a TensorProto, and the fields that lead from each to the next
/// (onnx.proto field numbers).
enum class Kind { Model, Training, Graph, Node, Function, Attribute, Sparse, Tensor, Entry, None };

/// The message field `field` of a `from` leads to (onnx.proto's numbers), or None.
Kind child(Kind from, uint32_t field) {
  switch (from) {
    case Kind::Model:
      return field == 7 ? Kind::Graph : field == 20 ? Kind::Training : field == 25 ? Kind::Function : Kind::None;
    case Kind::Training:
      return field == 1 || field == 2 ? Kind::Graph : Kind::None;
    case Kind::Graph:
      return field == 1 ? Kind::Node : field == 5 ? Kind::Tensor : field == 15 ? Kind::Sparse : Kind::None;
    case Kind::Node:
      return field == 5 ? Kind::Attribute : Kind::None;
    case Kind::Function:
      return field == 7 ? Kind::Node : field == 11 ? Kind::Attribute : Kind::None;
    case Kind::Attribute:
      return field == 5 || field == 10 ? Kind::Tensor : field == 6 || field == 11 ? Kind::Graph
             : field == 22 || field == 23 ? Kind::Sparse : Kind::None;
    case Kind::Sparse:
      return field == 1 || field == 2 ? Kind::Tensor : Kind::None;
    case Kind::Tensor:
      return field == 13 ? Kind::Entry : Kind::None;
    case Kind::Entry:
    case Kind::None:
      break;
  }
  return Kind::None;
}

constexpr int kMaxDepth = 512;  // past the parser's recursion limit (256, file_io.cpp): never shallower than what it accepts
constexpr size_t kReadWhole = size_t{256} << 10;  // a model file this small is read, not mapped

struct Walk {
  const uint8_t* data;
  std::vector<std::string> found;
  /// For a mapped file: the pages behind the walk, which only ever reads forward.
  ReleaseBehind* behind = nullptr;

  void done(size_t upto) {
    if (behind) behind->done(upto);
  }

  void add(std::string_view location) {
    if (std::find(found.begin(), found.end(), location) == found.end()) found.emplace_back(location);
  }

  /// An external_data entry [begin, end): key 1, value 2.
  void entry(size_t begin, size_t end) {
    std::string_view key, value;
    wire::Field f;
    for (size_t pos = begin; pos < end && wire::readField(data, end, pos, &f); pos = f.end) {
      if (f.type != wire::kLen) continue;
      const std::string_view text(reinterpret_cast<const char*>(data) + f.payload, f.end - f.payload);
      if (f.number == 1) key = text;
      if (f.number == 2) value = text;
    }
    if (key == "location") add(value);
  }

  void message(Kind kind, size_t begin, size_t end, int depth) {
    if (depth > kMaxDepth) return;
    wire::Field f;
    for (size_t pos = begin; pos < end && wire::readField(data, end, pos, &f); pos = f.end) {
      if (f.type != wire::kLen) continue;
      const Kind next = child(kind, f.number);
      if (next == Kind::Entry) entry(f.payload, f.end);
      else if (next != Kind::None) message(next, f.payload, f.end, depth + 1);
      done(f.end);
    }
  }
};

std::vector<std::string> walkModel(const uint8_t* data, size_t size, ReleaseBehind* behind) {
  Walk walk{data, {}, behind};
  walk.message(Kind::Model, 0, size, 0);
  return std::move(walk.found);
}

/// What the model file open as `fd` names (closed here). `whole`: the run reads all of it (an
/// input), so a file out of the page cache is read in whole first (readInCold).
std::vector<std::string> locationsOf(int fd, bool whole) {
  std::vector<std::string> found;
  struct stat st {};
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    const auto size = static_cast<size_t>(st.st_size);
    if (whole) readInCold(fd, size);
    if (size <= kReadWhole) {  // one read costs less than a mapping's set-up, faults and tear-down
      std::string bytes(size, '\0');
      if (pread(fd, bytes.data(), size, 0) == static_cast<ssize_t>(size))
        found = walkModel(reinterpret_cast<const uint8_t*>(bytes.data()), size, nullptr);
    } else if (const MappedFile map(fd, size); map.data()) {
      // a file shortened meanwhile reads as zeros past its end: what it names then is of no
      // use, and the reader, which maps it again, says it changed
      ReleaseBehind behind(map.data());
      found = walkModel(reinterpret_cast<const uint8_t*>(map.data()), size, &behind);
    }
  }
  close(fd);
  return found;
}

}  // namespace

std::vector<std::string> externalLocations(const uint8_t* data, size_t size) { return walkModel(data, size, nullptr); }

std::vector<std::string> externalLocations(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  return fd < 0 ? std::vector<std::string>{} : locationsOf(fd, true);
}

std::vector<std::string> externalLocationsAt(int dirfd, const std::string& name) {
  const int fd = openat(dirfd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  return fd < 0 ? std::vector<std::string>{} : locationsOf(fd, false);
}


}  // namespace qconv::io
