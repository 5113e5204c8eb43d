// One int32 bias that several QOperator nodes read (QLinearConv, QLinearConvTranspose, QGemm:
// qop_forms.h's kBias operand), each at its own x_scale * w_scale (times QGemm's alpha).
// onnxruntime's quantize_static quantizes a float bias several nodes share once, for the first
// of them (onnx_quantizer.py, quantize_bias_static: "bias already in quantization map"), and the
// others read the same integers at their own scales: each of them computes another bias than
// the float model's (an unrolled LSTM's cells share theirs). verify names each such reader
// (kind representation), convert says the output carries it, and with --approximate
// requantize-shared-bias gives each reader the first one's bias at its own scale.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "qconv/ir/ir.h"

namespace qconv {

struct BiasRead {
  ir::Node* node = nullptr;
  size_t slot = 0;           // the bias's input slot
  std::vector<float> scale;  // one value, or one per channel
};

struct SharedBias {
  ir::Value* bias = nullptr;   // the int32 constant
  std::vector<BiasRead> reads; // in node order; reads[0]'s scale is the one it was quantized for
};

/// The scale the QOp node `n` reads its int32 bias at, and the bias's slot: nullopt when `n`
/// has no bias or its scales are not constant and positive.
std::optional<BiasRead> biasReadOf(ir::Node& n);

/// Each constant int32 bias QOp nodes read at more than one scale (a reader whose scale equals
/// the first's is not listed).
std::vector<SharedBias> sharedBiases(ir::Graph& graph);

/// "0.000301956 (scalar)" or "per channel, 0.000301956 .. 0.0015" for a message.
std::string biasScaleText(const std::vector<float>& scale);

}  // namespace qconv
