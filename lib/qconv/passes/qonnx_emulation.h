// QONNX Quant: reading its parameters, and its exact emulation with standard float ops (for
// what Q/DQ cannot say).
#pragma once

#include <optional>
#include <string>

#include "qconv/ir/ir.h"

namespace qconv {

/// A QONNX Quant's bit width (when a constant integer) and attributes, read once.
struct QonnxQuantAttrs {
  std::optional<int> bits;
  bool is_signed = true;
  bool narrow = false;
  std::string mode = "ROUND";  // upper case
  /// The integer range [lo, hi] (qonnx min_int / max_int); needs bits.
  int64_t lo() const;
  int64_t hi() const;
};
QonnxQuantAttrs readQonnxQuant(const ir::Node& n);

/// Replace QONNX Quant `n` by standard float ops computing its documented formula step by step:
///   y = x / scale + zeropt; clamp to [min, max]; round with rounding_mode; (y - zeropt) * scale
/// Needs a constant integer bit width from 1 to 24 (min/max exact in float32; 1-bit signed is
/// bipolar) and opset >= 12 (Clip bounds as inputs, GreaterOrEqual). Returns false with *why
/// when it cannot, leaving the graph unchanged.
bool emulateQonnxQuant(ir::Graph& graph, ir::Node& n, const QonnxQuantAttrs& q, int64_t opset, std::string* why);

/// Replace QONNX BipolarQuant `n` (qonnx binary_quant: y = (x >= 0 ? 1 : -1) * scale) by
///   Where(GreaterOrEqual(x, 0), 1, -1) -> Mul(scale). Needs opset >= 12 (GreaterOrEqual).
bool emulateBipolarQuant(ir::Graph& graph, ir::Node& n, int64_t opset, std::string* why);

}  // namespace qconv
