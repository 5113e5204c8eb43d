// onnxruntime's MatMulNBits weight layout and the standard blocked one, and the repacking
// between them (read/lower_matmul_nbits.cpp one way, qop/fuse_matmul_nbits.cpp the other).
//
//   MatMulNBits (com.microsoft)                       DequantizeLinear(block_size) -> MatMul
//   B      uint8 [N, k_blocks, blob]: row n holds     x      [K, N] of int/uint<bits>: x[k, n]
//          column n of W, K elements padded to        scale  [k_blocks, N]: scale[b, n]
//          k_blocks * block_size, `bits` each,        zero   [k_blocks, N] of x's type, or
//          the first in the lowest bits                      absent (0)
//   scales [N * k_blocks] or [N, k_blocks]: [n][b]    axis 0, block_size = block_size
//   zero_points uint8 [N, ceil(k_blocks*bits/8)]:
//          packed as B; absent: 2^(bits-1)
// W[k, n] = (q - zero) * scale in both. A MatMulNBits without zero points is written signed,
// int<bits> at zero 0 (q - 2^(bits-1)), as onnxruntime's own QDQ writer does; a signed weight
// goes back to MatMulNBits as q + 2^(bits-1) with the default zero point.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "qconv/ir/ir.h"

namespace qconv::nbits {

/// The standard element type of a `bits`-wide weight (4: uint4/int4, 8: uint8/int8, 2: uint2/int2).
int32_t standardType(int64_t bits, bool is_signed);

/// Element `i` of a packed little-endian run of `bits`-wide unsigned values.
inline unsigned unpack(const std::string& bytes, uint64_t i, int64_t bits) {
  const uint64_t per = 8 / static_cast<uint64_t>(bits);
  return (static_cast<uint8_t>(bytes[i / per]) >> ((i % per) * static_cast<uint64_t>(bits))) & ((1u << bits) - 1);
}

/// Set element `i` (the byte's other bits are kept; start from zeros).
inline void pack(std::string& bytes, uint64_t i, int64_t bits, unsigned v) {
  const uint64_t per = 8 / static_cast<uint64_t>(bits);
  bytes[i / per] = static_cast<char>(static_cast<uint8_t>(bytes[i / per]) | ((v & ((1u << bits) - 1)) << ((i % per) * static_cast<uint64_t>(bits))));
}

/// The code transposeNibbles runs: the fastest this host has (AVX2 where the CPU has it, else
/// SSE2 on x86-64, else plain C++), or one named, for tests: each writes the same bytes.
enum class NibbleKernel { best, avx2, sse2, scalar };
/// Whether this build and host run `kernel`.
bool runs(NibbleKernel kernel);

/// out[c][r] = in[r][c] for a rows x cols matrix of 4-bit values (both even), rows of
/// `in_stride` and `out_stride` bytes, each value XORed with `flip` (8: int4 <-> int4 + 8 mod 16).
/// Two values a byte, in 32 x 32 (SSE2) or 32 x 64 (AVX2) blocks of byte shuffles on x86-64;
/// the scalar loop does the rest and every other host: the fast path of both repackings.
void transposeNibbles(const std::string& in, uint64_t in_stride, uint64_t rows, uint64_t cols, std::string& out,
                      uint64_t out_stride, unsigned flip, NibbleKernel kernel = NibbleKernel::best);

/// transposeNibbles of constant `v`'s bytes, read from its file a strip of rows at a time when
/// it has one (the strip stays in the cache between the read and the transpose). False with
/// *why when its bytes cannot be read.
bool transposeNibblesOf(const ir::Value& v, uint64_t in_stride, uint64_t rows, uint64_t cols, std::string& out,
                        uint64_t out_stride, unsigned flip, std::string* why);

/// out[c][r] = in[r][c] for a rows x cols matrix of `width`-byte elements (the scales); `out`
/// holds in.size() bytes.
void transposeElements(const std::string& in, uint64_t rows, uint64_t cols, size_t width, std::string& out);

/// `n` bytes of any value (`zeroed`: zeros), in the keeper's recycled memory
/// (ir::ByteKeeper::buffer) when there is one.
std::string buffer(ir::ByteKeeper* keeper, size_t n, bool zeroed);

/// Give `bytes` back to the keeper, when there is one, for the next buffer().
void recycle(ir::ByteKeeper* keeper, std::string bytes);

/// A new initializer of `t` with `bytes` as its data: for 1 MiB or more, kept out of memory by
/// `keeper` (the model's ir::ByteKeeper) when there is one, so that repacking an LLM's weights
/// holds one tensor at a time; else inline.
ir::Value* addMadeTensor(ir::Graph& graph, ir::ByteKeeper* keeper, const std::string& hint,
                         std::unique_ptr<onnx::TensorProto> t, std::string bytes);

/// Tensors up to this many bytes are repacked whole; larger ones in pieces (transposedTensor).
inline constexpr uint64_t kWholeBytes = uint64_t{32} << 20;

/// A new initializer of `t` (type and dims set) holding the transpose of constant `v`: `v` read
/// as `rows` rows of `cols` elements, `in_stride` bytes apart; the new tensor's row c is v's
/// column c, `out_stride` bytes long (bytes past rows' elements zero). `bits` 4: two elements a
/// byte, each XORed with `flip` (rows and cols even); 8, 16, 32 or 64: whole elements, rows
/// packed (in_stride = cols * width, out_stride = rows * width). Up to kWholeBytes it is made
/// whole (addMadeTensor); a larger one, when `v` is file-backed and there is a keeper, goes to
/// the keeper in pieces of kWholeBytes, each read from the file a piece's columns at a time, so
/// that the memory a repack takes does not grow with the weight (a 2 GiB lm_head too).
/// Null with *why when `v`'s bytes cannot be read.
ir::Value* transposedTensor(ir::Graph& graph, ir::ByteKeeper* keeper, const std::string& hint,
                            std::unique_ptr<onnx::TensorProto> t, const ir::Value& v, uint64_t in_stride, uint64_t rows,
                            uint64_t cols, uint64_t out_stride, int bits, unsigned flip, std::string* why);

/// The bytes of a constant as raw_data would hold them, from any storage (ir::storageBytes).
/// Empty with *why when it cannot. A file's bytes are read into a buffer(keeper, ...).
std::string rawBytes(const ir::Value& v, std::string* why, ir::ByteKeeper* keeper = nullptr);

}  // namespace qconv::nbits
