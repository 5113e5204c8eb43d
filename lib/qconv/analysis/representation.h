// One representation per tensor (seed 004, requirement 5): every op that reads or writes a
// quantized tensor, and every tensor the data-movement ops (quant_slots.h: movesData) make of
// it, uses one scale and zero point; a change of them is an explicit DequantizeLinear ->
// QuantizeLinear, whose two sides are two tensors.
#pragma once

#include <string>
#include <vector>

#include "qconv/analysis/quant_sites.h"

namespace qconv::analysis {

/// Whether `a` and `b` quantize alike: the same scale and zero point (the same tensors, or
/// constants with the same type and values; an absent zero point is uint8 0) and, with several
/// scales, the same axis. Parameters that are not constants and not the same tensor are taken
/// as alike (nothing says they differ). Else false, with *why saying what differs.
bool sameRepresentation(const QuantSite& a, const QuantSite& b, std::string* why);

struct Disagreement {
  QuantSite first;   // the first site of the tensor (or of its moved copies), in node order
  QuantSite second;  // a later one that disagrees with it
  std::string message;
};

/// Each site that disagrees with the first site of its tensor (one per tensor and node).
std::vector<Disagreement> disagreements(const ir::Graph& graph, const std::vector<QuantSite>& sites);

}  // namespace qconv::analysis
