// Helpers of lower-integer-ops that read or reshape one integer conv (Aidge's exports).
#pragma once

#include <optional>

#include "qconv/ir/ir.h"

namespace qconv {

/// True unless `n` is a Pad that is not constant mode with value 0 (which commutes with a
/// positive scale and zero point 0).
bool padsWithZero(const ir::Node& n);

/// The largest |partial sum| an integer Conv/Gemm/MatMul can reach on inputs of magnitude
/// <= xmax: per output channel, sum |w| * xmax + |b|. nullopt when the weights cannot be read.
std::optional<double> accumulatorBound(const ir::Node& n, double xmax);

/// Aidge writes a padded conv as Pad -> Conv: fold a constant-0 Pad read only by the Conv into
/// the Conv's pads (exact with zero point 0; it lets DQ -> Conv fuse). Pads on N and C must be 0;
/// otherwise nothing changes.
void foldPadIntoConv(ir::Graph& g, ir::Node& conv);

}  // namespace qconv
