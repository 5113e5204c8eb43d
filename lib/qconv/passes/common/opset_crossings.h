// Operator versions whose signature changed, crossed where the node keeps its meaning.
//
// redeclare-opset refuses a node whose operator changed between the two opsets (opset_history.h,
// condition 1), except across these versions, where the node keeps its meaning when it meets the
// condition and, once the opset is declared, gets the rewrite written beside it:
//   1. Softmax, LogSoftmax and Hardmax at 13 (which changed what axis means: the input coerced to
//      2-D before, one axis after): on the last axis of an input of known rank. Rewrite: the axis
//      written out (the two versions' defaults differ: 1 before, -1 after).
//   2. BatchNormalization at 14 (which removed the training outputs saved_mean and saved_var):
//      the node uses output Y only (inference). Rewrite: none.
//   3. A version that moved an attribute to input 1 (axes: Squeeze, Unsqueeze and ReduceSum at
//      13, the other Reduce ops at 18; split: Split at 13), raising the opset. Rewrite: the values
//      as a constant int64 input (none given: none, the default of both).
//   4. Resize at 13 (which made roi and scales optional, takes one of scales and sizes, and
//      removed coordinate_transformation_mode tf_half_pixel_for_nn): not in that mode, and no
//      sizes beside a scales input other than a constant empty tensor. Rewrite: raising, such an
//      empty scales input is dropped; lowering, an absent roi or scales becomes the empty float
//      tensor version 11 requires.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "qconv/ir/ir.h"

namespace qconv {

/// A version of an operator whose signature changed (`changed`: how, as opset_history.inc says).
struct Crossing {
  std::string_view op;
  int64_t since;
  std::string_view changed;
};

/// For node `n` of a model declaring opset `declared`, crossing `c`: nullopt when no condition
/// above covers `c`; else why `n` does not keep its meaning across it, empty when it does.
std::optional<std::string> crossingBlocker(const ir::Node& n, const Crossing& c, int64_t declared);

/// Rewrite `n`, of a model declaring opset `from`, to mean the same after crossing `c` (one
/// crossingBlocker gave "" for).
void rewriteCrossing(ir::Graph& graph, ir::Node& n, const Crossing& c, int64_t from);

}  // namespace qconv
