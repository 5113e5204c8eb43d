// Model I/O: the parse and emit stages of the pipeline, and the files around them.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

#include "qconv/ir/ir.h"

namespace qconv::io {

/// Read and parse `path` (memory-mapped, never modified). Throws Error(BadInput) naming the
/// file when it cannot be read or is not an ONNX model.
onnx::ModelProto readModelFile(const std::string& path);

/// parse: ModelProto -> IR. Tensor bytes move, they are not copied. Throws Error(BadInput) for
/// a broken graph (dangling or duplicate names, nodes out of order), Error(Unsupported) for a
/// construct qconv does not convert yet (external data), each naming file and node.
ir::Model importModel(onnx::ModelProto proto, const std::string& path);

/// emit: IR -> ModelProto. Consumes the model's tensors and protos. Names generated values,
/// sets opset_import and ir_version to what the emitted ops need.
onnx::ModelProto exportModel(ir::Model& model);

/// Whether any main-graph initializer is stored as external data.
bool hasExternalData(const onnx::ModelProto& model);

/// Run the ONNX checker where Debian's libonnx 1.12 can (ir_version <= 8). Returns an empty
/// string when the model passes or is too new for this checker, else the checker's message.
std::string checkModel(const onnx::ModelProto& model);

/// Serialize to a temporary file beside `path`, then rename over it: never a partial file.
/// Throws Error(Output) naming the file.
void writeModelAtomically(const onnx::ModelProto& model, const std::string& path);

/// Minimum IR version that a default-domain opset needs.
int64_t minIrVersionForOpset(int64_t opset);

}  // namespace qconv::io
