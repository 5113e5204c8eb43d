// Selection helpers shared by the fusion selectors. Each reads the graph only and returns
// what it found, or nullopt with the requirement that failed written to *why.
#pragma once

#include <optional>
#include <string>

#include "qconv/ir/ir.h"
#include "qconv/quant.h"

namespace qconv {

/// An input of a target node that comes through a DequantizeLinear.
struct DequantizedInput {
  ir::Node* dq = nullptr;
  ConstQuant params;
  ir::Value* quantized() const { return dq->input(0); }
};

/// Input `slot` of `target` through a standard DequantizeLinear with constant parameters of
/// int8/uint8 type. `role` names the input in reasons ("x", "weight", ...).
/// With `widen_half`, float16/bfloat16 scales are taken too (readConstQuant).
std::optional<DequantizedInput> dequantizedInput(const ir::Node& target, size_t slot, const std::string& role,
                                                 std::string* why, bool widen_half = false);

/// The QuantizeLinear that takes the target's output, and an absorbed Relu/Clip between them.
struct QuantizedOutput {
  ir::Node* activation = nullptr;  // Relu or Clip, absorbed: redundant under the Q's range
  ir::Node* q = nullptr;
  ConstQuant params;
};

/// The target's single output must have one reader: a QuantizeLinear with constant per-tensor
/// int8/uint8 parameters, or (when allow_activation) a Relu/Clip whose one reader is such a Q
/// and that the Q makes redundant (Q(lo) == qmin and Q(hi) == qmax, exactly).
std::optional<QuantizedOutput> quantizedOutput(const ir::Node& target, bool allow_activation, std::string* why,
                                               bool widen_half = false);

/// A value read by exactly one explicit use, not a graph output, not read by a subgraph.
bool hasSingleReader(const ir::Value* v);

}  // namespace qconv
