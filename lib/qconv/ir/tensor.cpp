#include "qconv/ir/tensor.h"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <limits>

#include "qconv/diag.h"
#include "qconv/ir/ir.h"

namespace qconv::ir {

using onnx::TensorProto;

namespace {

constexpr const char* kUnresolved = "its bytes are in a file, and it was read without them";

}  // namespace

std::optional<int64_t> numElements(const TensorProto& t) {
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return std::nullopt;
    n *= d;
  }
  return n;
}

std::vector<int64_t> dimsOf(const TensorProto& t) { return {t.dims().begin(), t.dims().end()}; }

std::optional<std::vector<int64_t>> knownDims(const Value& v) {
  if (const auto* t = v.initializer()) return dimsOf(*t);
  const onnx::ValueInfoProto* info = v.info();
  if (!info || !info->type().has_tensor_type() || !info->type().tensor_type().has_shape()) return std::nullopt;
  std::vector<int64_t> dims;
  for (const auto& d : info->type().tensor_type().shape().dim()) {
    if (!d.has_dim_value()) return std::nullopt;
    dims.push_back(d.dim_value());
  }
  return dims;
}

int32_t elementType(const Value& v) { return v.initializer() ? v.initializer()->data_type() : v.elemType(); }

size_t byteWidth(int32_t dt) {
  switch (dt) {
    case TensorProto::INT8:
    case TensorProto::UINT8:
    case TensorProto::BOOL:
    case TensorProto::FLOAT8E4M3FN:
    case TensorProto::FLOAT8E4M3FNUZ:
    case TensorProto::FLOAT8E5M2:
    case TensorProto::FLOAT8E5M2FNUZ:
    case TensorProto::FLOAT8E8M0: return 1;
    case TensorProto::INT16:
    case TensorProto::UINT16:
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16: return 2;
    case TensorProto::INT32:
    case TensorProto::UINT32:
    case TensorProto::FLOAT: return 4;
    case TensorProto::INT64:
    case TensorProto::UINT64:
    case TensorProto::DOUBLE: return 8;
    default: return 0;
  }
}

std::string storageProblem(const TensorProto& t) {
  for (int64_t d : t.dims())
    if (d < 0) return fmt::format("dimension {} is negative", d);
  const auto n = numElements(t);
  if (!n) return "its dims multiply past 2^63 elements";
  const auto need = dataBytes(t);
  if (t.data_location() == TensorProto::EXTERNAL || !need) return {};
  const uint64_t count = static_cast<uint64_t>(*n);
  if (t.has_raw_data()) {
    if (t.raw_data().size() != *need) return fmt::format("raw data holds {} bytes, dims need {}", t.raw_data().size(), *need);
    return {};
  }
  // the typed field: its count (values per entry as storageBytes reads them)
  uint64_t have = 0, want = count;
  switch (t.data_type()) {
    case TensorProto::FLOAT: have = static_cast<uint64_t>(t.float_data_size()); break;
    case TensorProto::DOUBLE: have = static_cast<uint64_t>(t.double_data_size()); break;
    case TensorProto::INT64: have = static_cast<uint64_t>(t.int64_data_size()); break;
    case TensorProto::UINT32:
    case TensorProto::UINT64: have = static_cast<uint64_t>(t.uint64_data_size()); break;
    default:
      have = static_cast<uint64_t>(t.int32_data_size());
      if (packedBits(t.data_type()) || t.data_type() == TensorProto::FLOAT4E2M1) want = *need;  // one packed byte per entry
      break;
  }
  if (have != want) return fmt::format("holds {} values, dims need {}", have, want);
  return {};
}

std::string storageProblem(const Value& v) {
  QCONV_ASSERT(v.initializer(), "storageProblem: value '{}' is not an initializer", v.name());
  const TensorProto& t = *v.initializer();
  if (std::string why = storageProblem(t); !why.empty()) return why;
  const auto need = dataBytes(t);
  if (!need) return fmt::format("a {} tensor has no byte form qconv reads", typeName(t.data_type()));
  if (t.data_location() == TensorProto::EXTERNAL) {
    const FileBytes& file = v.fileBytes();
    if (!file) return kUnresolved;
    if (file.length != *need) return fmt::format("its file holds {} bytes, dims need {}", file.length, *need);
  } else if (!t.has_raw_data()) {  // a typed field: its values too (an int32_data entry out of the type's range)
    std::string bytes, why;
    if (!storageBytes(t, FileBytes{}, bytes, &why)) return why;
  }
  return {};
}

