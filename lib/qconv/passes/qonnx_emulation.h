// Exact emulation of a QONNX Quant with standard float ops, for what Q/DQ cannot say.
#pragma once

#include <string>

#include "qconv/ir/ir.h"

namespace qconv {

/// Replace QONNX Quant `n` by standard float ops computing its documented formula step by step:
///   y = x / scale + zeropt; clamp to [min, max]; round with rounding_mode; (y - zeropt) * scale
/// Needs a constant integer bit width from 1 to 24 (min/max exact in float32; 1-bit signed is
/// bipolar) and opset >= 12 (Clip bounds as inputs, GreaterOrEqual). Returns false with *why
/// when it cannot, leaving the graph unchanged.
bool emulateQonnxQuant(ir::Graph& graph, ir::Node& n, int64_t opset, std::string* why);

}  // namespace qconv
