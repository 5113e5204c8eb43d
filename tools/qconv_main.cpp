// The qconv command line: binds flags to ConvertOptions and calls qconv::run. Nothing more.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "qconv/diag.h"
#include "qconv/passes/pass.h"
#include "qconv/pipeline/run.h"

int main(int argc, char** argv) {
  // Past a file size limit (ulimit -f) a write then fails with EFBIG, which is exit 5 with a
  // message and nothing left behind, instead of the process being killed by SIGXFSZ.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"qconv: convert quantized ONNX models to standard QDQ or QOp ONNX, exactly"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "qconv 0.1.0");

  qconv::ConvertOptions options;
  bool quiet = false, verbose = false;
  auto* convert = app.add_subcommand("convert", "convert IN into OUT, or each IN into DIR with --out-dir");
  std::vector<std::string> files;
  convert->add_option("files", files,
                      "IN OUT: the input model (never modified) and the output (written atomically); with "
                      "--out-dir, the input models")
      ->required();
  convert->add_option("--out-dir", options.out_dir,
                      "a batch: convert each IN to DIR/<its file name> in this one process (exit code: the "
                      "greatest of the items')");
  convert->add_option("-j,--jobs", options.jobs, "with --out-dir: convert N models at once (default 1)")
      ->check(CLI::Range(1, 256));
  convert->add_option("--report", options.report,
                      "write what was done as JSON to this file: inputs, outputs, rewritten groups, refusals, "
                      "approximations, stage times, exit code (schema: docs/cli.md)");
  std::string format;
  convert->add_option("--format", format,
                      "qop: QLinearConv/QLinearMatMul; qdq: canonical QDQ (with --target: that runtime's default)")
      ->check(CLI::IsMember({"qop", "qdq"}));
  convert->add_option("--target", options.target,
                      "write the form this runtime computes exactly: onnxruntime, tensorrt, openvino, iree, tvm, aidge "
                      "('qconv targets'; docs/targets.md); a model it cannot run is refused (exit 4)");
  convert->add_option("--passes", options.passes, "run these passes in this order instead (see 'qconv passes')")
      ->delimiter(',');
  convert->add_flag("--dump", options.dump, "print the IR after every pass (stdout)");
  convert->add_flag("--time-passes", options.time_passes, "print the time of every stage (stderr)");
  convert->add_flag("--raise-weight-scale", options.raise_weight_scale,
                    "when a requantized bias overflows int32, raise that channel's weight scale (approximation, reported)");
  convert->add_flag("--approximate", options.approximate,
                    "allow conversions that differ on rounding ties (FakeQuantize as Q/DQ); each is listed");
  convert->add_flag("--contrib", options.contrib,
                    "--format qop: write onnxruntime's com.microsoft ops (QLinearAdd, QLinearMul, QLinearSigmoid, "
                    "QLinearSoftmax, QLinearConcat, QLinearGlobalAveragePool, QGemm, ...) where standard ONNX has no "
                    "quantized op; without it the output is standard ONNX only");
  std::string weight_type, activation_type;
  convert->add_option("--weight-type", weight_type,
                      "store 8-bit weights as uint8 or int8, zero points moved by 128 (exact); uint8 makes "
                      "onnxruntime compute exactly on x86 CPUs without VNNI (docs/onnxruntime-cpu.md)")
      ->check(CLI::IsMember({"uint8", "int8"}));
  convert->add_option("--activation-type", activation_type,
                      "store 8-bit activations as uint8 or int8, zero points moved by 128 (exact); graph inputs "
                      "and outputs keep their types")
      ->check(CLI::IsMember({"uint8", "int8"}));
  bool no_saturation_check = false;
  convert->add_flag("--no-saturation-check", no_saturation_check,
                    "do not count the weight pairs onnxruntime's x86 u8 x s8 kernels can saturate (for CPUs known "
                    "to compute them exactly: VNNI, ARM); saves reading every such weight once");
  convert->add_option("--opset", options.opset,
                      "declare this ai.onnx opset in the output (e.g. 21 for a runtime that lacks the model's); "
                      "refused, naming the node, when an operator changed in between")
      ->check(CLI::Range(int64_t{1}, int64_t{28}).description("1 to 28"));
  convert->add_flag("--annotate", options.annotate,
                    "write the graph's quantization_annotation: for every quantized tensor of the output, the names "
                    "of its scale and zero point tensors (an input's annotations are kept true to the output "
                    "either way)");
  convert->add_flag("--inline-data", options.inline_data,
                    "write every tensor into the output model (when under 2 GB), even if the input keeps "
                    "external data; by default such tensors go to OUT.data beside OUT");
  convert->add_flag("--fsync", options.fsync,
                    "flush the output to disk before renaming it into place, so that it survives a power loss "
                    "(the write is atomic either way)");
  convert->add_flag("-q,--quiet", quiet, "print only warnings and errors");
  convert->add_flag("-v,--verbose", verbose, "print debug notes too");

  qconv::VerifyCommand verify;
  auto* verify_cmd = app.add_subcommand("verify", "check a quantized model's parameters and representations; "
                                                  "exit 0 when clean, 1 with findings (docs/cli.md)");
  verify_cmd->add_option("model", verify.model, "the model (.onnx)")->required();
  verify_cmd->add_flag("--json", verify.json, "print the findings as one JSON object");
  verify_cmd->add_flag("--symmetric", verify.symmetric,
                       "also name what a runtime taking int8 at zero point 0 only (TensorRT) refuses");
  bool verify_quiet = false;
  verify_cmd->add_flag("-q,--quiet", verify_quiet, "no summary line on stderr");
  verify_cmd->add_option("--target", verify.target,
                         "the runtime the model is for: name what it cannot run (findings), and saturation only "
                         "where it can happen (onnxruntime); without it, saturation is a warning");

  qconv::InspectCommand inspect;
  auto* inspect_cmd = app.add_subcommand("inspect", "say what a model is (dialects, operators, quantized tensors) and "
                                                    "what convert would do with it; writes nothing");
  inspect_cmd->add_option("model", inspect.model, "the model (.onnx)")->required();
  inspect_cmd->add_flag("--json", inspect.json, "print it as one JSON object (docs/cli.md)");
  std::string inspect_format = "qop";
  inspect_cmd->add_option("--format", inspect_format, "the conversion to dry-run (default qop)")
      ->check(CLI::IsMember({"qop", "qdq"}));
  inspect_cmd->add_option("--target", inspect.target, "dry-run the conversion for this runtime (see 'qconv targets')");

  auto* targets = app.add_subcommand("targets", "list the runtimes --target writes for, one line each");
  auto* passes = app.add_subcommand("passes", "list the passes and the pipelines of each format");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "qconv: error: " << qconv::printable(e.what()) << " (run 'qconv --help')\n";
    return static_cast<int>(qconv::ExitCode::Usage);
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
    inspect.format = inspect_format == "qdq" ? qconv::Format::Qdq : qconv::Format::Qop;
    inspect.format_given = inspect_cmd->count("--format") > 0;
    const int code = qconv::inspect(inspect, std::cout, std::cerr);
    std::cout.flush();
    return code;
  }
  if (verify_cmd->parsed()) {
    verify.verbosity = verify_quiet ? 0 : 1;
    const int code = qconv::verify(verify, std::cout, std::cerr);
    std::cout.flush();
    return code;
  }
  if (!options.out_dir.empty()) {
    options.inputs = files;
  } else if (files.size() == 2) {
    options.input = files[0];
    options.output = files[1];
  } else {
    std::cerr << "qconv: error: convert takes IN OUT, or --out-dir DIR IN... (run 'qconv --help')\n";
    return static_cast<int>(qconv::ExitCode::Usage);
  }
  options.format = format == "qdq" ? qconv::Format::Qdq : qconv::Format::Qop;
  options.format_given = !format.empty();
  auto typeOf = [](const std::string& t) { return t.empty() ? 0 : t == "uint8" ? 2 : 3; };  // TensorProto UINT8, INT8
  options.weight_type = typeOf(weight_type);
  options.activation_type = typeOf(activation_type);
  options.check_saturation = !no_saturation_check;
  options.verbosity = quiet ? 0 : (verbose ? 2 : 1);
  const int code = qconv::run(options, std::cout, std::cerr);
#ifdef QCONV_SANITIZED
  return code;  // LeakSanitizer checks at a normal exit
#else
  // run() has freed everything it made and closed its files; what is left are the libraries'
  // static objects (protobuf's descriptors), whose destructors the OS makes needless.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(code);
#endif
}
