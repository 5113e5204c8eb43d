// What a pass sees: the model, its options, and one way to say what happened (report()).
// Passes never print, time or dump: the pass manager does (pipeline/pass_manager.h).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "qconv/diagnostics.h"
#include "qconv/ir/ir.h"
#include "qconv/targets/target.h"

namespace qconv {

struct PassOptions {
  /// fuse-qlinear-conv: raise a channel's weight scale until its int32 bias fits (onnxruntime's
  /// quantizer does this), instead of leaving the conv in QDQ form. Each raise is an approximation.
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
  /// redeclare-opset: declare this default-domain opset in the output (0: keep the model's).
  int64_t opset = 0;
  /// fuse-contrib: write onnxruntime's com.microsoft quantized ops (QLinearAdd, QGemm, ...) for
  /// the groups standard ONNX has no quantized op for. Off: the output stays standard-only.
  bool contrib = false;
  /// The output format promises one step, not the same bits (--format qop): a quantizer x * M
  /// may become QuantizeLinear(x, 1/M) without --approximate, counted in the summary.
  bool one_step = false;
  /// --target: the runtime the output is for (targets/target.h); null: unrestricted().
  const TargetProfile* target = nullptr;
};

/// The one vocabulary of everything a pass says. Each line is "<subject>: <text>", where the
/// subject is a node's label (or the file, for the whole model). Printed at the level in
/// brackets (docs/cli.md, "Messages"): a warning always, a note with -v, a debug line with -vv;
/// everything but Detail also goes into --report.
enum class Report {
  Refused,        // a selector declined a node; it stays as it is, still correct        (note)
  Unconvertible,  // a selector declined a node no standard runtime runs: if it is still in the
                  // graph when the pipeline ends, refuse-foreign-ops refuses the model with
                  // this text (exit 4)                                                  (note)
  Done,           // what an action did that the user may want to know                   (note)
  Detail,         // what only a developer wants to know                                 (debug)
  Approximation,  // a change of numbers a flag allowed: also in the output's metadata  (warning)
  Warning,        // something to act on though the conversion is exact                  (warning)
  Advisory,       // one node's part of a Warning the pass says once for the model, grouped
                  // ("61 weight pairs in 3 nodes ..."): counted in the summary          (note)
};

/// "refused", "unconvertible", "done", "detail", "approximation", "warning", "advisory": the
/// kind's name in --report and in its diagnostic record (diagnostics.h).
const char* reportKindName(Report kind);

/// One thing a pass said, kept for the report (--report): which pass, about what, what.
struct Said {
  Report kind;
  std::string pass;
  std::string subject;  // a node's label, a value's name, or the file
  std::string text;
};

/// A group an action rewrote (applyRule records it): the node the selector was asked at, its
/// operator, the operators of the nodes the action made that are still in the graph, and
/// whether that node is still there (move-on-int8 keeps a MaxPool and removes its Q/DQ).
struct Rewritten {
  std::string pass;
  std::string node;
  std::string op;
  std::vector<std::string> became;
  bool kept = false;
  /// The labels of the nodes the action removed besides `node`, which were there before it ran
  /// (the DequantizeLinears and the QuantizeLinear a fusion takes in), in the order they went.
  std::vector<std::string> absorbed;
  /// The same nodes by Node::ordinal (the IR's identity, which labels are not: a made node's
  /// label is a hint until emit): the root, the nodes made that are still there, those absorbed.
  /// The report's per-node trace (pipeline/node_trace.h) follows a node through groups by them.
  size_t root_ordinal = 0;
  std::vector<size_t> made_ordinals;
  std::vector<size_t> absorbed_ordinals;
};

/// Scales (with whether negative values were allowed) whose values were all found valid.
using ValidScales = std::set<std::pair<const ir::Value*, bool>>;

class PassContext {
 public:
  PassContext(const Diagnostics& diagnostics, PassOptions options, std::string path)
      : diagnostics_(diagnostics), options_(options), path_(std::move(path)) {}

  const PassOptions& options() const { return options_; }
  /// The profile of the runtime the output is for (unrestricted() without --target).
  const TargetProfile& target() const { return options_.target ? *options_.target : unrestricted(); }
  /// The input file, the subject of whole-model diagnostics.
  const std::string& path() const { return path_; }

