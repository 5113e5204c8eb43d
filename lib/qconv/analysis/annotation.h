// GraphProto.quantization_annotation (ONNX IR 5; seed 004, goal 3): per tensor, the names of
// the tensors holding its scale and zero point:
//   { tensor_name: "y_q", quant_parameter_tensor_names: { SCALE_TENSOR: "y_s", ZERO_POINT_TENSOR: "y_zp" } }
// verify checks the model's against its graph; convert --annotate writes one for every
// quantized tensor of the output.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

#include "qconv/analysis/quant_sites.h"

namespace qconv::analysis {

constexpr const char* kScaleKey = "SCALE_TENSOR";
constexpr const char* kZeroPointKey = "ZERO_POINT_TENSOR";

struct AnnotationProblem {
  std::string node;  // "quantization_annotation", or the node whose site disagrees
  std::string tensor;
  std::string message;
};

/// What is wrong with model.shell's annotations, given the graph's `sites` (quant_sites.h):
/// a tensor or parameter name that names nothing, no SCALE_TENSOR, a key ONNX does not define,
/// parameters other than those the graph's ops use for the tensor.
std::vector<AnnotationProblem> annotationProblems(const ir::Model& model, const std::vector<QuantSite>& sites);

/// Every quantized tensor of `graph` with the scale and zero point its first site uses, in node
/// order: what --annotate writes (read the names after export: emit names the values).
struct TensorQuant {
  const ir::Value* tensor;
  const ir::Value* scale;
  const ir::Value* zero_point;
};
std::vector<TensorQuant> quantizedTensors(const ir::Graph& graph);

/// Replace the annotations of `out`'s graph by one per entry of `tensors` (their names as now).
void writeAnnotations(onnx::ModelProto& out, const std::vector<TensorQuant>& tensors);

/// Keep `out`'s annotations (those the input had, of tensors still there) true to its graph:
/// one of a tensor in `tensors` gets that tensor's parameters as now; another is kept when the
/// tensors it names are still in the graph, and dropped otherwise.
void refreshAnnotations(onnx::ModelProto& out, const std::vector<TensorQuant>& tensors);

}  // namespace qconv::analysis
