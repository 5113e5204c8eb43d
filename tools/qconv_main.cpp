// The qconv command line: binds flags to ConvertOptions and calls qconv::run. Nothing more.
// Usage errors are exit 2 in one line naming the cause (usage.h finds the nearest valid word).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "qconv/diag.h"
#include "qconv/io/huge_page_heap.h"
#include "qconv/io/model_io.h"
#include "qconv/passes/pass.h"
#include "qconv/pipeline/run.h"
#include "qconv/targets/target.h"
#include "qconv_version.h"
#include "usage.h"

namespace {

/// `qconv verify --json` or `qconv inspect --json`: which ("" for neither), and the model given
/// (what a usage error's JSON object names). Read off argv, since a usage error may stop the parse.
struct JsonAsked {
  std::string command, model;
};

JsonAsked jsonAsked(int argc, char** argv) {
  JsonAsked asked;
  if (argc < 2 || (std::strcmp(argv[1], "verify") != 0 && std::strcmp(argv[1], "inspect") != 0)) return asked;
  bool json = false;
  for (int i = 2; i < argc && std::strcmp(argv[i], "--") != 0; ++i) json = json || std::strcmp(argv[i], "--json") == 0;
  if (!json) return asked;
  asked.command = argv[1];
  for (int i = 2; i < argc; ++i)  // the first word that is no flag nor a flag's value
    if (argv[i][0] != '-' && (std::strcmp(argv[i - 1], "--target") != 0 && std::strcmp(argv[i - 1], "--ignore") != 0 &&
                              std::strcmp(argv[i - 1], "--fail-on") != 0 && std::strcmp(argv[i - 1], "--format") != 0)) {
      asked.model = argv[i];
      break;
    }
  return asked;
}

int usageError(const std::string& what, const JsonAsked& json = {}) {
  std::cerr << "qconv: error: " << qconv::printable(what) << "\n";
  if (!json.command.empty()) std::cout << qconv::usageErrorJson(json.command, json.model, what) << std::flush;
  return static_cast<int>(qconv::ExitCode::Usage);
}

/// '-' is not standard input or output: a model's external data lives in files beside it, and
/// an output is written atomically by renaming a file into place (docs/cli.md).
std::string dashPath(const std::string& what, const std::string& path) {
  if (path != "-") return {};
  return fmt::format("{} '-': qconv reads and writes named files, not standard input or output (a model's external "
                     "data lives in files beside it, and an output is renamed into place); give a file name",
                     what);
}

/// What each subcommand's flags bind to, and the functions that define those flags.
struct ConvertFlags {
  qconv::ConvertOptions options;
  std::vector<std::string> files;
  std::string format, weight_type, activation_type;
  bool quiet = false, no_saturation_check = false;
  int verbose = 0;
};

void defineConvert(CLI::App& convert, ConvertFlags& f) {
  convert.add_option("files", f.files,
                     "IN OUT: the input model (never modified) and the output (written atomically); with "
                     "--out-dir, the input models");
  convert.add_option("--out-dir", f.options.out_dir,
                     "a batch: convert each IN to DIR/<its file name> in this one process (exit code: the "
                     "greatest of the items')");
  convert.add_option("-j,--jobs", f.options.jobs, "with --out-dir: convert N models at once (default 1)")
      ->check(CLI::Range(1, 256));
  convert.add_option("--report", f.options.report,
                     "write what was done to this file: FILE.json (inputs, outputs, each node's outcome, rewritten "
                     "groups, refusals, approximations, stage times, exit code; schema: docs/cli.md) or FILE.html "
                     "(the same as one page to open in a browser)");
  convert.add_option("--node-data", f.options.node_data,
                     "write each node of the output's outcome as Model Explorer's node data (FILE.json) to show on "
                     "the graph");
  convert.add_option("--format", f.format,
                     "qop: QLinearConv/QLinearMatMul; qdq: canonical QDQ (with --target: that runtime's default)")
      ->check(CLI::IsMember({"qop", "qdq"}));
  convert.add_option("--target", f.options.target,
                     "write the form this runtime computes exactly: onnxruntime, tensorrt, openvino, iree, tvm, aidge, qnn, rknn "
                     "('qconv targets'; docs/targets.md); a model it cannot run is refused (exit 4)");
  convert.add_option("--passes", f.options.passes, "run these passes in this order instead (see 'qconv passes')")
      ->delimiter(',');
  convert.add_flag("--dump", f.options.dump, "print the IR after every pass (stdout)");
  convert.add_flag("--time-passes", f.options.time_passes, "print the time of every stage (stderr)");
  convert.add_flag("--raise-weight-scale", f.options.raise_weight_scale,
                   "when a requantized bias overflows int32, raise that channel's weight scale (approximation, reported)");
  convert.add_flag("--approximate", f.options.approximate,
                   "allow conversions that differ on rounding ties (FakeQuantize as Q/DQ); each is listed");
  convert.add_flag("--contrib", f.options.contrib,
                   "--format qop: write onnxruntime's com.microsoft ops (QLinearAdd, QLinearMul, QLinearSigmoid, "
                   "QLinearSoftmax, QLinearConcat, QLinearGlobalAveragePool, QGemm, ...) where standard ONNX has no "
                   "quantized op; without it the output is standard ONNX only");
  convert.add_option("--weight-type", f.weight_type,
                     "store 8-bit weights as uint8 or int8, zero points moved by 128 (exact); uint8 makes "
                     "onnxruntime compute exactly on x86 CPUs without VNNI (docs/onnxruntime-cpu.md)")
      ->check(CLI::IsMember({"uint8", "int8"}));
  convert.add_option("--activation-type", f.activation_type,
                     "store 8-bit activations as uint8 or int8, zero points moved by 128 (exact); graph inputs "
                     "and outputs keep their types")
      ->check(CLI::IsMember({"uint8", "int8"}));
  convert.add_flag("--no-saturation-check", f.no_saturation_check,
                   "do not count the weight pairs onnxruntime's x86 u8 x s8 kernels can saturate (for CPUs known "
                   "to compute them exactly: VNNI, ARM); saves reading every such weight once");
  convert.add_option("--opset", f.options.opset,
                     "declare this ai.onnx opset in the output (e.g. 21 for a runtime that lacks the model's); "
                     "refused, naming the node, when an operator changed in between")
      ->check(CLI::Range(int64_t{1}, int64_t{28}).description("1 to 28"));
  convert.add_flag("--annotate", f.options.annotate,
                   "write the graph's quantization_annotation: for every quantized tensor of the output, the names "
                   "of its scale and zero point tensors (an input's annotations are kept true to the output "
                   "either way)");
  convert.add_flag("--inline-data", f.options.inline_data,
                   "write every tensor into the output model (when under 2 GB), even if the input keeps "
                   "external data; by default such tensors go to OUT.data beside OUT");
  convert.add_flag("--fsync", f.options.fsync,
                   "flush the output to disk before renaming it into place, so that it survives a power loss "
                   "(the write is atomic either way)");
  convert.add_flag("--require-change", f.options.require_change,
                   "exit 7, writing nothing, when nothing in the input is quantized or no group was rewritten");
  auto* quiet_flag = convert.add_flag("-q,--quiet", f.quiet, "print errors only (and a batch's total line)");
  convert.add_flag("-v,--verbose", f.verbose,
                   "print a note for every node rewritten, left or advised about; -vv: debug lines too")
      ->excludes(quiet_flag);
}

struct VerifyFlags {
  qconv::VerifyCommand verify;
  std::string fail_on = "error";
  bool werror = false, quiet = false;
};

void defineVerify(CLI::App& cmd, VerifyFlags& f) {
  cmd.add_option("model", f.verify.model, "the model (.onnx)");
  cmd.add_flag("--json", f.verify.json, "print the findings as one JSON object");
  cmd.add_flag("--symmetric", f.verify.symmetric,
               "also name what a runtime taking int8 at zero point 0 only (TensorRT) refuses");
  cmd.add_flag("-q,--quiet", f.quiet, "no summary line on stderr");
  cmd.add_option("--target", f.verify.target,
                 "the runtime the model is for: name what it cannot run (findings), and saturation only "
                 "where it can happen (onnxruntime); without it, saturation is a note");
  cmd.add_option("--fail-on", f.fail_on,
                 "exit 1 when a finding is of this severity or worse: error (default), warning or note")
      ->check(CLI::IsMember({"error", "warning", "note"}));
  cmd.add_flag("--werror", f.werror, "warnings fail too: --fail-on warning");
  cmd.add_option("--ignore", f.verify.ignore,
                 "set this kind of finding aside (repeat, or KIND,KIND; the kinds: docs/cli.md)")
      ->delimiter(',');
  cmd.add_option("--report", f.verify.report,
                 "write the findings and each node's to this file: FILE.json (--json's object with the nodes) or "
                 "FILE.html (one page to open in a browser)");
  cmd.add_option("--node-data", f.verify.node_data,
                 "write each node's findings as Model Explorer's node data (FILE.json) to show on the graph");
}

struct InspectFlags {
  qconv::InspectCommand inspect;
  std::string format = "qop";
};

void defineInspect(CLI::App& cmd, InspectFlags& f) {
  cmd.add_option("model", f.inspect.model, "the model (.onnx)");
  cmd.add_flag("--json", f.inspect.json, "print it as one JSON object (docs/cli.md)");
  cmd.add_option("--format", f.format, "the conversion to dry-run (default qop)")
      ->check(CLI::IsMember({"qop", "qdq"}));
  cmd.add_option("--target", f.inspect.target, "dry-run the conversion for this runtime (see 'qconv targets')");
}

}  // namespace