  void report(Report kind, const std::string& subject, const std::string& text);
  void report(Report kind, const ir::Node& n, const std::string& text) { report(kind, n.label(), text); }
  void count(const std::string& what, int n = 1) { counters_[what] += n; }
  /// The pass now running (the pass manager sets it), named in what is recorded.
  void setPass(std::string_view name) { pass_ = name; }
  const std::string& pass() const { return pass_; }
  void rewrote(Rewritten group) { rewritten_.push_back(std::move(group)); }
  /// Everything reported but Detail, in order; every group rewritten, in order.
  const std::vector<Said>& said() const { return said_; }
  const std::vector<Rewritten>& rewritten() const { return rewritten_; }

  /// The lines reported ("<subject>: <text>") of these kinds, in order: made from said().
  std::vector<std::string> reports(std::initializer_list<Report> kinds) const;
  std::vector<std::string> reports(Report kind) const { return reports({kind}); }
  std::vector<std::string> refusals() const { return reports({Report::Refused}); }
  std::vector<std::string> approximations() const { return reports({Report::Approximation}); }
  /// The Warning and Advisory lines, in order (a grouped warning's parts come before it).
  std::vector<std::string> warnings() const { return reports({Report::Warning, Report::Advisory}); }
  /// How many Advisory lines were said: the summary line's count.
  size_t advisories() const;
  const std::map<std::string, int>& counters() const { return counters_; }
  /// The Unconvertible text reported for the node labelled `label`, or empty.
  std::string unconvertibleReason(const std::string& label) const;

  /// ONNX's shape inference over the IR as the pass manager runs it before the first --target pass
  /// (declare_types.h), offered by the pass manager to a pass that folds what a shape it declares
  /// makes constant (fold-shapes): declares each shape now inferable, returns how many. Unset
  /// (returns 0) where the pass manager ran no such inference.
  using ShapeInference = std::function<size_t()>;
  void offerShapeInference(ShapeInference infer) { infer_shapes_ = std::move(infer); }
  size_t inferShapes() const { return infer_shapes_ ? infer_shapes_() : 0; }

  /// Scale values `qconv verify`'s rules found valid in the input just now, each with whether a
  /// negative one was allowed (a blocked DequantizeLinear's): the pass manager offers them to its
  /// first pass only (validate, which then reads none of them again: an LLM's blocked scales are
  /// hundreds of MiB), as any pass may change them.
  void offerValidScales(const ValidScales* valid) { valid_scales_ = valid; }
  bool scaleKnownValid(const ir::Value* scale, bool negative_ok) const {
    return valid_scales_ && valid_scales_->count({scale, negative_ok});
  }

 private:
  const Diagnostics& diagnostics_;
  PassOptions options_;
  std::string path_;
  std::map<std::string, int> counters_;
  std::map<std::string, std::string> unconvertible_;  // node label -> text
  std::string pass_;
  std::vector<Said> said_;
  std::vector<Rewritten> rewritten_;
  ShapeInference infer_shapes_;
  const ValidScales* valid_scales_ = nullptr;
};

using PassFn = void (*)(ir::Model&, PassContext&);

/// Which pipelines a pass belongs to: every one (a stage the pass manager adds even around a
/// --passes list), both formats' default pipelines, --format qop's only or --format qdq's only.
enum class PassFormats { Always, Both, QopOnly, QdqOnly };

/// The phase a pass belongs to, which is the folder of passes/ its file is in
/// (docs/architecture.md, "The phases").
enum class PassPhase { Read, Canonical, Qop, Target };

/// "read", "canonicalize", "write QOp", "fit a target".
std::string_view phaseName(PassPhase phase);

struct PassInfo {
  std::string_view name;
  PassFn run;
  PassFormats formats;
  PassPhase phase;
  std::string_view summary;
};

/// Every pass, in pipeline order (passes.def).
const std::vector<PassInfo>& passRegistry();
const PassInfo* findPass(std::string_view name);

// The passes (one file each, in a phase folder of lib/qconv/passes/).
#define QCONV_PASS(NAME, FN, FORMATS, PHASE, SUMMARY) void FN(ir::Model&, PassContext&);
#include "qconv/passes/passes.def"
#undef QCONV_PASS

}  // namespace qconv
