// Helpers of lower-integer-ops that read or reshape one integer conv (Aidge's exports).
#pragma once

#include <optional>
#include <vector>

#include "qconv/ir/ir.h"

namespace qconv {

/// True unless `n` is a Pad that is not constant mode with value 0 (which commutes with a
/// positive scale and zero point 0).
bool padsWithZero(const ir::Node& n);

/// The largest |partial sum| an integer Conv/Gemm/MatMul can reach on inputs of magnitude
/// <= xmax: per output channel, sum |w| * xmax + |b|. nullopt when the weights cannot be read.
std::optional<double> accumulatorBound(const ir::Node& n, double xmax);

/// Aidge writes a padded conv as Pad -> Conv: a constant-0 Pad read only by the Conv folds into
/// the Conv's pads (exact with zero point 0; it lets DQ -> Conv fuse). Pads on N and C must be 0.
struct PadFold {
  ir::Value* input;           // the Pad's input: the Conv reads it instead
  std::vector<int64_t> pads;  // the Conv's pads attribute with the Pad's added
};
std::optional<PadFold> padFold(const ir::Node& conv);
void applyPadFold(ir::Graph& g, ir::Node& conv, const PadFold& fold);

}  // namespace qconv
