// Where the bytes of file-backed tensors come from. The IR never opens or reads a file: a
// tensor whose bytes stay in a file (the input's external data, or a large initializer the
// reader left in the model file) is a TensorProto that says EXTERNAL and holds no bytes, plus a
// FileBytes handle on its Value. io implements ByteSource over the files it opened
// (io::ExternalFiles); the readers of ir/tensor.h go through it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace onnx {
class TensorProto;
}  // namespace onnx

namespace qconv::ir {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  /// Copy bytes [at, at + n) of span `span` into `out`. Throws Error(BadInput) naming the model
  /// file, the tensor and the file when they cannot be read: the input is at fault (exit 3).
  virtual void read(uint32_t span, uint64_t at, uint64_t n, char* out) const = 0;
  /// Bytes [at, at + n) of span `span` where they are, valid while the source lives; nullptr
  /// when this source cannot show them in place (read() them then, which also reports a file
  /// that is not what it was). Reading a tensor in place costs no copy, and the writer can
  /// write the very pages a pass read.
  virtual const char* view(uint32_t span, uint64_t at, uint64_t n) const {
    (void)span, (void)at, (void)n;
    return nullptr;
  }
  /// For a float32 tensor this source wrote itself (a ByteKeeper's: a repacked scale), the
  /// qconv::scaleFlaws of every value as it was written, once the write is done: verify output
  /// need not read back what was checked on its way out. nullopt for any other span.
  virtual std::optional<unsigned> writtenFloatFlaws(uint32_t span) const {
    (void)span;
    return std::nullopt;
  }
};

/// The bytes of a file-backed tensor: `length` bytes, span `span` of `source`.
struct FileBytes {
  const ByteSource* source = nullptr;
  uint32_t span = 0;
  uint64_t length = 0;
  explicit operator bool() const { return source != nullptr; }
};

/// Where a pass puts the bytes of a large tensor it made (a repacked weight), so that they leave
/// memory until the writer copies them into the output: io implements it with a temporary file.
class ByteKeeper {
 public:
  virtual ~ByteKeeper() = default;
  /// `t` (dims and type set, no data) becomes file-backed with `bytes` as its data. The bytes
  /// may still be on their way out when this returns (a pass goes on repacking the next
  /// tensor meanwhile); reading them through the ByteSource waits for them.
  virtual FileBytes keep(onnx::TensorProto& t, std::string bytes) = 0;
  /// keep() for a tensor of `length` bytes made in pieces, so that it is never whole in
  /// memory: `next` fills the string it is given with the next piece (any size above 0; in
  /// all, `length` bytes), and is called until they are all given.
  virtual FileBytes keepPieces(onnx::TensorProto& t, uint64_t length, const std::function<void(std::string&)>& next) = 0;
  /// `n` bytes of any value, in memory the keeper recycles (what keep() wrote, what recycle()
  /// gave back): repacking an LLM's weights one after another then maps no new pages for each.
  virtual std::string buffer(size_t n) = 0;
  /// Give back a buffer that is no longer needed.
  virtual void recycle(std::string bytes) = 0;
};

}  // namespace qconv::ir
