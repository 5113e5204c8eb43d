#include "qconv/passes/common/nbits_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "qconv/ir/tensor.h"

namespace qconv::nbits {

using onnx::TensorProto;

int32_t standardType(int64_t bits, bool is_signed) {
  switch (bits) {
    case 2: return is_signed ? TensorProto::INT2 : TensorProto::UINT2;
    case 4: return is_signed ? TensorProto::INT4 : TensorProto::UINT4;
    case 8: return is_signed ? TensorProto::INT8 : TensorProto::UINT8;
    default: return 0;
  }
}

void transposeNibbles(const std::string& in, uint64_t in_stride, uint64_t rows, uint64_t cols, std::string& out,
                      uint64_t out_stride, unsigned flip) {
  const auto* src = reinterpret_cast<const uint8_t*>(in.data());
  auto* dst = reinterpret_cast<uint8_t*>(out.data());
  const auto both = static_cast<uint8_t>(flip | flip << 4);
  constexpr uint64_t kTile = 64;
  for (uint64_t r0 = 0; r0 < rows; r0 += kTile)
    for (uint64_t c0 = 0; c0 < cols; c0 += kTile)
      for (uint64_t r = r0; r < std::min(r0 + kTile, rows); r += 2)
        for (uint64_t c = c0; c < std::min(c0 + kTile, cols); c += 2) {
          const uint8_t a = src[r * in_stride + c / 2], b = src[(r + 1) * in_stride + c / 2];  // (r, c..c+1), (r+1, c..c+1)
          dst[c * out_stride + r / 2] = static_cast<uint8_t>(((a & 0x0f) | (b << 4)) ^ both);          // (c, r..r+1)
          dst[(c + 1) * out_stride + r / 2] = static_cast<uint8_t>(((a >> 4) | (b & 0xf0)) ^ both);    // (c+1, r..r+1)
        }
}

std::string transposeElements(const std::string& in, uint64_t rows, uint64_t cols, size_t width) {
  std::string out(in.size(), '\0');
  constexpr uint64_t kTile = 64;
  for (uint64_t r0 = 0; r0 < rows; r0 += kTile)
    for (uint64_t c0 = 0; c0 < cols; c0 += kTile)
      for (uint64_t r = r0; r < std::min(r0 + kTile, rows); ++r)
        for (uint64_t c = c0; c < std::min(c0 + kTile, cols); ++c)
          std::memcpy(&out[(c * rows + r) * width], &in[(r * cols + c) * width], width);
  return out;
}

ir::Value* addMadeTensor(ir::Graph& graph, ir::ByteKeeper* keeper, const std::string& hint,
                         std::unique_ptr<TensorProto> t, std::string bytes) {
  if (!keeper || bytes.size() < (size_t{1} << 20)) {
    t->set_raw_data(std::move(bytes));
    return graph.addInitializer(hint, std::move(t));
  }
  t->set_name(hint);
  const ir::FileBytes kept = keeper->keep(*t, bytes);
  ir::Value* v = graph.newValue(hint, t->data_type());
  graph.setInitializer(v, std::move(t), kept);
  return v;
}

std::string rawBytes(const ir::Value& v, std::string* why) {
  const TensorProto& t = *v.initializer();
  if (t.data_location() == TensorProto::EXTERNAL) {
    if (!v.fileBytes()) {
      *why = "its bytes are not readable here";
      return {};
    }
    return ir::loadBytes(v.fileBytes());
  }
  if (t.has_raw_data()) return t.raw_data();
  std::string out;
  if (t.float_data_size()) {
    out.resize(static_cast<size_t>(t.float_data_size()) * 4);
    std::memcpy(out.data(), t.float_data().data(), out.size());
    return out;
  }
  const size_t width = ir::byteWidth(t.data_type());
  if (t.int32_data_size() && (width == 1 || width == 2)) {
    out.resize(static_cast<size_t>(t.int32_data_size()) * width);
    for (int i = 0; i < t.int32_data_size(); ++i) {
      const auto bits = static_cast<uint16_t>(t.int32_data(i));
      std::memcpy(out.data() + static_cast<size_t>(i) * width, &bits, width);  // little-endian
    }
    return out;
  }
  *why = fmt::format("its {} storage is not one qconv repacks", ir::typeName(t.data_type()));
  return {};
}

}  // namespace qconv::nbits
