// One conversion, as run() and a batch (batch.cpp) do it: the pipeline's internals, not API.
#pragma once

#include <memory>
#include <cstdint>
#include <mutex>
#include <ostream>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qconv/diag.h"
#include "qconv/diagnostics.h"
#include "qconv/io/external_data.h"
#include "qconv/io/model_io.h"
#include "qconv/io/op_schemas.h"
#include "qconv/pipeline/report.h"
#include "qconv/pipeline/run.h"

namespace qconv {

/// stderr, shared by a batch's conversions: each diagnostic as one whole line, "qconv: <level>:
/// <line>", one at a time, and the progress line (progress.h), which each whole line clears first.
/// The command's sink (the CLI's; run(), verify() and inspect() given an ostream).
class StderrLines final : public DiagnosticSink {
 public:
  explicit StderrLines(std::ostream& os) : os_(os) {}
  void emit(const Diagnostic& d) override;
  /// Show `text` as the progress line (rewritten in place: "\r", the text, erase to the end of
  /// the line), or clear it when `text` is empty.
  void progress(const std::string& text) override;

 private:
  void clearProgress();
  std::mutex mutex_;
  std::ostream& os_;
  bool showing_ = false;
};

/// What one conversion needs besides the options.
struct Item {
  std::string input;
  std::string output;
  const io::OpSchemas& schemas;       // the checker's, shared by a batch
  std::shared_mutex* commit_gate;     // a batch's (io::WriteOptions::commit_gate), else null
  bool batch;                         // an item of a batch: its stderr lines name the input
  /// What no commit of the run may replace or remove (WritePlan::protected_files).
  const std::vector<std::pair<uint64_t, uint64_t>>* protected_files = nullptr;
  /// A batch's listing of what the output's commit may sweep (io::WriteOptions::data_file_names).
  const std::vector<std::string>* data_file_names = nullptr;
  /// The output's folder as the write plan opened it (WritePlan::folders), or null.
  std::shared_ptr<const io::Folder> folder = nullptr;
};

/// The dry run inspect and verify make: convert's pipeline for `options` over `model`, then its
/// emit and check stages in memory; what the passes said, and convert's verdict, in `report`.
/// Nothing is written.
void dryRun(ir::Model& model, const ConvertOptions& options, ItemReport& report);

/// `qconv inspect --json`'s object when it describes nothing: an unreadable model, a usage error.
/// `error_node`: the node the error names, or empty.
std::string inspectFailureJson(const std::string& model, int code, const std::string& error,
                               const std::string& error_node);

/// Convert item.input into item.output: diagnostics to `sink`, what was done in `report`.
/// Returns the exit code; never throws.
int convertItem(const ConvertOptions& options, const Item& item, ItemReport& report, DiagnosticSink& sink,
                std::ostream& out);

/// The passes' options a conversion's flags give.
PassOptions passOptionsOf(const ConvertOptions& options);

/// pm.run over `model`, then, with `traced`, each node's outcome (node_trace.h) into it: also
/// when a pass refuses the model (the exception is rethrown). convert and the dry run use it.
void runPasses(PassManager& pm, ir::Model& model, PassContext& ctx, ItemReport* traced, std::ostream* dump,
               const std::atomic<bool>* cancel);

/// What the passes said and rewrote, into the report.
void keepWhatWasSaid(const PassContext& ctx, ItemReport& report);

/// The exception being handled, as a command reports it: call failureOf in a catch block.
struct Failure {
  int code;          // an Error's own code; std::bad_alloc 6; anything else 70
  std::string what;  // the message (std::bad_alloc's names `input`)
  std::string node;  // the node an Error names (Error::node), or empty
};
Failure failureOf(const std::string& input);

/// The model a command reads: the file `path`, or (the Python API) the serialized `bytes`,
/// which `path` then names in messages (io::parseModel). `folder`: io::openModel's.
io::InputModel openInput(const std::string& path, const std::string_view* bytes, int folder = -1);

/// The check stage of every command (convert's before the rename, verify's and inspect's in
/// memory): the ONNX checker on an emitted model. When it fails, the input's fault
/// (Error(BadInput), "<input>: invalid model: <the checker's words on the input>") when the
/// input fails it too, else qconv's (Error(Internal)).
/// `input_bytes`: the input as the API gave it, else null (read from `input`).
void checkEmitted(onnx::ModelProto& emitted, const io::FileBacked* file_backed, const std::string& input,
                  const io::OpSchemas& schemas, const std::string_view* input_bytes = nullptr);

/// Error(Usage) when `path` (`what` it is: "the output path") holds a NUL byte: every system call
/// takes a path as a C string, which would end there and name another file (the caller's
/// `in.onnx` for "in.onnx\0.x"). Called on every path before anything is read or written.
void requireWholePath(const char* what, const std::string& path);
/// The message requireWholePath throws, or empty when `path` is whole.
std::string wholePathError(const char* what, const std::string& path);

/// Flags that contradict each other: Error(Usage).
void checkFlags(const ConvertOptions& options);

/// Where a batch writes the conversion of `input`: DIR/<its file name>.
std::string batchOutput(const std::string& out_dir, const std::string& input);

/// A batch: run() with options.out_dir. Returns the greatest exit code of its items (or 2 for
/// a usage error of the batch itself, before any is converted).
int runBatch(const ConvertOptions& options, std::ostream& out, DiagnosticSink& sink, RunReport& report,
             std::shared_ptr<const io::Folder>& report_folder);

}  // namespace qconv
