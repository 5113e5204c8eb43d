// Every value of an emitted model gets its element type declared, and its shape where it can be
// inferred: importers that need them (torch-mlir's, which IREE runs) read the output without
// inferring types of ops they do not know (com.microsoft ones).
//
// ONNX's shape inference runs over a copy of the graph without the large tensors' bytes, with
// the standard operators' schemas, and for each com.microsoft QOperator op qconv knows
// (passes/common/qop_forms.h) a schema whose inference is its float op's (QLinearAdd: Add's
// broadcast, QGemm: Gemm's, ...) on the dequantized inputs, typed as its output zero point.
// Values the inference leaves out get the element type qconv knows, alone. Entries already in
// the model stay as they are; no entry names a value the model does not have.
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

}  // namespace qconv
