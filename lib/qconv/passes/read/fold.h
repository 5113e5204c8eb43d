// The folding sweep shared by fold-constants and fold-producers (contract: fold_producers.cpp).
#pragma once

#include "qconv/ir/ir.h"
#include "qconv/passes/pass.h"

namespace qconv {

/// Fold every node `accept` takes that meets fold-producers' conditions (1)-(5).
void foldNodes(ir::Model& model, PassContext& ctx, bool (*accept)(const ir::Node&));

}  // namespace qconv
