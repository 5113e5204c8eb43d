// Where the standard quantized ops read and write 8-bit integers, and which ops only move them.
// Shared by shift-types (what shifts together) and check-saturation (what a kernel multiplies).
#pragma once

#include <vector>

#include "qconv/ir/ir.h"

namespace qconv {

/// A quantized-data operand of a node, and the input slot that holds its zero point.
struct QuantSlot {
  bool output = false;  // an output slot (else an input slot)
  int data = 0;
  int zero_point = 0;
};

/// The quantized-data operands of `n`, one line per operand (empty for any other op):
///   QuantizeLinear     output 0      zero point input 2
///   DequantizeLinear   input 0       zero point input 2
///   QLinearConv        input 0 (x)   zero point input 2
///                      input 3 (w)   zero point input 5
///                      output 0 (y)  zero point input 7
///   QLinearMatMul      input 0 (a) / 2, input 3 (b) / 5, output 0 (y) / 7
///   ConvInteger        input 0 (x) / 2, input 1 (w) / 3
///   MatMulInteger      input 0 (A) / 2, input 1 (B) / 3
std::vector<QuantSlot> quantSlots(const ir::Node& n);
/// Whether input `index` of `n` is the zero point of one of its quantized-data operands.
bool isZeroPointInput(const ir::Node& n, int index);

/// Ops that only move, select, copy or take the max of their data elements (Reshape, Flatten,
/// Transpose, Squeeze, Unsqueeze, Identity, Slice, Gather, Split, Concat, Tile, Expand,
/// DepthToSpace, SpaceToDepth, MaxPool, Resize in nearest mode): the same on either 8-bit type
/// after a shift by 128.
bool movesData(const ir::Node& n);
/// movesData, or an op that computes new values from its 8-bit input's integers as they are
/// (Resize in other modes, Pad, Upsample; a QOp model keeps them on the 8-bit tensor): an op
/// whose 8-bit input's type a runtime must have a kernel for (check-target).
bool computesOnData(const ir::Node& n);
/// Their data inputs (Concat: all; else input 0) and data outputs (Split: all; else output 0).
std::vector<int> dataInputs(const ir::Node& n);
std::vector<int> dataOutputs(const ir::Node& n);

}  // namespace qconv
