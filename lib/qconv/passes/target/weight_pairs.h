// The weight pairs onnxruntime's x86 u8 x s8 kernel adds into a saturating int16, counted
// (check_saturation.cpp says why and where). Each weight is read once, in bounded memory.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qconv/ir/ir.h"

namespace qconv {

struct WeightPairs {
  int64_t saturable = 0;  // pairs with |w0 + w1| >= 129
  int64_t total = 0;
};

/// How a weight's reduction dimension is laid out, in the order onnxruntime packs it:
///   ConvMCk   [M, C/group, k...]: per output channel, kernel position major, channel minor
///             (no pairs in a depthwise conv: one input and one output channel per group);
///   MatrixKN  [..., K, N]: rows (k, k+1), column by column (MatMul, Gemm);
///   MatrixNK  [N, K]: consecutive pairs within each row (Gemm with transB).
enum class PairLayout { ConvMCk, MatrixKN, MatrixNK };

/// Buffers reused from one weight to the next.
struct PairScratch {
  std::string bytes;          // file bytes (ir::ByteStream)
  std::vector<uint8_t> mask;  // which elements start a pair: one period of the pattern, 16 more
};

/// The pairs of the int8 constant weight `w`; nullopt when its storage is malformed (a file
/// that cannot be read throws Error(BadInput), ir::ByteSource::read).
std::optional<WeightPairs> countWeightPairs(const ir::Value& w, PairLayout layout, int64_t group,
                                            PairScratch& scratch);

}  // namespace qconv
