// Where a model says how a tensor is quantized: one QuantSite per (node, quantized operand).
//
//   QuantizeLinear (standard, com.microsoft)    output 0    scale input 1, zero point input 2, axis attribute
//   DequantizeLinear (standard, com.microsoft)  input 0     scale input 1, zero point input 2, axis attribute
//   QLinearConv, QLinearMatMul, com.microsoft   each quantized operand and the output, as the
//   QLinear* and QGemm                          table of qop_forms.h lays them out
//   com.microsoft MatMulNBits                   B (input 1): scales input 2, zero points input 3,
//                                               packed in onnxruntime's blocked layout
//   com.microsoft GatherBlockQuantized          data (input 0): scales input 2, zero points input 3
//
// verify reads them (one representation per tensor, parameter checks), --annotate writes them.
#pragma once

#include <string>
#include <vector>

#include "qconv/ir/ir.h"

namespace qconv::analysis {

struct QuantSite {
  const ir::Node* node = nullptr;
  const ir::Value* tensor = nullptr;      // the quantized tensor
  const ir::Value* scale = nullptr;
  const ir::Value* zero_point = nullptr;  // null when absent
  /// The dimension a per-axis scale runs along, normalized (>= 0); -1 when the site allows only
  /// one scale; kUnknownAxis when the tensor's rank is needed and not known.
  int64_t axis = -1;
  std::string role;                       // "y", "x", "w", ...: for messages
  int64_t block_size = 0;                 // a Q/DQ's block_size (blocked along `axis`), else 0
  /// onnxruntime's packed blocked layout (MatMulNBits, GatherBlockQuantized): the standard
  /// rules of a scale's and zero point's shape and type do not apply.
  bool packed = false;
};

constexpr int64_t kUnknownAxis = -2;

/// The sites of `n` (none for any other op).
std::vector<QuantSite> quantSites(const ir::Node& n);

}  // namespace qconv::analysis
