// The pass manager: runs a list of named passes, times each one and (with --dump) prints the
// IR after each. Passes themselves never time, dump or print.
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qconv/passes/pass.h"

namespace qconv::io {
class OpSchemas;
}

namespace qconv {

struct StageTiming {
  std::string name;
  double milliseconds;
};

class PassManager {
 public:
  /// Passes by name, in the order given, with the Always stages (validate, redeclare-opset,
  /// refuse-foreign-ops) the list does not name around them. Throws Error(Usage) for an
  /// unknown name.
  explicit PassManager(const std::vector<std::string>& names);

  const std::vector<const PassInfo*>& passes() const { return passes_; }

  /// Before the first pass that fits a target whose passes read shapes
  /// (TargetProfile::readsInferredShapes), declare the shapes ONNX's inference gives (declare_types.h), with `schemas`:
  /// the stage "infer shapes".
  void inferShapesWith(const io::OpSchemas& schemas) { schemas_ = &schemas; }

  /// Run the passes over `model`; with `dump`, print the IR after each. Before each pass,
  /// throwIfCancelled(cancel) (diag.h). verify's errors in the model before and after are the
  /// stages "verify input" and "verify output": the output's are said (output_errors.h).
  void run(ir::Model& model, PassContext& ctx, std::ostream* dump, const std::atomic<bool>* cancel = nullptr);

  /// Time an I/O stage (parse, emit) alongside the passes.
  template <typename F>
  auto timeStage(const std::string& name, F&& f) -> decltype(f());

  const std::vector<StageTiming>& timings() const { return timings_; }

  /// After each pass run, its name and how many nodes the graph had destroyed by its end
  /// (ir::Graph::nodesDestroyed): which pass removed a node no recorded group took.
  const std::vector<std::pair<std::string_view, size_t>>& removals() const { return removals_; }

 private:
  double now() const;
  std::vector<const PassInfo*> passes_;
  std::vector<StageTiming> timings_;
  std::vector<std::pair<std::string_view, size_t>> removals_;
  const io::OpSchemas* schemas_ = nullptr;
};

template <typename F>
auto PassManager::timeStage(const std::string& name, F&& f) -> decltype(f()) {
  const double start = now();
  struct Record {
    PassManager* pm;
    std::string name;
    double start;
    ~Record() { pm->timings_.push_back({name, pm->now() - start}); }
  } record{this, name, start};
  return f();
}

}  // namespace qconv