bool forFloatPieces(const Value& v, const std::function<bool(uint64_t, const float*, size_t)>& fn) {
  const TensorProto* t = v.initializer();
  const FileBytes& file = v.fileBytes();
  if (!t || t->data_type() != TensorProto::FLOAT || t->data_location() != TensorProto::EXTERNAL || !file ||
      file.length <= kFloatPieceBytes || file.length % 4 != 0)
    return false;
  std::vector<float> piece(size_t{1} << 20);
  for (uint64_t at = 0; at < file.length; at += piece.size() * 4) {
    const uint64_t n = std::min<uint64_t>(piece.size() * 4, file.length - at);
    file.source->read(file.span, at, n, reinterpret_cast<char*>(piece.data()));
    if (!fn(at / 4, piece.data(), static_cast<size_t>(n / 4))) break;
  }
  return true;
}

std::optional<unsigned> writtenFloatFlaws(const Value& v) {
  const TensorProto* t = v.initializer();
  const FileBytes& file = v.fileBytes();
  if (!t || t->data_type() != TensorProto::FLOAT || t->data_location() != TensorProto::EXTERNAL || !file)
    return std::nullopt;
  return file.source->writtenFloatFlaws(file.span);
}

std::string loadBytes(const FileBytes& bytes) {
  QCONV_ASSERT(bytes, "loadBytes: a tensor that is not file-backed");
  std::string out(bytes.length, '\0');
  bytes.source->read(bytes.span, 0, bytes.length, out.data());
  return out;
}

ByteStream::ByteStream(const Value& v, std::string& buffer) : ByteStream(*v.initializer(), v.fileBytes(), buffer) {}

ByteStream::ByteStream(const TensorProto& t, const FileBytes& file, std::string& buffer) : file_(file), buffer_(buffer) {
  if (t.data_type() != TensorProto::INT8 && t.data_type() != TensorProto::UINT8) {
    why_ = fmt::format("tensor is {}, not int8 or uint8", typeName(t.data_type()));
    return;
  }
  auto n = numElements(t);
  if (!n) {
    why_ = "tensor has invalid dims";
    return;
  }
  size_ = *n;
  uint64_t length = 0;
  if (t.data_location() == TensorProto::EXTERNAL) {
    if (!file_) {
      why_ = kUnresolved;
      return;
    }
    length = file_.length;
  } else if (t.has_raw_data()) {
    raw_ = &t.raw_data();
    length = raw_->size();
  } else {
    if (!storageBytes(t, FileBytes{}, converted_, &why_)) return;
    raw_ = &converted_;
    length = converted_.size();
  }
  if (length != static_cast<uint64_t>(size_)) why_ = fmt::format("tensor holds {} bytes, dims need {}", length, size_);
}

const uint8_t* ByteStream::next(size_t n) {
  if (!ok() || pos_ + n > static_cast<uint64_t>(size_)) return nullptr;
  const uint64_t at = pos_;
  pos_ += n;
  if (raw_) return reinterpret_cast<const uint8_t*>(raw_->data()) + at;
  if (const char* in_place = file_.source->view(file_.span, at, n)) return reinterpret_cast<const uint8_t*>(in_place);
  if (filled_ == 0 || at < buffer_start_ || at + n > buffer_start_ + filled_) {  // refill from `at`
    constexpr uint64_t kBlock = uint64_t{1} << 20;
    const uint64_t want = std::min<uint64_t>(std::max<uint64_t>(kBlock, n), static_cast<uint64_t>(size_) - at);
    if (buffer_.size() < want) buffer_.resize(want);
    buffer_start_ = at;
    filled_ = 0;
    file_.source->read(file_.span, at, want, buffer_.data());
    filled_ = want;
  }
  return reinterpret_cast<const uint8_t*>(buffer_.data()) + (at - buffer_start_);
}

