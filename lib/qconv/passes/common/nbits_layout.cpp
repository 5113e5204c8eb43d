#include "qconv/passes/common/nbits_layout.h"

#include <fmt/format.h>

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
