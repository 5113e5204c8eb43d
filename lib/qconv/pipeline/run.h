// The library's entry point for one conversion: what the qconv CLI calls.
#pragma once

#include <atomic>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "qconv/analysis/verify.h"
#include "qconv/diagnostics.h"

namespace qconv {

enum class Format { Qop, Qdq };

struct ConvertOptions {
  std::string input;
  std::string output;
  /// A batch (--out-dir DIR IN...): each input converted to DIR/<its file name>, in one process.
  std::vector<std::string> inputs;
  std::string out_dir;
  int jobs = 1;                     // conversions at once in a batch (-j)
  std::string report;               // --report FILE.json|FILE.html: what was done (docs/cli.md), also on failure
  /// --node-data FILE.json: each node of the output's outcome, as Model Explorer's node data
  /// (docs/cli.md); a lone conversion's only
  std::string node_data;
  Format format = Format::Qop;
  bool format_given = true;         // --format was given; else the target's default (run() resolves it)
  /// --target NAME: write the form that runtime computes exactly (targets/target.h); empty: none.
  std::string target;
  /// Pass names to run instead of the format's pipeline (--passes=a,b).
  std::vector<std::string> passes;
  bool dump = false;                // print the IR after every pass on `out`
  bool time_passes = false;         // print each stage's time on `err`
  bool raise_weight_scale = false;  // see PassOptions
  bool approximate = false;         // see PassOptions
  bool annotate = false;            // write quantization_annotation for every quantized tensor of the output
  bool inline_data = false;          // write every tensor into the model, even if the input had external data
  bool fsync = false;               // flush the output to disk before renaming it into place (WriteOptions::durable)
  int32_t weight_type = 0;          // store 8-bit weights as this onnx::TensorProto type (UINT8/INT8); 0: keep
  int32_t activation_type = 0;      // the same for activations; see shift_types.cpp
  bool check_saturation = true;     // warn where onnxruntime's x86 u8 x s8 kernels can saturate
  bool contrib = false;             // --format qop: com.microsoft ops for the other groups; see PassOptions
  int64_t opset = 0;                // declare this default-domain opset (0: keep the model's); see passes/redeclare_opset.cpp
  /// exit 7 (ExitCode::Unchanged), writing nothing, when nothing in the input is quantized or no
  /// group was rewritten
  bool require_change = false;
  /// a progress line on `err` (a terminal: the CLI decides) for a conversion past about a second
  bool progress = false;
  int progress_delay_ms = 1000;     // shown only past this
  int verbosity = 1;                // 0 (-q) errors; 1 warnings and one summary line; 2 (-v) notes; 3 (-vv) debug
  /// The Python API's in-memory ends (null: none; a lone conversion only). input_bytes: the
  /// serialized input model, parsed instead of reading the file `input`, which then only names
  /// it in messages (io::parseModel); output_bytes: receives the converted model, serialized with
  /// every tensor inline (io::serializeModel), instead of the file `output` being written.
  const std::string_view* input_bytes = nullptr;
  std::string* output_bytes = nullptr;
  /// Receives the report's JSON (what --report writes, compact), --report given or not.
  std::string* report_json = nullptr;
  /// The process exits once run() returns (the CLI): a lone conversion leaves the model's
  /// memory, tens of thousands of protobuf pieces for a large graph, to the exit instead of
  /// freeing it piece by piece (compilers do the same: clang's -disable-free). Files,
  /// descriptors, mappings and temporaries are released as ever; a batch frees each model.
  bool exiting_after = false;
  /// The library's caller cancels by setting this (the Python binding, on Ctrl-C): it is read
  /// between passes, between the pieces the write writes, and before the commit; a cancelled
  /// conversion (each unfinished item of a batch) commits nothing, leaves no temporary and
  /// returns ExitCode::Cancelled. One committed before stays whole. Null: never cancelled.
  const std::atomic<bool>* cancel = nullptr;
  /// The process is the qconv command, and a batch may take its signals: it blocks SIGTERM,
  /// SIGINT, SIGHUP and SIGQUIT in its threads, reads them, and dies of one once no commit is
  /// under way (batch.cpp). Otherwise (the library) qconv changes no signal disposition, and
  /// no signal mask but its own threads' and, for a commit's few calls, the caller's.
  bool own_signals = false;
};

/// `options` with --target applied: the target's format where --format was not given, its
/// storage types where --weight-type/--activation-type were not. Throws Error(Usage) for an
/// unknown target, no format, or a flag the target contradicts.
ConvertOptions withTarget(ConvertOptions options);

/// The passes a format runs, in order.
std::vector<std::string> pipelineFor(Format format);

/// Convert options.input into options.output, or with out_dir each of options.inputs into it.
/// Diagnostics go to `err` (one line per problem, "qconv: error: <file>: <node>: <what>"),
/// dumps to `out`. Returns the exit code (qconv::ExitCode; a batch's is the greatest of its
/// items'); a failed conversion leaves no output file behind, and never stops a batch.
int run(const ConvertOptions& options, std::ostream& out, std::ostream& err);
/// The same, each diagnostic a record given to `diagnostics` (diagnostics.h): what the CLI prints
/// on `err` above, and the Python binding keeps.
int run(const ConvertOptions& options, std::ostream& out, DiagnosticSink& diagnostics);

/// qconv verify MODEL [--json] [--symmetric]: static checks (analysis/verify.h).
struct VerifyCommand {
  std::string model;
  bool json = false;       // the findings as one JSON object on `out` (schema: docs/cli.md)
  bool symmetric = false;  // also what a runtime taking int8 at zero point 0 only refuses
  std::string target;      // --target: what that runtime cannot run; saturation only where it can happen
  /// exit 1 when a finding is of this severity or worse (--fail-on; --werror: warning)
  analysis::Severity fail_on = analysis::Severity::Error;
  std::vector<std::string> ignore;  // --ignore KIND: these kinds are set aside (checked: findingKinds())
  int verbosity = 1;
  const std::string_view* model_bytes = nullptr;  // the Python API's: the model's bytes, `model` naming them
  std::string report;     // --report FILE.json|FILE.html: the findings and each node's, as a file
  std::string node_data;  // --node-data FILE.json: each node's findings, as Model Explorer's node data
};

/// Findings on `out`, one line each (or JSON); diagnostics on `err`. Returns 0 when no finding
/// is of severity fail_on or worse, 1 (ExitCode::Findings) when one is, 3 when the model cannot
/// be read, 2 for an unknown --ignore kind.
int verify(const VerifyCommand& command, std::ostream& out, std::ostream& err);
int verify(const VerifyCommand& command, std::ostream& out, DiagnosticSink& diagnostics);

/// The one JSON object `qconv verify --json` or `qconv inspect --json` (`command`) prints for a
/// usage error, as for every other outcome: exit_code 2 and the error line (`model` empty: null).
std::string usageErrorJson(const std::string& command, const std::string& model, const std::string& error);

/// qconv inspect MODEL [--json] [--format qop|qdq]: what the model is and what convert would do.
struct InspectCommand {
  std::string model;
  bool json = false;
  Format format = Format::Qop;  // the conversion to dry-run
  bool format_given = false;    // else the target's default format (qop without a target)
  std::string target;           // --target: dry-run the conversion for this runtime
  const std::string_view* model_bytes = nullptr;  // the Python API's: the model's bytes, `model` naming them
};

/// 'qconv targets': one line per target (name, format, what it writes, the runtime measured).
void printTargets(std::ostream& out);

/// The description on `out` (text or JSON: docs/cli.md); writes no file. Returns 0, or 3 when
/// the model cannot be read.
int inspect(const InspectCommand& command, std::ostream& out, std::ostream& err);
int inspect(const InspectCommand& command, std::ostream& out, DiagnosticSink& diagnostics);

}  // namespace qconv
