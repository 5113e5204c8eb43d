// validate: what the ONNX checker would catch and more, on the IR, before any pass runs.
// Debian's checker stops at IR 8, so qconv checks what its passes rely on itself:
//   1. the default-domain opset is one qconv knows (<= the newest in opset_history.inc),
//      else exit 4;
//   2. every default-domain node names an operator that exists at that opset;
//   3. every QuantizeLinear / DequantizeLinear (ai.onnx, com.microsoft) with constant
//      parameters has: finite non-zero scales (a negative one is exit 4: qconv requires
//      positive scales); a zero point of an integer or float8 type (not float), 0 for int32;
//      as many zero points as scales; an axis inside the input's rank; a per-axis length
//      equal to that axis' dimension when it is known.
// Anything else is exit 3 naming the file and the node.
#pragma once

#include <string>

#include "qconv/ir/ir.h"

namespace qconv {

/// Throws Error(BadInput) or Error(Unsupported) for the first problem found.
void validateModel(const ir::Model& model, const std::string& path);

}  // namespace qconv
