#include "qconv/pipeline/run.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <spdlog/logger.h>
#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>
#include <sys/stat.h>

#include "qconv/diag.h"
#include "qconv/io/external_data.h"
#include "qconv/io/model_io.h"
#include "qconv/pipeline/pass_manager.h"
#include "qconv/passes/opset_history.h"
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

bool sameFile(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

std::string summary(const PassContext& ctx) {
  std::string s;
  for (const auto& [what, n] : ctx.counters()) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", n, what);
  if (!ctx.refusals().empty()) s += fmt::format("{}{} left as they were", s.empty() ? "" : "; ", ctx.refusals().size());
  return s.empty() ? "nothing to change" : s;
}

/// The output fails the ONNX checker: the input's fault (exit 3, with the checker's words on
/// the input) when the input fails it too, else ours (exit 70). The input is only read again
/// here, on this path: a valid model pays for one checker run, on the output.
[[noreturn]] void refuseInvalid(const std::string& input, const std::string& output_why) {
  onnx::ModelProto model = io::readModelFile(input);
  if (std::string why = io::checkModel(model); !why.empty())
    throw Error(ExitCode::BadInput, fmt::format("{}: invalid model: {}", input, why));
  throw Error(ExitCode::Internal, fmt::format("internal error: the converted model fails the ONNX checker: {}", output_why));
}

/// The output path must name a file: a usage error (exit 2) when it names a folder or nothing;
/// exit 5, untouched, when it is something else than a regular file (a device, a FIFO, a socket,
/// or a symbolic link to one): qconv replaces only regular files.
void checkOutputPath(const std::string& path) {
  const std::string base = io::splitPath(path).base;
  if (base.empty() || base == "." || base == "..")
    throw Error(ExitCode::Usage, fmt::format("'{}': the output path names a folder or nothing; give a file name", path));
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return;  // a new file
  if (S_ISDIR(st.st_mode))
    throw Error(ExitCode::Usage, fmt::format("{}: the output path is a folder; give a file name", path));
  if (!S_ISREG(st.st_mode))
    throw Error(ExitCode::Output, fmt::format("{}: the output is {}, not a regular file; qconv replaces only regular "
                                              "files, and leaves it as it is", path, fileKind(st.st_mode)));
}

void convert(const ConvertOptions& options, std::ostream& out, std::ostream& err, spdlog::logger& log) {
  checkOutputPath(options.output);
  if (sameFile(options.input, options.output))
    throw Error(ExitCode::Usage, fmt::format("{}: output is the input file; qconv never modifies its input",
                                             options.output));
  if (options.activation_type == onnx::TensorProto::INT8 && options.weight_type == onnx::TensorProto::UINT8)
    throw Error(ExitCode::Usage, "--activation-type int8 with --weight-type uint8: no onnxruntime kernel takes int8 "
                                 "activations with uint8 weights");
  if (options.contrib && options.format == Format::Qdq)
    throw Error(ExitCode::Usage, "--contrib writes onnxruntime's QOperator ops: it goes with --format qop, not qdq");
  if (options.opset) checkOpsetFlag(options.opset);
  PassManager pm(options.passes.empty() ? pipelineFor(options.format) : options.passes);
  PassContext ctx(log,
                  PassOptions{options.raise_weight_scale, options.approximate, options.weight_type,
                              options.activation_type, options.check_saturation, options.opset, options.contrib,
                              options.format == Format::Qop},
                  options.input);

  io::InputModel input = pm.timeStage("read", [&] { return io::openModel(options.input); });
  const std::shared_ptr<io::ExternalFiles> files = input.files;  // what the file-backed tensors read from
  ir::Model model = pm.timeStage("import", [&] { return io::importModel(std::move(input), options.input); });
  pm.run(model, ctx, options.dump ? &out : nullptr);

  io::WriteOptions write;
  write.durable = options.fsync;
  if (files) {
    write.protected_files = files->identities();
    write.external_data = !files->identities().empty() && !options.inline_data;
  }
  if (struct stat st {}; stat(options.input.c_str(), &st) == 0)  // never removed as a stale data file
    write.protected_files.emplace_back(static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino));
  io::FileBacked fileBacked;  // the output's tensors whose bytes are still in the input's files
  write.file_backed = &fileBacked;
  onnx::ModelProto result = pm.timeStage("emit", [&] {
    onnx::ModelProto m = io::exportModel(model, &fileBacked);
    if (!ctx.approximations().empty()) {
      auto* prop = m.add_metadata_props();
      prop->set_key("qconv.approximations");
      std::string all;
      for (const auto& a : ctx.approximations()) all += a + "\n";
      prop->set_value(all);
    }
    return m;
  });
  // The ONNX checker judges the output before it is renamed into place.
  io::PendingWrite pending = pm.timeStage("write", [&] { return io::writeTemporary(result, options.output, write); });
  pm.timeStage("check", [&] {
    if (std::string why = io::checkModel(result, &fileBacked); !why.empty()) refuseInvalid(options.input, why);
  });
  pm.timeStage("commit", [&] { pending.commit(); });
  log.info("{}: {}", options.output, summary(ctx));
  if (options.time_passes)
    for (const auto& t : pm.timings()) fmt::print(err, "qconv: time: {:<20} {:9.2f} ms\n", t.name, t.milliseconds);
}

/// stderr's sink: each message through printable() (diag.h) before it is formatted and written.
class PrintableSink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  explicit PrintableSink(std::ostream& os) : os_(os) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const std::string text = printable(std::string_view(msg.payload.data(), msg.payload.size()));
    spdlog::details::log_msg safe = msg;
    safe.payload = text;
    spdlog::memory_buf_t line;
    formatter_->format(safe, line);
    os_.write(line.data(), static_cast<std::streamsize>(line.size()));
    os_.flush();
  }
  void flush_() override { os_.flush(); }

 private:
  std::ostream& os_;
};

}  // namespace

int run(const ConvertOptions& options, std::ostream& out, std::ostream& err) {
  auto sink = std::make_shared<PrintableSink>(err);
  spdlog::logger log("qconv", sink);
  log.set_pattern("qconv: %l: %v");
  log.set_level(options.verbosity <= 0 ? spdlog::level::warn
                                       : options.verbosity == 1 ? spdlog::level::info : spdlog::level::debug);
  try {
    convert(options, out, err, log);
    return 0;
  } catch (const Error& e) {
    log.error("{}", e.what());
    return static_cast<int>(e.code());
  } catch (const std::bad_alloc&) {
    log.error("{}: out of memory: the conversion needs more memory than this process may have (ulimit -v, a "
              "cgroup's limit); nothing was written", options.input);
    return static_cast<int>(ExitCode::OutOfMemory);
  } catch (const std::exception& e) {
    log.error("internal error: {}", e.what());
    return static_cast<int>(ExitCode::Internal);
  }
}

}  // namespace qconv
