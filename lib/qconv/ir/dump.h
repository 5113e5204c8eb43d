// A readable text form of the IR, printed after each pass by --dump.
#pragma once

#include <ostream>

#include "qconv/ir/ir.h"

namespace qconv::ir {

void dump(const Graph& graph, std::ostream& os);

}  // namespace qconv::ir
