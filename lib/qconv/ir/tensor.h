// Reading and making the constant tensors that quantization parameters and weights live in.
// Readers never trust the model: a size mismatch or an unsupported storage gives a reason,
// not a crash.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "qconv/ir/byte_source.h"

namespace qconv::ir {

class Value;

/// Element count from dims; nullopt when a dim is negative or the product overflows.
std::optional<int64_t> numElements(const onnx::TensorProto& t);

/// FLOAT values of the initializer of `v`, inline or file-backed; nullopt (with *why set) for
/// another type or malformed storage. A file that cannot be read throws Error(BadInput) naming
/// it (ByteSource::read): an I/O failure is never a refusal.
std::optional<std::vector<float>> readFloats(const Value& v, std::string* why);
/// Integer values (INT8, UINT8, INT16, UINT16, INT32, INT64, and the packed INT4, UINT4, INT2,
/// UINT2) of the initializer of `v`; nullopt otherwise. Same rules.
std::optional<std::vector<int64_t>> readInts(const Value& v, std::string* why);
/// The same for an inline tensor (a Constant's value, a tensor a pass made). A file-backed
/// tensor's bytes are not in its proto: it gives nullopt, read it through its value.
std::optional<std::vector<float>> readFloats(const onnx::TensorProto& t, std::string* why);
std::optional<std::vector<int64_t>> readInts(const onnx::TensorProto& t, std::string* why);
/// FLOAT16 or BFLOAT16 values of the initializer of `v`, widened to float (exactly: every such
/// value is a float); nullopt otherwise, with *why.
std::optional<std::vector<float>> readHalfAsFloats(const Value& v, std::string* why);
/// FLOAT values of the initializer of `v`, or FLOAT16/BFLOAT16 ones widened (readHalfAsFloats):
/// a scale of any of the types Q/DQ take.
std::optional<std::vector<float>> readWidenedFloats(const Value& v, std::string* why);

/// FLOAT8E8M0 values (2^(e - 127), 255 = NaN: the MX scales of opset 24) as floats.
std::optional<std::vector<float>> readE8M0AsFloats(const Value& v, std::string* why);
std::unique_ptr<onnx::TensorProto> makeFloatTensor(const std::vector<int64_t>& dims,
                                                   const std::vector<float>& values);
/// Integer tensor of `data_type`, values assumed in range (QCONV_ASSERT otherwise).
std::unique_ptr<onnx::TensorProto> makeIntTensor(int32_t data_type, const std::vector<int64_t>& dims,
                                                 const std::vector<int64_t>& values);

const char* typeName(int32_t data_type);
bool isIntegerType(int32_t data_type);
/// Bits per element of a packed integer type (4: INT4, UINT4; 2: INT2, UINT2), else 0.
int packedBits(int32_t data_type);
/// float8 (the four kinds) or float4e2m1: the float types a Q/DQ quantizes to.
bool isFloatQuantType(int32_t data_type);
/// A type QuantizeLinear writes or DequantizeLinear reads (any opset up to 25): 8-, 16-, 4- and
/// 2-bit integers, int32 (DequantizeLinear), float8 and float4e2m1.
bool isQuantizedType(int32_t data_type);
/// Representable range of an integer type.
std::pair<int64_t, int64_t> intRange(int32_t data_type);
/// int8 or uint8: the element types QLinearConv and QLinearMatMul take.
bool isInt8Like(int32_t data_type);

std::vector<int64_t> dimsOf(const onnx::TensorProto& t);

/// The dims of `v` when known in full: its initializer's, else the ones its declared type gives
/// when every one is a number; nullopt otherwise.
std::optional<std::vector<int64_t>> knownDims(const Value& v);

/// The element type of `v`: its initializer's when it has one, else the type the IR knows (0 unknown).
int32_t elementType(const Value& v);

/// Bytes per element of a fixed-width type; 0 for STRING, packed and unknown types.
size_t byteWidth(int32_t data_type);
/// The bytes raw_data (or external data) holds for `t`'s dims and type: count * width, or for a
/// packed type (int4, uint4, int2, uint2, float4e2m1) ceil(count * bits / 8); nullopt for a type
/// of no fixed width (STRING, unknown) or dims that are invalid or overflow.
std::optional<uint64_t> dataBytes(const onnx::TensorProto& t);

/// What is wrong with an inline tensor's storage: negative or overflowing dims, raw_data or a
/// typed field holding another count than the dims need. Empty when nothing is (or the type
/// is one whose storage qconv does not know).
std::string storageProblem(const onnx::TensorProto& t);
/// What keeps storageBytes from reading the initializer of `v`: storageProblem, a file holding
/// another length than the dims need, a type with no byte form, a typed field's value out of its
/// type's range (the same read, so the answer is the action's). Empty when it can be read (a
/// selector asks this of what its action will read, so the action never meets such storage).
std::string storageProblem(const Value& v);

/// The bytes raw_data would hold for `t` (little-endian, fixed width; 4- and 2-bit types packed
/// two or four a byte, the first in the lowest bits), from any storage ONNX allows for its type:
/// raw_data, its file (`file`, for external or file-backed data), or its typed field (float_data,
/// double_data, int64_data, uint64_data; int32_data with one value per entry, or one packed byte
/// per entry for the 4- and 2-bit types). The one reader of tensor bytes: every reader here
/// decodes what it gives. False with *why for malformed storage or a type with no byte form
/// (STRING); a file that cannot be read throws Error(BadInput) (ByteSource::read).
bool storageBytes(const onnx::TensorProto& t, const FileBytes& file, std::string& out, std::string* why);

/// All the bytes of a file-backed tensor, read through its source (which throws Error(BadInput),
/// naming the file, when they cannot be read).
std::string loadBytes(const FileBytes& bytes);

/// Float32 constants past this many bytes (an LLM's largest blocked scales) are read in pieces
/// by those who can (forFloatPieces), never whole.
inline constexpr uint64_t kFloatPieceBytes = uint64_t{16} << 20;

/// For a file-backed float32 constant of more than kFloatPieceBytes: `fn(first, values, count)`
/// on its values, 1 Mi of them at a time in order, until it returns false; the values are
/// little-endian as stored (every host qconv builds for). False, calling nothing, for any other
/// tensor: read it whole. A file that cannot be read throws (ByteSource::read).
bool forFloatPieces(const Value& v, const std::function<bool(uint64_t, const float*, size_t)>& fn);

/// For float32 `v` whose bytes its source wrote itself (ByteSource::writtenFloatFlaws: a repack's
/// scales), the qconv::scaleFlaws of its values as they were written; nullopt otherwise.
std::optional<unsigned> writtenFloatFlaws(const Value& v);

/// Sequential reader of a tensor of one byte per element (INT8, UINT8), so that a weight of any
/// size is read in bounded memory: raw_data in place, a file-backed tensor in place where its
/// source can show it so (ByteSource::view) or else through a buffer refilled 1 MiB at a time,
/// a typed field converted once (storageBytes).
class ByteStream {
 public:
  /// Nothing to read (ok() false, why() says so) for another type or malformed storage.
  /// `buffer` holds file bytes; one buffer can serve many streams, one after the other.
  ByteStream(const Value& v, std::string& buffer);
  /// An inline tensor (a file-backed one is refused: read it through its value).
  ByteStream(const onnx::TensorProto& t, std::string& buffer) : ByteStream(t, FileBytes{}, buffer) {}
  bool ok() const { return why_.empty(); }
  const std::string& why() const { return why_; }
  int64_t size() const { return size_; }
  /// The next `n` elements' bytes, valid until the next call; nullptr past the end. A file
  /// that cannot be read throws (ByteSource::read).
  const uint8_t* next(size_t n);

 private:
  ByteStream(const onnx::TensorProto& t, const FileBytes& file, std::string& buffer);

  std::string why_;
  int64_t size_ = 0;
  uint64_t pos_ = 0;          // elements served
  const std::string* raw_ = nullptr;
  std::string converted_;     // a typed field's bytes
  FileBytes file_;
  std::string& buffer_;       // file bytes [buffer_start_, buffer_start_ + filled_)
  uint64_t buffer_start_ = 0;
  uint64_t filled_ = 0;
};

}  // namespace qconv::ir