namespace {

template <typename T>
T loadRaw(const std::string& raw, int64_t i) {
  T v;
  std::memcpy(&v, raw.data() + static_cast<size_t>(i) * sizeof(T), sizeof(T));
  return v;
}

/// Element count of `t` (valid dims: bytesOf succeeded).
int64_t countOf(const TensorProto& t) { return numElements(t).value_or(0); }

/// Append the low `width` bytes of `bits`, little-endian.
void putLittle(std::string& out, uint64_t bits, size_t width) {
  for (size_t b = 0; b < width; ++b) out.push_back(static_cast<char>((bits >> (8 * b)) & 0xff));
}

/// The typed field of `t` as raw_data would hold it (onnx.proto: which field holds which type).
bool typedFieldBytes(const TensorProto& t, uint64_t count, uint64_t need, std::string& out, std::string* why) {
  const int32_t dt = t.data_type();
  auto wrongCount = [&](const char* field, int have, uint64_t want) {
    *why = fmt::format("{} holds {} values, dims need {}", field, have, want);
    return false;
  };
  out.clear();
  out.reserve(need);
  switch (dt) {
    case TensorProto::FLOAT:
      if (static_cast<uint64_t>(t.float_data_size()) != count) return wrongCount("float_data", t.float_data_size(), count);
      out.resize(need);
      if (need) std::memcpy(out.data(), t.float_data().data(), need);  // little-endian hosts only (as every reader here)
      return true;
    case TensorProto::DOUBLE:
      if (static_cast<uint64_t>(t.double_data_size()) != count) return wrongCount("double_data", t.double_data_size(), count);
      out.resize(need);
      if (need) std::memcpy(out.data(), t.double_data().data(), need);
      return true;
    case TensorProto::INT64:
      if (static_cast<uint64_t>(t.int64_data_size()) != count) return wrongCount("int64_data", t.int64_data_size(), count);
      out.resize(need);
      if (need) std::memcpy(out.data(), t.int64_data().data(), need);
      return true;
    case TensorProto::UINT32:
    case TensorProto::UINT64: {
      if (static_cast<uint64_t>(t.uint64_data_size()) != count) return wrongCount("uint64_data", t.uint64_data_size(), count);
      const size_t width = byteWidth(dt);
      for (uint64_t v : t.uint64_data()) {
        if (width == 4 && v > std::numeric_limits<uint32_t>::max()) {
          *why = fmt::format("uint64_data value {} is out of range for uint32", v);
          return false;
        }
        putLittle(out, v, width);
      }
      return true;
    }
    default: break;
  }
  // int32_data: one value per entry (int32, the 8- and 16-bit integers, bool, and the bits of
  // float16, bfloat16 and float8), or one packed byte per entry (the 4- and 2-bit types).
  const bool packed = packedBits(dt) || dt == TensorProto::FLOAT4E2M1;
  const size_t width = packed ? 1 : byteWidth(dt);
  if (!width || width > 4) {
    *why = fmt::format("a {} tensor has no byte form qconv reads", typeName(dt));
    return false;
  }
  const uint64_t entries = packed ? need : count;
  if (static_cast<uint64_t>(t.int32_data_size()) != entries) {
    if (!packed) return wrongCount("int32_data", t.int32_data_size(), count);
    *why = fmt::format("int32_data holds {} values, {} {} elements need {} bytes", t.int32_data_size(), count, typeName(dt), need);
    return false;
  }
  // the values an entry may hold: the type's range for an integer type, else its bits
  const bool ranged = isIntegerType(dt);
  const auto [lo, hi] = ranged ? intRange(dt) : std::pair<int64_t, int64_t>{0, (int64_t{1} << (8 * width)) - 1};
  for (int32_t v : t.int32_data()) {
    if (v < lo || v > hi) {
      *why = fmt::format("int32_data value {} is out of range for {}", v, typeName(dt));
      return false;
    }
    putLittle(out, static_cast<uint64_t>(static_cast<int64_t>(v)), width);
  }
  return true;
}

/// The bytes of `t` as raw_data holds them: raw_data itself (no copy), or `holder`, filled from
/// its file or its typed field. Null with *why. What storageBytes gives, without its copy.
const std::string* bytesOf(const TensorProto& t, const FileBytes& file, std::string& holder, std::string* why) {
  const auto n = numElements(t);
  if (!n) {
    *why = "tensor has invalid dims";
    return nullptr;
  }
  const auto need = dataBytes(t);
  if (!need) {
    *why = fmt::format("a {} tensor has no byte form qconv reads", typeName(t.data_type()));
    return nullptr;
  }
  if (t.data_location() == TensorProto::EXTERNAL) {
    if (!file) {
      *why = kUnresolved;
      return nullptr;
    }
    if (file.length != *need) {
      *why = fmt::format("its file holds {} bytes, dims need {}", file.length, *need);
      return nullptr;
    }
    holder.resize(file.length);
    file.source->read(file.span, 0, file.length, holder.data());
    return &holder;
  }
  if (t.has_raw_data()) {
    if (t.raw_data().size() != *need) {
      *why = fmt::format("raw data holds {} bytes, dims need {}", t.raw_data().size(), *need);
      return nullptr;
    }
    return &t.raw_data();
  }
  return typedFieldBytes(t, static_cast<uint64_t>(*n), *need, holder, why) ? &holder : nullptr;
}

}  // namespace

