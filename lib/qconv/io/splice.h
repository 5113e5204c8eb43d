// Large tensor bytes are never copied through protobuf: the reader leaves them in the input
// file, and the writer splices them back into protobuf's own serialization of everything else.
//
// Read (parseLeavingTensors):
//   model file:  ModelProto{ ..., graph{ ..., initializer{ dims, data_type, name, raw_data: 1 MB } } }
//   result:      the same ModelProto, parsed by protobuf, with that raw_data left unset, and a
//                TensorSpan saying where its bytes are in the file
// Write (InlineModel):
//   skeleton:    protobuf serializes the model with each large initializer's raw_data empty
//   output:      the skeleton, each such raw_data field given its bytes (copied in the kernel
//                from a file or from where a pass's view left them mapped, or from memory)
//                and each enclosing length rewritten
//
// Conditions for a tensor to stay in the file (otherwise protobuf reads it as usual):
//   1. it is a main-graph initializer whose raw_data holds at least kSpliceThreshold bytes;
//   2. it is an ordinary inline tensor: no data_location EXTERNAL, no external_data entries,
//      no typed value field (float_data, int32_data, ...) beside raw_data;
//   3. its type has a fixed width and its dims need exactly that many bytes.
// And for the file as a whole: its top-level structure is one this walker follows (no groups,
// nothing malformed). Anything else is parsed by protobuf whole, so that what protobuf rejects,
// and how, is unchanged.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qconv/io/external_data.h"

namespace qconv::io {

/// How deep protobuf may nest messages when it parses a model (its default, 100, is too few
/// for models with nested subgraphs).
inline constexpr int kRecursionLimit = 256;

/// Initializer bytes of at least this size stay in the input file when it is read.
inline constexpr uint64_t kSpliceThreshold = uint64_t{64} << 10;

/// An initializer the reader left in the file: graph().initializer(index) holds every field
/// but raw_data, which is [offset, offset + length) of the file.
struct TensorSpan {
  int index;
  uint64_t offset, length;
};

/// Parse the serialized model data[0, size) into *model, leaving the bytes of initializers of
/// at least `threshold` bytes in place (the conditions above), listed in *spans in initializer
/// order. Returns false, with
/// *model and *spans cleared, when the data is not something this walker follows: the caller
/// then parses it with protobuf whole. The result otherwise equals protobuf's parse, the
/// spans' raw_data aside.
/// `consumed`, when given, is told as the walk goes on that it will not read data[0, upto) again
/// (a caller holding the file mapped can drop those pages).
bool parseLeavingTensors(const uint8_t* data, size_t size, onnx::ModelProto* model, std::vector<TensorSpan>* spans,
                         uint64_t threshold = kSpliceThreshold,
                         const std::function<void(size_t upto)>& consumed = nullptr);

/// While it lives, `t` holds `raw` as its raw_data and is put back as it was when it dies: a
/// file-backed tensor (data_location EXTERNAL) is shown as the inline tensor it is written as (no
/// data_location, no external_data), an inline one has its own bytes set aside. The writer
/// serializes tensors so emptied; the checker is shown a stand-in byte (io::checkModel).
class RawDataStandIn {
 public:
  RawDataStandIn(onnx::TensorProto& t, std::string raw);
  ~RawDataStandIn();
  RawDataStandIn(const RawDataStandIn&) = delete;
  RawDataStandIn& operator=(const RawDataStandIn&) = delete;

 private:
  onnx::TensorProto& t_;
  bool file_backed_;
  std::string raw_;  // an inline tensor's own bytes
  google::protobuf::RepeatedPtrField<onnx::StringStringEntryProto> external_;  // a file-backed one's
};

/// Where serialized bytes go.
class SpliceSink {
 public:
  virtual ~SpliceSink() = default;
  virtual void bytes(const char* data, size_t size) = 0;
  /// [from, from + size) of the open file `fd`.
  virtual void fileRange(int fd, uint64_t from, uint64_t size) = 0;
  /// The same range, mapped at `memory` (ExternalFiles::view): a sink that copies in the kernel
  /// writes from there, where a file shortened since faults as an error, not a signal.
  virtual void mappedRange(const char* memory, int fd, uint64_t from, uint64_t size) {
    (void)memory;
    fileRange(fd, from, size);
  }
};

/// A model as it will be written with every tensor inline: protobuf's serialization of it, each
/// graph initializer that is file-backed (listed in `file_backed`) or holds at least `threshold`
/// bytes of raw_data spliced in rather than serialized. A file-backed tensor
/// is written without data_location (DEFAULT) and external_data, as protobuf would write it
/// once its bytes were loaded. The model is unchanged when the constructor returns, and must
/// stay so (and its files open) until write() has run.
class InlineModel {
 public:
  explicit InlineModel(onnx::ModelProto& model, uint64_t threshold = kSpliceThreshold,
                       const FileBacked* file_backed = nullptr);
  /// Bytes the model takes.
  uint64_t size() const { return size_; }
  /// Whether bytes come from an external data file (the model named a location for them).
  bool readsDataFiles() const { return reads_data_files_; }
  void write(SpliceSink& sink) const;

 private:
  struct Piece {
    enum Kind { kSkeleton, kLiteral, kMemory, kFile, kMapped } kind;
    uint64_t begin, size;  // skeleton or literal offset, or the file offset; and the length
    const char* memory;    // kMemory, kMapped
    int fd;                // kFile, kMapped
  };
  std::string skeleton_, literals_;
  std::vector<Piece> pieces_;
  uint64_t size_ = 0;
  bool reads_data_files_ = false;
};

}  // namespace qconv::io
