// qconv verify: static checks of a quantized model before it goes to a runtime or a vendor
// (seed 004, requirement 5). Each finding names a node and a tensor and has a stable kind
// (docs/cli.md, "qconv verify"):
//
//   scale-invalid       a scale that is not finite, not > 0, or subnormal
//   zero-point-range    a zero point outside its type's range, or not of an integer type
//   per-axis            scale and zero point lengths differ; several scales where one is allowed;
//                       an axis outside the tensor's rank; a length other than that dimension's
//   representation      a tensor two ops read or write with different scale or zero point (the
//                       data-movement ops between them carry it: Reshape, MaxPool, Concat, ...);
//                       an int32 bias QOp nodes read at different x_scale * w_scale (shared_bias.h)
//   bias-scale          a Conv/Gemm bias dequantized at another scale than x_scale * w_scale, or
//                       at a zero point other than 0
//   bias-overflow       a float bias of a quantized Conv/Gemm that does not fit int32 at
//                       x_scale * w_scale
//   saturation          weight pairs onnxruntime's x86 u8 x s8 kernel can saturate (check-saturation):
//                       an advisory without a target, a finding for --target onnxruntime, and not
//                       said for a target whose runtime has no such kernel
//   asymmetric          with `symmetric`: an int8 zero point other than 0, or a uint8 tensor
//   target              with a target: a node that runtime cannot run (check-target's reason)
//   annotation          a quantization_annotation that names no tensor, lacks SCALE_TENSOR, names
//                       a parameter tensor that does not exist, or disagrees with the graph
//
//   no-quantization     nothing in the model is quantized (pipeline/verify.cpp says it)
//
// Each kind has a severity (findingKinds(), docs/cli.md): an error is a model that is invalid or
// computes wrong numbers on the target; a warning a risk on some hosts or a form some runtimes
// refuse; a note advice. saturation is a note without a target and a warning with one.
//
// Only the main graph is checked (subgraphs are not). Reads the model, never changes it.
#pragma once


#include <string>
#include <string_view>
#include <vector>

#include "qconv/ir/ir.h"
#include "qconv/passes/pass.h"
#include "qconv/targets/target.h"

namespace qconv::analysis {

enum class Severity { Note, Warning, Error };

/// "note", "warning", "error".
const char* severityName(Severity s);

struct FindingKind {
  const char* name;
  Severity severity;
};

/// Every kind verify says, with its severity (saturation's with a target; a note without).
const std::vector<FindingKind>& findingKinds();
const FindingKind* findKind(std::string_view name);

struct Finding {
  std::string kind;
  std::string node;    // the node's label
  std::string tensor;  // the tensor it is about
  std::string message;
  Severity severity = Severity::Error;
};

struct VerifyOptions {
  bool symmetric = false;  // also name what a runtime taking int8 at zero point 0 only refuses
  const TargetProfile* target = nullptr;  // the runtime the model is for (null: advisories for all)
  bool saturation = true;  // check-saturation's findings (never errors; it reads every u8 x s8 weight)
  ValidScales* valid_scales = nullptr;  // when set, each scale whose values all passed (PassContext)
};

std::vector<Finding> verifyModel(ir::Model& model, const VerifyOptions& options);

}  // namespace qconv::analysis