bool storageBytes(const TensorProto& t, const FileBytes& file, std::string& out, std::string* why) {
  const std::string* bytes = bytesOf(t, file, out, why);
  if (bytes && bytes != &out) out = *bytes;  // raw_data: copied
  return bytes != nullptr;
}

namespace {

std::optional<std::vector<float>> readFloats(const TensorProto& t, const FileBytes& file, std::string* why) {
  if (t.data_type() != TensorProto::FLOAT) {
    *why = fmt::format("tensor is {}, not float", typeName(t.data_type()));
    return std::nullopt;
  }
  if (const auto count = numElements(t);  // a file's bytes straight into the floats: no copy between
      t.data_location() == TensorProto::EXTERNAL && file && count && file.length == static_cast<uint64_t>(*count) * 4) {
    std::vector<float> out(static_cast<size_t>(*count));
    file.source->read(file.span, 0, file.length, reinterpret_cast<char*>(out.data()));  // little-endian, as below
    return out;
  }
  std::string holder;
  const std::string* raw = bytesOf(t, file, holder, why);
  if (!raw) return std::nullopt;
  std::vector<float> out(static_cast<size_t>(countOf(t)));
  if (!out.empty()) std::memcpy(out.data(), raw->data(), out.size() * sizeof(float));
  return out;
}

/// A 4-bit or 2-bit integer tensor: its elements packed into bytes, the first in the lowest bits.
std::optional<std::vector<int64_t>> readPackedInts(const TensorProto& t, const FileBytes& file, std::string* why) {
  const int32_t dt = t.data_type();
  const int bits = packedBits(dt);
  std::string holder;
  const std::string* raw = bytesOf(t, file, holder, why);
  if (!raw) return std::nullopt;
  const int64_t n = countOf(t);
  const int per_byte = 8 / bits;
  const bool is_signed = dt == TensorProto::INT4 || dt == TensorProto::INT2;
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const unsigned byte = static_cast<uint8_t>((*raw)[static_cast<size_t>(i / per_byte)]);
    int64_t v = (byte >> ((i % per_byte) * bits)) & ((1u << bits) - 1);
    if (is_signed && v >= (int64_t{1} << (bits - 1))) v -= int64_t{1} << bits;
    out[static_cast<size_t>(i)] = v;
  }
  return out;
}

std::optional<std::vector<int64_t>> readInts(const TensorProto& t, const FileBytes& file, std::string* why) {
  const int32_t dt = t.data_type();
  if (packedBits(dt)) return readPackedInts(t, file, why);
  if (!isIntegerType(dt)) {
    *why = fmt::format("tensor is {}, not an integer type", typeName(dt));
    return std::nullopt;
  }
  std::string holder;
  const std::string* raw = bytesOf(t, file, holder, why);
  if (!raw) return std::nullopt;
  const int64_t n = countOf(t);
  const std::string& r = *raw;
  std::vector<int64_t> out(static_cast<size_t>(n));
  auto widen = [&](auto type) {  // one loop per type, not a switch per element
    using T = decltype(type);
    for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = loadRaw<T>(r, i);
  };
  switch (dt) {
    case TensorProto::INT8: widen(int8_t{}); break;
    case TensorProto::UINT8: widen(uint8_t{}); break;
    case TensorProto::INT16: widen(int16_t{}); break;
    case TensorProto::UINT16: widen(uint16_t{}); break;
    case TensorProto::INT32: widen(int32_t{}); break;
    default: widen(int64_t{}); break;
  }
  return out;
}

}  // namespace

std::optional<std::vector<float>> readFloats(const Value& v, std::string* why) {
  QCONV_ASSERT(v.initializer(), "readFloats: value '{}' is not an initializer", v.name());
  return readFloats(*v.initializer(), v.fileBytes(), why);
}

std::optional<std::vector<int64_t>> readInts(const Value& v, std::string* why) {
  QCONV_ASSERT(v.initializer(), "readInts: value '{}' is not an initializer", v.name());
  return readInts(*v.initializer(), v.fileBytes(), why);
}

