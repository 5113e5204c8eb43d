// fold-constants: Constant nodes become initializers, before any dialect pass reads them.
//
// Before:
//   Constant(value=T) -> il -> FakeQuantize(x, il, ih, ...)      (NNCF's torch export)
// After:
//   il is an initializer; the Constant node is gone.
//
// Dialect passes read quantization parameters from constant initializers only; exporters
// (torch.onnx among them) write them as Constant nodes. A Constant folds when:
//   1. it is a default-domain Constant holding a `value` tensor, value_float(s) or value_int(s);
//   2. its output is not a graph output and is not read by a subgraph.
// fold-producers later folds what is computed from these.
#include "qconv/passes/read/fold.h"

namespace qconv {

void foldConstants(ir::Model& model, PassContext& ctx) {
  foldNodes(model, ctx, [](const ir::Node& n) { return n.opIs("Constant"); });
}

}  // namespace qconv
