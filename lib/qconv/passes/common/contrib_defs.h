// What onnxruntime's definitions of its weight-only ops demand (ContribOperators.md, and the
// checks its CPU kernels make before they run), checked on a node: the lowerings leave a node
// that breaks them with the reason, as a warning (read/lower_matmul_nbits.cpp,
// read/lower_gather_block_quantized.cpp), and verify reports it ("op-invalid"). A malformed op is
// never rewritten into standard ops that would be invalid in their turn.
//
// MatMulNBits(A, B, scales[, zero_points][, g_idx][, bias]; K, N, bits, block_size):
//   1. K and N positive; bits 2, 4 or 8; block_size a power of two of 16 or more;
//   2. B of N x k_blocks x (block_size * bits / 8) bytes, k_blocks = ceil(K / block_size), where
//      its shape is known (a 3-D [N, k_blocks, blob], or as many bytes in all);
//   3. scales of N * k_blocks values; zero points of N * ceil(k_blocks * bits / 8) bytes (uint8)
//      or N * k_blocks values (of the scales' type); g_idx of K values; bias of N values.
// GatherBlockQuantized(data, indices, scales[, zero_points]; gather_axis, quantize_axis, block_size, bits):
//   4. block_size a power of two of 16 or more; gather_axis 0 and quantize_axis the last axis
//      (what onnxruntime's kernel runs);
//   5. scales of data's rank, of data's shape but ceil(D / block_size) along quantize_axis; zero
//      points of the scales' shape.
// Shapes are read where they are known (an initializer's dims, or a declared shape); an unknown
// one is no finding.
#pragma once

#include <string>

#include "qconv/ir/ir.h"

namespace qconv {

/// Why `n` (a com.microsoft MatMulNBits) breaks its definition, or empty.
std::string matMulNBitsProblem(const ir::Node& n);
/// Why `n` (a com.microsoft GatherBlockQuantized) breaks its definition, or empty.
std::string gatherBlockQuantizedProblem(const ir::Node& n);
/// Either, by the node's operator; empty for any other node.
std::string contribDefinitionProblem(const ir::Node& n);

}  // namespace qconv
