// Where Aidge 0.10.1 fails on a computed shape (measured on PP-OCR's recognizer, issue 47): its
// forward_dims forwards no dims past a Reshape whose shape the model computes, so every tensor
// after it has none (and no data format), and a Concat that joins such a tensor with one whose
// dims it forwards fails ("Every input must have the same DataFormat"). verify --target aidge
// names each such Concat; fold-shapes computes what shapes it can and refuses the Concats left.
#pragma once

#include <vector>

#include <string>

#include "qconv/ir/ir.h"
#include "qconv/targets/target.h"

namespace qconv {

struct ComputedDimsJoin {
  const ir::Node* concat;   // the Concat
  const ir::Node* reshape;  // the Reshape to a computed shape one of its inputs comes after
};

/// Each Concat joining a tensor computed after a Reshape to a shape that is not a constant with
/// one that is not (constants aside), in node order.
std::vector<ComputedDimsJoin> computedDimsJoins(const ir::Graph& graph);

/// What convert's refusal and verify's finding say of `j` for target `t`.
std::string computedDimsWhy(const ComputedDimsJoin& j, const TargetProfile& t);

}  // namespace qconv
