#include "qconv/pipeline/run.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <chrono>

#include "qconv/analysis/annotation.h"
#include "qconv/analysis/contents.h"
#include "qconv/diag.h"
#include "qconv/ir/tensor.h"
#include "qconv/io/external_data.h"
#include "qconv/io/model_io.h"
#include "qconv/pipeline/declare_types.h"
#include "qconv/pipeline/item.h"
#include "qconv/pipeline/pass_manager.h"
#include "qconv/pipeline/progress.h"
#include "qconv/pipeline/write_plan.h"
#include "qconv/passes/common/opset_history.h"
#include "qconv/quant.h"

namespace qconv {

std::vector<std::string> pipelineFor(Format format) {
  // qop: all of them; qdq: all but the fusions
  std::vector<std::string> all;
  for (const auto& p : passRegistry())
    if (p.formats != (format == Format::Qop ? PassFormats::QdqOnly : PassFormats::QopOnly)) all.emplace_back(p.name);
  return all;
}

namespace {

/// --inline-data: refused before any pass when the tensors the graph reads pass protobuf's 2 GB
/// limit already (their sizes follow from their dims), instead of after the work, at the write.
/// The same for a conversion into memory (the Python API without an output path).
void refuseInlineOver2GB(const ir::Model& model, const std::string& input, bool in_memory) {
  uint64_t bytes = 0;
  for (const ir::Value* v : model.graph.initializers())
    if (!v->uses().empty() || v->isGraphOutput()) bytes += ir::dataBytes(*v->initializer()).value_or(0);
  if (bytes <= static_cast<uint64_t>(INT_MAX)) return;
  if (in_memory)
    throw Error(ExitCode::Unsupported,
                fmt::format("{}: the tensors the graph reads hold {} bytes, over protobuf's 2 GB limit for a model held "
                            "in memory; give an output path (qconv then writes them to a data file beside it)",
                            input, bytes));
  throw Error(ExitCode::Unsupported,
              fmt::format("{}: --inline-data: the tensors the graph reads hold {} bytes, over protobuf's 2 GB limit; "
                          "keep its external data (drop --inline-data)", input, bytes));
}


std::string summary(const PassContext& ctx) {
  std::string s;
  for (const auto& [what, n] : ctx.counters()) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", n, what);
  if (!ctx.refusals().empty()) s += fmt::format("{}{} left as they were", s.empty() ? "" : "; ", ctx.refusals().size());
  if (s.empty()) s = "nothing to change";
  if (const size_t n = ctx.advisories()) s += fmt::format("; {} advisor{} (-v)", n, n == 1 ? "y" : "ies");
  return s;
}

/// The output path must name a file: a usage error (exit 2) when it names a folder or nothing;
/// exit 5, untouched, when it is something else than a regular file (a device, a FIFO, a socket,
/// or a symbolic link to one): qconv replaces only regular files.
void checkOutputPath(const std::string& path) {
  if (!io::splitPath(path).namesFile())
    throw Error(ExitCode::Usage, fmt::format("'{}': the output path names a folder or nothing; give a file name", path));
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return;  // a new file
  if (S_ISDIR(st.st_mode))
    throw Error(ExitCode::Usage, fmt::format("{}: the output path is a folder; give a file name", path));
  if (!S_ISREG(st.st_mode))
    throw Error(ExitCode::Output, fmt::format("{}: the output is {}, not a regular file; qconv replaces only regular "
                                              "files, and leaves it as it is", path, fileKind(st.st_mode)));
}

}  // namespace

io::InputModel openInput(const std::string& path, const std::string_view* bytes, int folder) {
  return bytes ? io::parseModel(*bytes, path) : io::openModel(path, folder);
}

void checkEmitted(onnx::ModelProto& emitted, const io::FileBacked* file_backed, const std::string& input,
                  const io::OpSchemas& schemas, const std::string_view* input_bytes) {
  const std::string why = io::checkModel(emitted, file_backed, &schemas);
  if (why.empty()) return;
  // The input is only read again here, on this path: a valid model pays for one checker run.
  onnx::ModelProto model = input_bytes ? io::parseModel(*input_bytes, input).proto : io::readModelFile(input);
  if (std::string input_why = io::checkModel(model, nullptr, &schemas); !input_why.empty())
    throw Error(ExitCode::BadInput, fmt::format("{}: invalid model: {}", input, input_why));
  throw Error(ExitCode::Internal, fmt::format("internal error: the converted model fails the ONNX checker: {}", why));
}

std::string wholePathError(const char* what, const std::string& path) {
  if (path.find('\0') == std::string::npos) return {};
  return fmt::format("{} '{}' holds a NUL byte, which no file name can: nothing was read or written", what,
                     printable(path));
}

void requireWholePath(const char* what, const std::string& path) {
  if (std::string why = wholePathError(what, path); !why.empty()) throw Error(ExitCode::Usage, why);
}

namespace {

/// Every path a conversion names, whole (requireWholePath).
void requireWholePaths(const ConvertOptions& o) {
  if (!o.input_bytes) requireWholePath("the model path", o.input);
  if (!o.output_bytes) requireWholePath("the output path", o.output);
  for (const std::string& in : o.inputs) requireWholePath("the model path", in);
  requireWholePath("the output folder", o.out_dir);
  requireWholePath("the report path", o.report);
  requireWholePath("the node data path", o.node_data);
}

}  // namespace

void checkFlags(const ConvertOptions& options) {
  if (options.activation_type == onnx::TensorProto::INT8 && options.weight_type == onnx::TensorProto::UINT8)
    throw Error(ExitCode::Usage, "--activation-type int8 with --weight-type uint8: no onnxruntime kernel takes int8 "
                                 "activations with uint8 weights");
  if (options.contrib && options.format == Format::Qdq)
    throw Error(ExitCode::Usage, "--contrib writes onnxruntime's QOperator ops: it goes with --format qop, not qdq");
  if (options.opset) checkOpsetFlag(options.opset);
}

PassOptions passOptionsOf(const ConvertOptions& options) {
  return PassOptions{options.raise_weight_scale, options.approximate, options.weight_type, options.activation_type,
                     options.check_saturation, options.opset, options.contrib, options.format == Format::Qop,
                     options.target.empty() ? nullptr : findTarget(options.target)};
}

ConvertOptions withTarget(ConvertOptions options) {
  if (options.target.empty()) {
    if (!options.format_given) throw Error(ExitCode::Usage, "give --format qop|qdq, or --target RUNTIME ('qconv targets' lists them)");
    return options;
  }
  const TargetProfile* t = findTarget(options.target);
  if (!t) {
    throw Error(ExitCode::Usage, fmt::format("--target {}: no such target; qconv knows {}", options.target, targetNames()));
  }
  if (!options.format_given) options.format = t->default_qop ? Format::Qop : Format::Qdq;
  const Limit& format = options.format == Format::Qop ? t->qop : t->qdq;
  if (!format.allowed)
    throw Error(ExitCode::Usage, fmt::format("--format {} contradicts --target {}: {}",
                                             options.format == Format::Qop ? "qop" : "qdq", t->name, format.why));
  if (options.contrib && !t->contrib.allowed)
    throw Error(ExitCode::Usage, fmt::format("--contrib contradicts --target {}: {}", t->name, t->contrib.why));
  auto storage = [&](int32_t& flag, int32_t wanted, const char* name) {
    if (!wanted) return;
    if (flag && flag != wanted)
      throw Error(ExitCode::Usage, fmt::format("{} {} contradicts --target {}, which stores them as {}", name,
                                               ir::typeName(flag), t->name, ir::typeName(wanted)));
    flag = wanted;
  };
  storage(options.weight_type, t->weight_type, "--weight-type");
  storage(options.activation_type, t->activation_type, "--activation-type");
  return options;
}

void runPasses(PassManager& pm, ir::Model& model, PassContext& ctx, ItemReport* traced, std::ostream* dump,
               const std::atomic<bool>* cancel) {
  const size_t input_nodes = model.graph.nodesMade();
  auto trace = [&] {
    if (!traced) return;
    traced->graph_id = graphId(model.shell.graph().name());
    traced->trace = traceNodes(model.graph, input_nodes, ctx.rewritten(), ctx.said(), pm.removals(), ctx.pass());
  };
  try {
    pm.run(model, ctx, dump, cancel);
  } catch (...) {  // a pass refused the model: the trace says which nodes, and why
    trace();
    throw;
  }
  trace();
}

void keepWhatWasSaid(const PassContext& ctx, ItemReport& report) {
  report.said = ctx.said();
  report.rewritten = ctx.rewritten();
  report.counts = ctx.counters();
}

void StderrLines::emit(const Diagnostic& d) {
  std::lock_guard<std::mutex> lock(mutex_);
  clearProgress();
  os_ << "qconv: " << levelName(d.level) << ": " << d.line << '\n';
  os_.flush();
}

void StderrLines::clearProgress() {
  if (showing_) os_ << "\r\x1b[K";
  showing_ = false;
}

void StderrLines::progress(const std::string& text) {
  std::lock_guard<std::mutex> lock(mutex_);
  clearProgress();
  if (!text.empty()) {
    os_ << printable(text);
    showing_ = true;
  }
  os_.flush();
}

namespace {

/// What the progress line of one conversion shows (progress.h).
struct ConvertProgress {
  enum Stage { kReading, kConverting, kWriting, kChecking, kCommitting };
  std::atomic<Stage> stage{kReading};
  std::atomic<uint64_t> written{0}, to_write{0};