std::optional<std::vector<float>> readFloats(const TensorProto& t, std::string* why) { return readFloats(t, {}, why); }

namespace {

/// IEEE 754 binary16 bits as the float of the same value.
float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);  // inf, nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);  // normal: rebias 15 -> 127
  } else if (man == 0) {
    bits = sign;  // zero
  } else {  // subnormal: man * 2^-24, normal as a float
    int e = -1;
    uint32_t m = man;
    do {
      ++e;
      m <<= 1;
    } while ((m & 0x400) == 0);
    bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | ((m & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace

std::optional<std::vector<float>> readWidenedFloats(const Value& v, std::string* why) {
  const int32_t dt = v.initializer() ? v.initializer()->data_type() : 0;
  if (dt == TensorProto::FLOAT8E8M0) return readE8M0AsFloats(v, why);
  return dt == TensorProto::FLOAT16 || dt == TensorProto::BFLOAT16 ? readHalfAsFloats(v, why) : readFloats(v, why);
}

namespace {

/// The values of a tensor of `width`-byte float bits (FLOAT16, BFLOAT16: 2; FLOAT8E8M0: 1),
/// inline, file-backed, or one value per int32_data entry, each widened by `widen`.
template <typename Widen>
std::optional<std::vector<float>> readBitsAsFloats(const Value& v, size_t width, Widen widen, std::string* why) {
  const TensorProto& t = *v.initializer();
  std::string holder;
  const std::string* raw = bytesOf(t, v.fileBytes(), holder, why);
  if (!raw) return std::nullopt;
  const int64_t n = countOf(t);
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const auto bits = static_cast<uint16_t>(width == 1 ? static_cast<uint8_t>((*raw)[static_cast<size_t>(i)]) : loadRaw<uint16_t>(*raw, i));
    out[static_cast<size_t>(i)] = widen(bits);
  }
  return out;
}

}  // namespace

std::optional<std::vector<float>> readE8M0AsFloats(const Value& v, std::string* why) {
  QCONV_ASSERT(v.initializer(), "readE8M0AsFloats: value '{}' is not an initializer", v.name());
  if (v.initializer()->data_type() != TensorProto::FLOAT8E8M0) {
    *why = fmt::format("tensor is {}, not float8e8m0", typeName(v.initializer()->data_type()));
    return std::nullopt;
  }
  // 2^(e - 127); 255 is NaN. 2^-127 (e = 0) is a float32 subnormal, which ldexp gives exactly.
  return readBitsAsFloats(v, 1, [](uint16_t e) {
    return e == 255 ? std::numeric_limits<float>::quiet_NaN() : std::ldexp(1.0f, static_cast<int>(e) - 127);
  }, why);
}

std::optional<std::vector<float>> readHalfAsFloats(const Value& v, std::string* why) {
  QCONV_ASSERT(v.initializer(), "readHalfAsFloats: value '{}' is not an initializer", v.name());
  const int32_t dt = v.initializer()->data_type();
  if (dt != TensorProto::FLOAT16 && dt != TensorProto::BFLOAT16) {
    *why = fmt::format("tensor is {}, not float16 or bfloat16", typeName(dt));
    return std::nullopt;
  }
  return readBitsAsFloats(v, 2, [dt](uint16_t bits) {
    if (dt == TensorProto::FLOAT16) return halfToFloat(bits);
    const uint32_t wide = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &wide, sizeof f);
    return f;
  }, why);
}

std::optional<std::vector<int64_t>> readInts(const TensorProto& t, std::string* why) { return readInts(t, {}, why); }

std::unique_ptr<TensorProto> makeFloatTensor(const std::vector<int64_t>& dims, const std::vector<float>& values) {
  auto t = std::make_unique<TensorProto>();
  t->set_data_type(TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  return t;
}

std::unique_ptr<TensorProto> makeIntTensor(int32_t dt, const std::vector<int64_t>& dims,
                                           const std::vector<int64_t>& values) {
  auto t = std::make_unique<TensorProto>();
  t->set_data_type(dt);
  for (int64_t d : dims) t->add_dims(d);
  const size_t w = byteWidth(dt);
  QCONV_ASSERT(isIntegerType(dt) && w > 0, "makeIntTensor: {} is not an integer type", typeName(dt));
  auto [lo, hi] = intRange(dt);
  std::string raw(values.size() * w, '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    QCONV_ASSERT(values[i] >= lo && values[i] <= hi, "makeIntTensor: {} out of range for {}", values[i],
                 typeName(dt));
    // Little-endian two's complement: the low `w` bytes of the int64 value.
    const uint64_t bits = static_cast<uint64_t>(values[i]);
    for (size_t b = 0; b < w; ++b) raw[i * w + b] = static_cast<char>((bits >> (8 * b)) & 0xff);
  }
  t->set_raw_data(std::move(raw));
  return t;
}

const char* typeName(int32_t dt) {
  switch (dt) {
    case TensorProto::FLOAT: return "float";
    case TensorProto::UINT8: return "uint8";
    case TensorProto::INT8: return "int8";
    case TensorProto::UINT16: return "uint16";
    case TensorProto::INT16: return "int16";
    case TensorProto::INT32: return "int32";
    case TensorProto::INT64: return "int64";
    case TensorProto::STRING: return "string";
    case TensorProto::BOOL: return "bool";
    case TensorProto::FLOAT16: return "float16";
    case TensorProto::DOUBLE: return "double";
    case TensorProto::UINT32: return "uint32";
    case TensorProto::UINT64: return "uint64";
    case TensorProto::BFLOAT16: return "bfloat16";
    case 0: return "unknown type";
    default: break;
  }
  // newer than the protobuf classes of ONNX 1.12 (onnx.proto's numbers; schema spellings)
  switch (dt) {
    case 17: return "float8e4m3fn";
    case 18: return "float8e4m3fnuz";
    case 19: return "float8e5m2";
    case 20: return "float8e5m2fnuz";
    case 21: return "uint4";
    case 22: return "int4";
    case 23: return "float4e2m1";
    case 24: return "float8e8m0";
    case 25: return "uint2";
    case 26: return "int2";
    default: return "other type";
  }
}

std::optional<uint64_t> dataBytes(const TensorProto& t) {
  const auto n = numElements(t);
  if (!n) return std::nullopt;
  const uint64_t count = static_cast<uint64_t>(*n);
  const int bits = t.data_type() == TensorProto::FLOAT4E2M1 ? 4 : packedBits(t.data_type());
  if (bits) return count / 8 * static_cast<uint64_t>(bits) + (count % 8 * static_cast<uint64_t>(bits) + 7) / 8;
  const uint64_t width = byteWidth(t.data_type());
  if (!width || count > std::numeric_limits<uint64_t>::max() / width) return std::nullopt;
  return count * width;
}

int packedBits(int32_t dt) {
  switch (dt) {
    case TensorProto::UINT4:
    case TensorProto::INT4: return 4;
    case TensorProto::UINT2:
    case TensorProto::INT2: return 2;
    default: return 0;
  }
}

bool isFloatQuantType(int32_t dt) {
  return dt == TensorProto::FLOAT8E4M3FN || dt == TensorProto::FLOAT8E4M3FNUZ || dt == TensorProto::FLOAT8E5M2 ||
         dt == TensorProto::FLOAT8E5M2FNUZ || dt == TensorProto::FLOAT4E2M1;
}

bool isQuantizedType(int32_t dt) {
  return dt == TensorProto::INT8 || dt == TensorProto::UINT8 || dt == TensorProto::INT16 || dt == TensorProto::UINT16 ||
         dt == TensorProto::INT32 || packedBits(dt) || isFloatQuantType(dt);
}

bool isIntegerType(int32_t dt) {
  return dt == TensorProto::INT8 || dt == TensorProto::UINT8 || dt == TensorProto::INT16 ||
         dt == TensorProto::UINT16 || dt == TensorProto::INT32 || dt == TensorProto::INT64;
}

bool isInt8Like(int32_t dt) { return dt == TensorProto::INT8 || dt == TensorProto::UINT8; }

std::pair<int64_t, int64_t> intRange(int32_t dt) {
  switch (dt) {
    case TensorProto::INT8: return {-128, 127};
    case TensorProto::UINT8: return {0, 255};
    case TensorProto::INT16: return {-32768, 32767};
    case TensorProto::UINT16: return {0, 65535};
    case TensorProto::INT32: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case TensorProto::INT4: return {-8, 7};
    case TensorProto::UINT4: return {0, 15};
    case TensorProto::INT2: return {-2, 1};
    case TensorProto::UINT2: return {0, 3};
    default: return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  }
}

}  // namespace qconv::ir
