// What a pass sees: the model and a context to report through. Passes never print, time or
// dump: the pass manager does (pass_manager.h).
#pragma once

#include <spdlog/logger.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "qconv/ir/ir.h"

namespace qconv {

struct PassOptions {
  /// fix-bias-scale: raise a channel's weight scale until its requantized bias fits int32
  /// (onnxruntime's quantizer does this), instead of refusing. Each raise is an approximation.
  bool raise_weight_scale = false;
  /// Allow the conversions that change numbers on rounding ties (OpenVINO FakeQuantize as
  /// Q/DQ, a multiply-by-factor quantizer as QuantizeLinear): each is listed as approximation.
  bool approximate = false;
  /// shift-types: store 8-bit weights / activations in this type (onnx::TensorProto UINT8 or
  /// INT8), zero points moved by 128; 0 keeps the model's. See shift_types.cpp.
  int32_t weight_type = 0;
  int32_t activation_type = 0;
  /// check-saturation: count the weight pairs onnxruntime's x86 u8 x s8 kernels can saturate
  /// (reads every such weight once: about 0.4 ms per MB).
  bool check_saturation = true;
};

class PassContext {
 public:
  PassContext(spdlog::logger& log, PassOptions options, std::string path)
      : log_(log), options_(options), path_(std::move(path)) {}

  spdlog::logger& log() { return log_; }
  const PassOptions& options() const { return options_; }
  const std::string& path() const { return path_; }

  /// A match a pass declined: "<node>: not fused: <requirement that failed>" (kept and logged).
  void refuse(const ir::Node& n, const std::string& reason);
  /// A change of the model's numbers that the user allowed by a flag: kept, logged, and
  /// written into the output's metadata_props ("qconv.approximations").
  void approximate(const ir::Node& n, const std::string& what);
  /// A construct a pass recognised but leaves as it is, and why (logged at info level).
  void keep(const ir::Node& n, const std::string& reason) { keepLabel(n.label(), reason); }
  void keepLabel(const std::string& label, const std::string& reason);
  /// Something the user should act on though the conversion is exact (logged at warning level,
  /// so -q still shows it): a requested change that could not be made, a runtime hazard.
  void warn(const std::string& label, const std::string& what);
  /// Something a pass did that the user may want to know (logged at debug level).
  void note(const ir::Node& n, const std::string& what);
  /// A dialect node (QONNX, Vitis AI, Quark, OpenVINO) a pass recognised but cannot write as
  /// standard ONNX, and why. If it is still in the graph after the pipeline, qconv refuses the
  /// model with this reason (exit 4) rather than write a model no standard runtime runs.
  void unconverted(const ir::Node& n, const std::string& reason);
  /// The reason recorded for the node labelled `label`, or empty.
  std::string unconvertedReason(const std::string& label) const;
  void count(const std::string& what, int n = 1) { counters_[what] += n; }

  const std::vector<std::string>& refusals() const { return refusals_; }
  const std::vector<std::string>& approximations() const { return approximations_; }
  const std::vector<std::string>& warnings() const { return warnings_; }
  const std::map<std::string, int>& counters() const { return counters_; }

 private:
  spdlog::logger& log_;
  PassOptions options_;
  std::string path_;
  std::vector<std::string> refusals_;
  std::vector<std::string> approximations_;
  std::vector<std::string> warnings_;
  std::map<std::string, int> counters_;
  std::map<std::string, std::string> unconverted_;  // node label -> reason
};

using PassFn = void (*)(ir::Model&, PassContext&);

/// Which --format pipelines a pass belongs to.
enum class PassFormats { Both, QopOnly };

struct PassInfo {
  std::string_view name;
  PassFn run;
  PassFormats formats;
  std::string_view summary;
};

/// Every pass, in pipeline order (passes.def).
const std::vector<PassInfo>& passRegistry();
const PassInfo* findPass(std::string_view name);

// The passes (one file each under lib/qconv/passes/).
#define QCONV_PASS(NAME, FN, FORMATS, SUMMARY) void FN(ir::Model&, PassContext&);
#include "qconv/passes/passes.def"
#undef QCONV_PASS

}  // namespace qconv
