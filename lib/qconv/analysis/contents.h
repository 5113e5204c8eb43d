// What a model holds: its quantization dialects (with their operators) and its quantized
// tensors. One reading, shared by convert (its --report and log), inspect and verify, so the
// three never disagree about a model (issue 28).
//
//   dialect                          its operators
//   standard QDQ                     QuantizeLinear, DequantizeLinear (ai.onnx)
//   standard QOp                     QLinearConv, QLinearMatMul, ConvInteger, MatMulInteger,
//                                    DynamicQuantizeLinear
//   onnxruntime com.microsoft        QLinear*, QGemm, QuantizeLinear, DequantizeLinear,
//                                    DynamicQuantize*, *Integer*, QAttention, MatMulNBits,
//                                    MatMulBnb4, GatherBlockQuantized
//   QONNX, Vitis AI, AMD Quark,      any operator of their domains (quant.h, foreignQuantDialect)
//   OpenVINO FakeQuantize
//   scaling factors (Aidge)          Round after Mul or Div
//
// A quantized tensor is one analysis::quantSites names; the first site of each is kept.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "qconv/analysis/quant_sites.h"
#include "qconv/ir/ir.h"

namespace qconv::analysis {

struct Contents {
  std::map<std::string, std::map<std::string, int>> dialects;  // dialect -> "domain::op" -> count
  std::map<std::string, int> ops;                              // every operator -> count
  std::vector<QuantSite> tensors;                              // one site per quantized tensor, in node order
  /// The dialects' names, sorted.
  std::vector<std::string> dialectNames() const;
  /// Nothing in the graph is quantized: no quantized tensor and no dialect op (kNothingQuantized).
  bool quantizesNothing() const { return tensors.empty() && dialects.empty(); }
};

/// What convert's warning and verify's no-quantization finding say of such a model.
inline constexpr const char* kNothingQuantized =
    "nothing in this model is quantized (no QuantizeLinear, DequantizeLinear, QLinear or integer op, no producer's "
    "quantizer)";

/// The quantization dialect a node belongs to, or null.
const char* dialectOf(const ir::Node& n);

/// An operator's name as inspect and the report show it: "domain::op", or "op" in ai.onnx.
std::string opName(const ir::Node& n);

/// What the main graph of `model` holds.
Contents contentsOf(const ir::Model& model);

}  // namespace qconv::analysis
