#include "qconv/passes/common/contrib_defs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "qconv/ir/tensor.h"

namespace qconv {

namespace {

/// The shape of `v` where it is known: an initializer's dims, or a declared shape of known dims.
std::optional<std::vector<int64_t>> shapeOf(const ir::Value* v) {
  if (!v) return std::nullopt;
  if (const auto* t = v->initializer()) return ir::dimsOf(*t);
  if (!v->info() || !v->info()->type().tensor_type().has_shape()) return std::nullopt;
  std::vector<int64_t> dims;
  for (const auto& d : v->info()->type().tensor_type().shape().dim()) {
    if (!d.has_dim_value()) return std::nullopt;
    dims.push_back(d.dim_value());
  }
  return dims;
}

std::optional<int64_t> countOf(const ir::Value* v) {
  auto s = shapeOf(v);
  if (!s) return std::nullopt;
  int64_t n = 1;
  for (int64_t d : *s) {
    if (d < 0 || (d && n > INT64_MAX / d)) return std::nullopt;
    n *= d;
  }
  return n;
}

bool powerOfTwoFrom16(int64_t b) { return b >= 16 && (b & (b - 1)) == 0; }

std::string shapeText(const std::vector<int64_t>& dims) {
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

}  // namespace

std::string matMulNBitsProblem(const ir::Node& n) {
  const int64_t K = n.attrInt("K", 0), N = n.attrInt("N", 0), bits = n.attrInt("bits", 4), block = n.attrInt("block_size", 0);
  if (bits != 2 && bits != 4 && bits != 8) return fmt::format("bits {}: qconv reads 2, 4 and 8", bits);  // (1)
  if (block <= 0 || K <= 0 || N <= 0) return "K, N and block_size must be positive";
  if (!powerOfTwoFrom16(block)) return fmt::format("block_size {} is not a power of two of 16 or more, as MatMulNBits needs", block);
  const int64_t blocks = (K + block - 1) / block, blob = block * bits / 8;
  if (auto b = shapeOf(n.input(1))) {  // (2)
    const std::vector<int64_t> want{N, blocks, blob};
    if (b->size() == 3 ? *b != want : countOf(n.input(1)) != N * blocks * blob)
      return fmt::format("B's shape is not [N, k_blocks, blob] = {}", shapeText(want));
  }
  if (auto s = countOf(n.input(2)); s && *s != N * blocks)  // (3)
    return fmt::format("scales are not a constant float tensor of N * k_blocks = {} values", N * blocks);
  if (const ir::Value* z = n.input(3)) {
    const int32_t zt = ir::elementType(*z);
    const int64_t want = zt == onnx::TensorProto::UINT8 ? N * ((blocks * bits + 7) / 8) : N * blocks;
    if (auto c = countOf(z); c && *c != want)
      return fmt::format("zero points hold {} values, N * {} is {}", *c,
                         zt == onnx::TensorProto::UINT8 ? "ceil(k_blocks * bits / 8)" : "k_blocks", want);
  }
  if (auto g = countOf(n.input(4)); g && *g != K) return fmt::format("g_idx has {} values, K is {}", *g, K);
  if (auto c = countOf(n.input(5)); c && *c != N) return fmt::format("bias has {} values, N is {}", *c, N);
  return {};
}

std::string gatherBlockQuantizedProblem(const ir::Node& n) {
  const int64_t block = n.attrInt("block_size", 128);
  if (!powerOfTwoFrom16(block)) return fmt::format("block_size {} is not a power of two of 16 or more", block);  // (4)
  auto data = shapeOf(n.input(0));
  if (!data) return {};
  const auto rank = static_cast<int64_t>(data->size());
  int64_t q = n.attrInt("quantize_axis", 1), g = n.attrInt("gather_axis", 0);
  if (q < 0) q += rank;
  if (g < 0) g += rank;
  if (q != rank - 1)
    return fmt::format("quantize_axis {} is not the last axis ({}): onnxruntime's kernel quantizes along the last",
                       n.attrInt("quantize_axis", 1), rank - 1);
  if (g != 0) return fmt::format("gather_axis {} is not 0: onnxruntime's kernel gathers along the first", n.attrInt("gather_axis", 0));
  std::vector<int64_t> want = *data;  // (5)
  want[static_cast<size_t>(q)] = ((*data)[static_cast<size_t>(q)] + block - 1) / block;
  if (auto s = shapeOf(n.input(2)); s && *s != want) return fmt::format("scales' shape is not {}", shapeText(want));
  if (auto z = shapeOf(n.input(3)); z && *z != want) return fmt::format("zero points' shape is not {}", shapeText(want));
  return {};
}

std::string contribDefinitionProblem(const ir::Node& n) {
  if (n.domain() != "com.microsoft") return {};
  if (n.opIs("MatMulNBits")) return matMulNBitsProblem(n);
  if (n.opIs("GatherBlockQuantized")) return gatherBlockQuantizedProblem(n);
  return {};
}

}  // namespace qconv
