// What convert says of the errors `qconv verify` reports in its output (issue 47): qconv keeps
// the input's math, so an error of the input's (one int32 bias two QOp nodes read at two scales,
// a subnormal scale) stays in the output. Such an output says so: one warning with the count per
// kind and the nodes, each finding a note (-v). An error in the output the input does not have is
// qconv's own, and the warning says that too. Errors only, with no target: what the target cannot
// run is check-target's and check-ops' refusal, not this.
#pragma once

#include <vector>

#include "qconv/analysis/verify.h"
#include "qconv/ir/ir.h"
#include "qconv/passes/pass.h"

namespace qconv {

/// verify's errors in `model` as it is (no target).
std::vector<analysis::Finding> verifyErrors(ir::Model& model, ValidScales* valid_scales = nullptr);

/// Says (ctx: a Warning for the file, an Advisory per finding) the errors of `output` (the model
/// after the passes), as kept from `input_errors` (the input's, by verifyErrors) or new.
void sayOutputErrors(const std::vector<analysis::Finding>& input_errors, ir::Model& output, PassContext& ctx);

}  // namespace qconv
