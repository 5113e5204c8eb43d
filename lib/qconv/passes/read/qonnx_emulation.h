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

/// Whether emulateQonnxQuant can write `q`: a constant integer bit width from 1 to 24 (min/max
/// exact in float32; 1-bit signed is bipolar), a rounding mode QONNX defines, and opset >= 12
/// (Clip bounds as inputs, GreaterOrEqual). False with *why otherwise.
bool canEmulateQonnxQuant(const QonnxQuantAttrs& q, int64_t opset, std::string* why);

/// Replace QONNX Quant `n` by standard float ops computing its documented formula step by step:
///   y = x / scale + zeropt; clamp to [min, max]; round with rounding_mode; (y - zeropt) * scale
/// (an action: canEmulateQonnxQuant said yes).
void emulateQonnxQuant(ir::Graph& graph, ir::Node& n, const QonnxQuantAttrs& q);

/// Whether emulateBipolarQuant can write `n`: an input and a scale, and opset >= 12.
bool canEmulateBipolarQuant(const ir::Node& n, int64_t opset, std::string* why);

/// Replace QONNX BipolarQuant `n` (qonnx binary_quant: y = (x >= 0 ? 1 : -1) * scale) by
///   Where(GreaterOrEqual(x, 0), 1, -1) -> Mul(scale).
void emulateBipolarQuant(ir::Graph& graph, ir::Node& n);

}  // namespace qconv
