// Every value of an emitted model gets its element type declared, and its shape where it can be
// inferred: importers that need them (torch-mlir's, which IREE runs) read the output without
// inferring types of ops they do not know (com.microsoft ones).
//
// The operators' own inference functions (libonnx's schemas) run node by node in graph order,
// each on its inputs' types and the bytes of small constants; for a com.microsoft QOperator op
// qconv knows (passes/common/qop_forms.h), its float op's (QLinearAdd: Add's broadcast, QGemm:
// Gemm's, ...) on the dequantized inputs, typed as its output zero point. A function runs only
// where it is safe (declare_types.cpp, safeToInfer): every input's type well formed, and what
// it indexes by (ranks, attribute lengths, axes) consistent, since ONNX's inference (1.12) crashed on a
// checker-valid Conv whose weight rank is not its input's. Values left out get the element
// type qconv knows, alone. Entries already in the model stay as they are; no entry names a
// value the model does not have.
#pragma once

#include <onnx/onnx_pb.h>

#include "qconv/io/model_io.h"

namespace qconv::io {
class OpSchemas;
}

namespace qconv {

/// Add value_info to `model` for each value of `untyped` (exportModel's: node outputs it declares
/// nothing of): the inferred type and shape, else the element type qconv knows (0: none known,
/// no entry). `schemas` answers the standard operators.
void declareValueTypes(onnx::ModelProto& model, const io::ValueTypes& untyped, const io::OpSchemas& schemas);

/// The same inference over the IR, between passes (the pass manager's stage "infer shapes", for
/// a target whose passes read shapes: trim-padding, reflect-pad-as-gather): each node output the
/// model declares no full shape of, and whose shape the inference gives, is declared
/// (Graph::declareInfo). Declarations compute nothing; the IR is otherwise unchanged. Returns
/// how many values it declared.
size_t declareInferredShapes(ir::Model& model, const io::OpSchemas& schemas);

}  // namespace qconv
