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
  std::vector<uint8_t> mask;  // which elements start a pair: one period of the pattern, kMaxPairVector more
};

/// The widest vector countSaturablePairs runs with on this CPU: 32 (AVX2), 16 (SSE2: any
/// x86-64), 1 (scalar). Every width counts the same pairs (tests/unit hold them to each other).
int pairVectorWidth();
constexpr size_t kMaxPairVector = 32;

/// Saturable pairs among `len` elements of `x`: (x[i], x[i + stride]) for each i whose mask is 1
/// with |x[i] + x[i + stride]| >= 129, which only two weights of one sign reach (127 + -1 = 126).
/// x[0] is at the start of the mask's period; `mask` holds one period and kMaxPairVector
/// elements more of the cycle, so that the mask of any vector of elements is one load at their
/// offset in the period. `width`: a pairVectorWidth() value at most the CPU's.
int64_t countSaturablePairs(const int8_t* x, const uint8_t* mask, size_t period, size_t len, size_t stride, int width);

/// The pairs of the int8 constant weight `w`; nullopt when its storage is malformed (a file
/// that cannot be read throws Error(BadInput), ir::ByteSource::read).
std::optional<WeightPairs> countWeightPairs(const ir::Value& w, PairLayout layout, int64_t group,
                                            PairScratch& scratch);

}  // namespace qconv