int main(int argc, char** argv) {
  // Past a file size limit (ulimit -f) a write then fails with EFBIG, which is exit 5 with a
  // message and nothing left behind, instead of the process being killed by SIGXFSZ.
  std::signal(SIGXFSZ, SIG_IGN);
  // --version anywhere before "--" (qconv convert --version too)
  for (int i = 1; i < argc && std::strcmp(argv[i], "--") != 0; ++i)
    if (std::strcmp(argv[i], "--version") == 0) {
      std::cout << "qconv " << QCONV_VERSION << " (commit " << QCONV_COMMIT << ")\nbuilt with "
                << qconv::io::builtWith() << "\n";
      return 0;
    }
  // a run's heap on huge pages: a tenth of a conversion's CPU (huge_page_heap.h); not for
  // --version, which would pay a huge page's zeroing for a few bytes
  qconv::io::useHugePageHeap();
  const JsonAsked json = jsonAsked(argc, argv);  // verify/inspect --json: a usage error is a JSON object too
  auto usage = [&json](const std::string& what) { return usageError(what, json); };
  CLI::App app{"qconv: convert quantized ONNX models to standard QDQ or QOp ONNX, exactly", "qconv"};
  app.require_subcommand(0, 1);
  app.allow_extras();  // an unknown subcommand is named below, with the nearest one
  app.add_flag("--version", "print qconv's version and commit, and the ONNX and protobuf it was built with");
  app.footer("Exit codes: 0 done; 1 verify found what --fail-on fails on; 2 usage; 3 unreadable or invalid input; "
             "4 unsupported; 5 cannot write; 6 out of memory; 7 --require-change and nothing changed; 70 internal "
             "error. 'qconv help SUBCOMMAND' for each one's flags; docs/cli.md.");

  // Every subcommand is declared, but its flags only where this command line can use them:
  // CLI11 builds each flag at run time, a quarter of the CPU of a small model's conversion.
  // "qconv convert ..." reads convert's flags only; help, --help or a mistyped word, all of them.
  const std::string first = argc > 1 ? argv[1] : "";
  const bool all = first != "convert" && first != "verify" && first != "inspect" && first != "targets" &&
                   first != "passes";
  ConvertFlags cf;
  auto* convert = app.add_subcommand("convert", "convert IN into OUT, or each IN into DIR with --out-dir");
  if (all || first == "convert") defineConvert(*convert, cf);
  VerifyFlags vf;
  auto* verify_cmd = app.add_subcommand("verify", "check a quantized model's parameters and representations; "
                                                  "exit 0 when clean, 1 with findings (docs/cli.md)");
  if (all || first == "verify") defineVerify(*verify_cmd, vf);
  InspectFlags inf;
  auto* inspect_cmd = app.add_subcommand("inspect", "say what a model is (dialects, operators, quantized tensors) and "
                                                    "what convert would do with it; writes nothing");
  if (all || first == "inspect") defineInspect(*inspect_cmd, inf);

  auto* targets = app.add_subcommand("targets", "list the runtimes --target writes for, one line each");
  auto* passes = app.add_subcommand("passes", "list the passes and the pipelines of each format");
  auto* help = app.add_subcommand("help", "print the help of qconv, or of SUBCOMMAND");
  std::string topic;
  help->add_option("subcommand", topic, "a subcommand");
  const std::vector<CLI::App*> subcommands = {convert, verify_cmd, inspect_cmd, targets, passes, help};
  for (CLI::App* sub : subcommands) sub->allow_extras();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage(fmt::format("{} ('qconv help' lists the flags)", e.what()));
  }
  CLI::App* chosen = nullptr;
  for (CLI::App* sub : subcommands)
    if (sub->parsed()) chosen = sub;
  if (!chosen) {
    const std::vector<std::string> names = qconv::cli::subcommandsOf(app);
    std::string all;
    for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
    if (!app.remaining().empty() && app.remaining().front().rfind('-', 0) != 0) {
      const std::string word = app.remaining().front();
      const std::string near = qconv::cli::nearest(word, names);
      return usage(fmt::format("unknown subcommand '{}'{}; qconv's are {}", word,
                                    near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near), all));
    }
    if (const std::string why = qconv::cli::unexpected(app); !why.empty()) return usage(why);
    return usage(fmt::format("give a subcommand: {} ('qconv help' explains them)", all));
  }
  if (const std::string why = qconv::cli::unexpected(*chosen); !why.empty()) return usage(why);
  // --target '' names no runtime (not a missing --target: that is --format's business)
  for (CLI::App* sub : {convert, verify_cmd, inspect_cmd})
    if (sub->parsed() && sub->count("--target") &&
        (sub == convert ? cf.options.target : sub == verify_cmd ? vf.verify.target : inf.inspect.target).empty())
      return usage(fmt::format("--target '': no such target; qconv knows {} ('qconv targets')", qconv::targetNames()));

  if (help->parsed()) {
    if (topic.empty()) {  // app.help() would give the help of the subcommand parsed: help's
      std::cout << app.get_formatter()->make_help(&app, "qconv", CLI::AppFormatMode::Normal);
      return 0;
    }
    for (CLI::App* sub : subcommands)
      if (sub->get_name() == topic) {
        std::cout << sub->help("qconv");  // as "qconv SUBCOMMAND --help" prints it
        return 0;
      }
    const std::string near = qconv::cli::nearest(topic, qconv::cli::subcommandsOf(app));
    return usage(fmt::format("qconv help {}: no such subcommand{}", topic,
                                  near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near)));
  }

  if (passes->parsed()) {
    const qconv::PassInfo* previous = nullptr;
    for (const auto& p : qconv::passRegistry()) {  // in pipeline order, under its phase
      if (!previous || previous->phase != p.phase) std::cout << fmt::format("{}:\n", qconv::phaseName(p.phase));
      std::cout << fmt::format("  {:<22} {}\n", p.name, p.summary);
      previous = &p;
    }
    for (auto f : {qconv::Format::Qop, qconv::Format::Qdq}) {
      std::string list;
      for (const auto& n : qconv::pipelineFor(f)) list += (list.empty() ? "" : ",") + n;
      std::cout << fmt::format("--format {}: {}\n", f == qconv::Format::Qop ? "qop" : "qdq", list);
    }
    return 0;
  }
  if (targets->parsed()) {
    qconv::printTargets(std::cout);
    return 0;
  }
  if (inspect_cmd->parsed()) {
    if (inf.inspect.model.empty()) return usage("qconv inspect: give the MODEL to describe");
    if (const std::string why = dashPath("qconv inspect", inf.inspect.model); !why.empty()) return usage(why);
    inf.inspect.format = inf.format == "qdq" ? qconv::Format::Qdq : qconv::Format::Qop;
    inf.inspect.format_given = inspect_cmd->count("--format") > 0;
    const int code = qconv::inspect(inf.inspect, std::cout, std::cerr);
    std::cout.flush();
    return code;
  }
  if (verify_cmd->parsed()) {
    if (vf.verify.model.empty()) return usage("qconv verify: give the MODEL to check");
    if (const std::string why = dashPath("qconv verify", vf.verify.model); !why.empty()) return usage(why);
    for (const auto& [flag, path] : {std::pair{"--report", &vf.verify.report}, {"--node-data", &vf.verify.node_data}})
      if (const std::string why = dashPath(flag, *path); !why.empty()) return usage(why);
    using qconv::analysis::Severity;
    vf.verify.fail_on = vf.fail_on == "note"      ? Severity::Note
                        : vf.fail_on == "warning" ? Severity::Warning
                                                  : Severity::Error;
    if (vf.werror) vf.verify.fail_on = std::min(vf.verify.fail_on, Severity::Warning);  // the stricter of the two
    vf.verify.verbosity = vf.quiet ? 0 : 1;
    const int code = qconv::verify(vf.verify, std::cout, std::cerr);
    std::cout.flush();
    return code;
  }
  for (const std::string& f : cf.files)
    if (const std::string why = dashPath("qconv convert: a model path", f); !why.empty()) return usage(why);
  for (const std::string* f : {&cf.options.out_dir, &cf.options.report, &cf.options.node_data})
    if (const std::string why = dashPath(f == &cf.options.report      ? "--report"
                                         : f == &cf.options.node_data ? "--node-data"
                                                                      : "--out-dir",
                                         *f);
        !why.empty())
      return usage(why);
  if (convert->count("--jobs") && cf.options.out_dir.empty())
    return usage("-j/--jobs converts a batch's models at once: it goes with --out-dir DIR IN...");
  if (!cf.options.out_dir.empty()) {
    cf.options.inputs = cf.files;
  } else if (cf.files.size() == 2) {
    cf.options.input = cf.files[0];
    cf.options.output = cf.files[1];
  } else {
    return usage(fmt::format("qconv convert takes IN OUT, or --out-dir DIR IN... (it was given {} path{}; "
                                  "'qconv help convert')",
                                  cf.files.size(), cf.files.size() == 1 ? "" : "s"));
  }
  cf.options.format = cf.format == "qdq" ? qconv::Format::Qdq : qconv::Format::Qop;
  cf.options.format_given = !cf.format.empty();
  auto typeOf = [](const std::string& t) { return t.empty() ? 0 : t == "uint8" ? 2 : 3; };  // TensorProto UINT8, INT8
  cf.options.weight_type = typeOf(cf.weight_type);
  cf.options.activation_type = typeOf(cf.activation_type);
  cf.options.check_saturation = !cf.no_saturation_check;
  cf.options.exiting_after = true;  // main returns run()'s code
  cf.options.own_signals = true;    // a batch may die of SIGINT as the command does (batch.cpp)
  cf.options.verbosity = cf.quiet ? 0 : 1 + cf.verbose;
  cf.options.progress = !cf.quiet && isatty(STDERR_FILENO);  // never in a pipe or a log file
  // QCONV_PROGRESS_DELAY_MS: when the progress line starts (default 1000 ms); tests set it low
  if (const char* delay = std::getenv("QCONV_PROGRESS_DELAY_MS"))
    cf.options.progress_delay_ms = static_cast<int>(std::strtol(delay, nullptr, 10));
  const int code = qconv::run(cf.options, std::cout, std::cerr);
#ifdef QCONV_SANITIZED
  return code;  // LeakSanitizer checks at a normal exit
#else
  // run() has freed everything it made and closed its files; what is left are the libraries'
  // static objects (protobuf's default instances, libonnx's tables), whose destructors the OS makes needless.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(code);
#endif
}
