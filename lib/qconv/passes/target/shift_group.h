// The unit shift-types moves from one 8-bit type to the other, and its selector.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "qconv/ir/ir.h"

namespace qconv {

/// The 8-bit tensors connected through data-movement ops (quant_slots.h), with every zero
/// point that describes them.
struct ShiftGroup {
  std::vector<ir::Value*> values;                      // each once
  std::vector<std::pair<ir::Node*, int>> zero_points;  // (node, zero point input slot)
  std::vector<ir::Node*> quantizers;                   // QuantizeLinear nodes writing a value
  std::vector<ir::Use> foreign_readers;  // reads with no zero point (a Cast, a contrib op): get the old type back
  std::vector<ir::Value*> foreign_written;  // written by such an op: moved right after it
  int32_t type = 0;                                    // onnx::TensorProto INT8 or UINT8; 0 unknown
  bool weight = true;  // every source is a constant initializer (else an activation)
  bool eight_bit = true;  // false: some tensor is of another type (an int32 bias): not a group to shift
  std::string why;     // the first requirement that failed; empty when the group can shift
};

/// The group around `seed`. Always complete (so its kind and type are known), with `why` set
/// when it cannot shift. Every value it holds is added to `seen`. Conditions: shift_types.cpp.
ShiftGroup selectShiftGroup(ir::Value* seed, std::set<const ir::Value*>& seen);

}  // namespace qconv