  std::string line(const Item& item, double seconds) const {
    static constexpr const char* kNames[] = {"reading", "converting", "writing", "checking", "committing"};
    const Stage s = stage.load();
    std::string text = fmt::format("qconv: {}: {}", item.input, kNames[s]);
    if (s == kWriting) text += fmt::format(" {}: {} of {}", item.output, Progress::bytes(written), Progress::bytes(to_write));
    return text + fmt::format(" ({:.1f} s)", seconds);
  }
};

/// How a conversion writes its output file: the progress counters, the batch's gate and listing,
/// the plan's folder, and what no commit may replace or remove (the plan's protected files, what
/// this input opened, and the input itself).
io::WriteOptions writeOptionsFor(const ConvertOptions& options, const Item& item, io::ExternalFiles* files,
                                 bool external_data, ConvertProgress& progress) {
  io::WriteOptions write;
  write.written = &progress.written;
  write.to_write = &progress.to_write;
  write.durable = options.fsync;
  write.commit_gate = item.commit_gate;
  write.data_file_names = item.data_file_names;
  write.folder = item.folder;
  // what this input did open (the plan's already, unless a file was replaced since), and itself
  std::vector<std::pair<uint64_t, uint64_t>> own;
  if (files) {
    own = files->identities();
    write.external_data = external_data;
    write.kept = files->kept();
  }
  if (files && files->modelIdentity().second)  // the model file read: never removed as a stale data file
    own.push_back(files->modelIdentity());
  std::sort(own.begin(), own.end());
  if (item.protected_files) write.protected_files = *item.protected_files;  // the plan's (sorted): what the run reads
  const auto middle = static_cast<std::ptrdiff_t>(write.protected_files.size());
  write.protected_files.insert(write.protected_files.end(), own.begin(), own.end());
  std::inplace_merge(write.protected_files.begin(), write.protected_files.begin() + middle, write.protected_files.end());
  return write;
}

void convert(const ConvertOptions& options, const Item& item, ItemReport& report, const Diagnostics& log,
             std::ostream& out, ConvertProgress& progress) {
  const bool in_memory = options.output_bytes != nullptr;
  throwIfCancelled(options.cancel, item.input);  // a batch's item not started yet
  if (!in_memory) checkOutputPath(item.output);
  PassManager pm(options.passes.empty() ? pipelineFor(options.format) : options.passes);
  pm.inferShapesWith(item.schemas);
  struct KeepTimings {  // what was timed, also when a stage throws
    PassManager& pm;
    ItemReport& report;
    ~KeepTimings() { report.stages = pm.timings(); }
  } keep{pm, report};
  PassContext ctx(log, passOptionsOf(options), item.input);
  struct KeepSaid {
    PassContext& ctx;
    ItemReport& report;
    ~KeepSaid() { keepWhatWasSaid(ctx, report); }
  } keepSaid{ctx, report};

  io::InputModel input = pm.timeStage("read", [&] { return openInput(item.input, options.input_bytes); });
  const std::shared_ptr<io::ExternalFiles> files = input.files;  // what the file-backed tensors read from
  throwIfCancelled(options.cancel, item.input);
  ir::Model model = pm.timeStage("import", [&] { return io::importModel(std::move(input), item.input); });
  bool nothing_quantized = false;
  {
    const analysis::Contents held = analysis::contentsOf(model);  // what inspect and verify read, too
    report.dialects = held.dialectNames();
    report.quantized_tensors = held.tensors.size();
    if (log.shows(Level::Debug))
      log.say(Level::Debug, "contents", "",
              fmt::format("holds {}; {} quantized tensor(s)",
                          held.dialects.empty() ? "no quantization dialect" : fmt::format("{}", fmt::join(report.dialects, ", ")),
                          held.tensors.size()));
    nothing_quantized = held.quantizesNothing();
  }
  // the output has external data when the input has: what the passes make then goes straight
  // beside the output, where the writer takes it as the data file (io::KeptFile)
  const bool external_data = files && !files->identities().empty() && !options.inline_data && !in_memory;
  if (options.inline_data || in_memory) refuseInlineOver2GB(model, item.input, in_memory);
  if (external_data) files->keepBeside(item.output, item.folder);
  progress.stage = ConvertProgress::kConverting;
  // each node's outcome (node_trace.h), for a report
  const bool traced = !options.report.empty() || options.report_json || !options.node_data.empty();
  runPasses(pm, model, ctx, traced ? &report : nullptr, options.dump ? &out : nullptr, options.cancel);
  if (options.require_change && (nothing_quantized || ctx.rewritten().empty()))
    throw Error(ExitCode::Unchanged,
                fmt::format("{}: --require-change: {}; nothing was written", item.input,
                            nothing_quantized ? "nothing in this model is quantized"
                                              : "no group was rewritten (" + summary(ctx) + ")"));

  io::FileBacked fileBacked;  // the output's tensors whose bytes are still in the input's files
  onnx::ModelProto result = pm.timeStage("emit", [&] {
    // annotations: read from the IR before emit releases the nodes, named after it names the values
    const bool annotated = model.shell.graph().quantization_annotation_size() > 0;
    std::vector<analysis::TensorQuant> quantized;
    if (options.annotate || annotated) quantized = analysis::quantizedTensors(model.graph);
    io::ValueTypes untyped;
    onnx::ModelProto m = io::exportModel(model, &fileBacked, &untyped);
    declareValueTypes(m, untyped, item.schemas);
    if (options.annotate) analysis::writeAnnotations(m, quantized);
    else if (annotated) analysis::refreshAnnotations(m, quantized);
    if (!ctx.approximations().empty()) {
      auto* prop = m.add_metadata_props();
      prop->set_key("qconv.approximations");
      std::string all;
      for (const auto& a : ctx.approximations()) all += a + "\n";
      prop->set_value(all);
    }
    return m;
  });
  if (traced) nameOutputNodes(report.trace, result.graph());
  if (in_memory) {  // the API's: the checker judges the model, then it is serialized
    pm.timeStage("check", [&] { checkEmitted(result, &fileBacked, item.input, item.schemas, options.input_bytes); });
    std::string bytes = pm.timeStage("write", [&] {
      try {
        return io::serializeModel(result, &fileBacked, item.input);
      } catch (const Error&) {  // an input shortened under the read: say so, naming its file
        if (files) files->checkUnchanged();
        throw;
      }
    });
    if (files) files->checkUnchanged();  // nothing read from a file that shrank meanwhile
    throwIfCancelled(options.cancel, item.input);
    *options.output_bytes = std::move(bytes);
  } else {
    io::WriteOptions write = writeOptionsFor(options, item, files.get(), external_data, progress);
    write.file_backed = &fileBacked;
    write.cancel = options.cancel;
    // The ONNX checker judges the output before it is renamed into place.
    progress.stage = ConvertProgress::kWriting;
    io::PendingWrite pending = pm.timeStage("write", [&] {
      try {
        return io::writeTemporary(result, item.output, write);
      } catch (const Error& e) {  // an input shortened under the copy: the input's fault, exit 3
        if (files && e.code() != ExitCode::Cancelled) files->checkUnchanged();
        throw;
      }
    });
    progress.stage = ConvertProgress::kChecking;
    pm.timeStage("check", [&] { checkEmitted(result, &fileBacked, item.input, item.schemas, options.input_bytes); });
    report.data_file = pending.dataFile();
    // the last look before the commit: every byte read is the input's, and the caller still wants it
    if (files) files->checkUnchanged();
    throwIfCancelled(options.cancel, item.input);
    progress.stage = ConvertProgress::kCommitting;
    pm.timeStage("commit", [&] { pending.commit(); });
  }
  if (nothing_quantized)
    log.say(Level::Warning, "unchanged", "",
            fmt::format("{}: the output computes as the input does (--require-change makes this exit 7)",
                        analysis::kNothingQuantized));
  report.summary = summary(ctx);
  if (in_memory) log.say(Level::Info, "summary", "", fmt::format("converted in memory: {}", report.summary));
  else log.say(Level::Info, "summary", "", fmt::format("wrote {}: {}", item.output, report.summary));
#if !defined(QCONV_SANITIZED)  // a leak checker would report the models, rightly (CMakeLists.txt: any sanitizer build)
  if (options.exiting_after && !item.batch) {  // the models' memory goes with the process
    model.byte_source.reset();  // but its files are closed, their temporaries removed, as ever
    model.byte_keeper.reset();
    new ir::Model(std::move(model));
    new onnx::ModelProto(std::move(result));
  }
#endif
}

}  // namespace

int convertItem(const ConvertOptions& options, const Item& item, ItemReport& report, DiagnosticSink& sink,
                std::ostream& out) {
  // Every line names the input ("qconv: note: a.onnx: conv_4: ..."); an error names its own file
  // ("out.onnx: cannot allocate ..."), and in a batch the input too.
  const Diagnostics log(&sink, options.verbosity, item.input, item.batch);
  report.input = item.input;
  report.output = item.output;
  try {
    if (!item.batch) checkFlags(options);
    ConvertProgress progress;
    {
      // a lone run's own line; a batch shows its items done instead (batch.cpp)
      const Progress shown(sink, options.progress && !item.batch, std::chrono::milliseconds(options.progress_delay_ms),
                           [&](double seconds) { return progress.line(item, seconds); });
      convert(options, item, report, log, out, progress);
    }
    if (options.time_passes)
      for (const auto& t : report.stages)
        log.always(Level::Info, "time", fmt::format("time: {:<20} {:9.2f} ms", t.name, t.milliseconds));
    return 0;
  } catch (...) {
    const Failure failed = failureOf(item.input);
    log.error(failed.what, failed.node);
    report.exit_code = failed.code;
    report.error = printable(failed.what);
    report.error_node = failed.node;
    report.trace.forgetOutput();  // nothing was written
    return failed.code;
  }
}

Failure failureOf(const std::string& input) {
  try {
    throw;
  } catch (const Error& e) {
    return {static_cast<int>(e.code()), e.what(), e.node()};
  } catch (const std::bad_alloc&) {
    return {static_cast<int>(ExitCode::OutOfMemory),
            fmt::format("{}: out of memory: the conversion needs more memory than this process may have (ulimit -v, "
                        "a cgroup's limit); nothing was written", input), ""};
  } catch (const std::exception& e) {
    return {static_cast<int>(ExitCode::Internal), fmt::format("internal error: {}", e.what()), ""};
  }
}

int run(const ConvertOptions& given, std::ostream& out, std::ostream& err) {
  StderrLines lines(err);
  return run(given, out, lines);
}

int run(const ConvertOptions& given, std::ostream& out, DiagnosticSink& lines) {
  const auto started = std::chrono::steady_clock::now();
  ConvertOptions options;
  try {
    requireWholePaths(given);
    options = withTarget(given);
  } catch (const Error& e) {  // a usage error: nothing read or written
    Diagnostics(&lines, given.verbosity).error(e.what());
    return static_cast<int>(e.code());
  }
  RunReport report;
  report.format = options.format == Format::Qop ? "qop" : "qdq";
  report.target = options.target;
  int code = 0;
  std::shared_ptr<const io::Folder> report_folder;  // the plan's: the report goes where it was checked
  std::shared_ptr<const io::Folder> node_data_folder;
  const bool batch = !options.out_dir.empty() || !options.inputs.empty();
  if (batch && !options.node_data.empty()) {
    Diagnostics(&lines, options.verbosity).error("--node-data draws one model: give one input, not a batch (--out-dir)");
    return static_cast<int>(ExitCode::Usage);
  }
  if (batch && (options.input_bytes || options.output_bytes)) {
    Diagnostics(&lines, options.verbosity).error("a batch (--out-dir) converts files: in-memory models go one at a time");
    return static_cast<int>(ExitCode::Usage);
  }
  if (batch) {
    code = runBatch(options, out, lines, report, report_folder);
  } else {
    WritePlan plan;
    try {
      std::vector<std::string> inputs, outputs;  // the files of the run (in memory: none)
      if (!options.input_bytes) inputs.push_back(options.input);
      if (!options.output_bytes) outputs.push_back(options.output);
      plan = planWrites(inputs, outputs, options.report, options.node_data);
    } catch (const Error& e) {  // before anything is read or written
      Diagnostics(&lines, options.verbosity).error(e.what());
      return static_cast<int>(e.code());
    }
    io::OpSchemas schemas;
    report.items.emplace_back();
    Item item{options.input, options.output, schemas, nullptr, false};
    item.protected_files = &plan.protected_files;
    if (!options.output_bytes) item.folder = plan.folders[0];
    report_folder = plan.report_folder;
    node_data_folder = plan.node_data_folder;
    code = convertItem(options, item, report.items.back(), lines, out);
  }
  report.exit_code = code;
  // a run refused before it started (a usage error, the write plan) writes nothing, no report either
  if ((options.report.empty() && !options.report_json && options.node_data.empty()) || report.items.empty()) return code;
  report.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  // the JSON text only where it is wanted: the file's indented, the API's compact (it is parsed)
  const bool html = !options.report.empty() && wantsHtml(options.report);
  const std::string json = !options.report.empty() && !html ? reportJson(report) : "";
  if (options.report_json) *options.report_json = reportJson(report, 0);
  try {
    if (!options.report.empty())
      io::writeTextFile(options.report, html ? reportHtml(report) : json, report_folder);
    // the output's overlay: only where there is an output
    if (!options.node_data.empty() && code == 0 && !options.output_bytes)
      io::writeTextFile(options.node_data, nodeDataJson(report.items.front()), node_data_folder);
  } catch (const Error& e) {
    Diagnostics(&lines, options.verbosity).error(e.what());
    return std::max(code, static_cast<int>(e.code()));
  }
  return code;
}

}  // namespace qconv

namespace qconv {

void printTargets(std::ostream& out) {
  for (const TargetProfile& t : targetProfiles())
    fmt::print(out, "{:<12} --format {:<3} {} [{}]\n", t.name, t.default_qop ? "qop" : "qdq", t.summary, t.runtime);
}

}  // namespace qconv
