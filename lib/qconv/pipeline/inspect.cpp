// qconv inspect: what a model is (dialects, operators, quantized tensors) and what
// `qconv convert` would do with it (a dry run of the pipeline: nothing is written).
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>
#include <set>
#include <unordered_set>

#include "qconv/analysis/contents.h"
#include "qconv/diag.h"
#include "qconv/io/model_io.h"
#include "qconv/ir/tensor.h"
#include "qconv/pipeline/item.h"
#include "qconv/pipeline/pass_manager.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

using Json = nlohmann::ordered_json;

struct TensorSummary {
  std::string tensor, type, granularity;
  size_t scales = 0;
  double scale_min = 0, scale_max = 0;
  std::vector<int64_t> zero_points;  // the distinct ones, in order
  bool constant = true;
};

TensorSummary summarize(const analysis::QuantSite& s) {
  TensorSummary t;
  t.tensor = s.tensor->name();
  int32_t type = s.zero_point && s.zero_point->isConstant() ? s.zero_point->initializer()->data_type() : s.tensor->elemType();
  if (!type && !s.zero_point) type = static_cast<int32_t>(s.node->attrInt("output_dtype", 0));
  if (!type && !s.zero_point) type = onnx::TensorProto::UINT8;  // QuantizeLinear's default
  const bool in_uint8 = s.packed && s.tensor->elemType() == onnx::TensorProto::UINT8;  // MatMulNBits' B
  t.type = in_uint8 ? fmt::format("{}-bit, packed in uint8", s.node->attrInt("bits", 4)) : ir::typeName(type);
  std::string why;
  std::optional<std::vector<float>> scale;
  if (s.scale->isConstant()) scale = ir::readWidenedFloats(*s.scale, &why);
  if (!scale || scale->empty()) {
    t.constant = false;
    t.granularity = "parameters computed at run time";
    return t;
  }
  t.scales = scale->size();
  t.scale_min = *std::min_element(scale->begin(), scale->end());
  t.scale_max = *std::max_element(scale->begin(), scale->end());
  t.granularity = s.packed       ? fmt::format("blocked, block_size {} ({} scales; {}'s packed layout)", s.block_size,
                                                t.scales, s.node->opType())
                  : s.block_size ? fmt::format("blocked along axis {}, block_size {} ({} scales)", s.axis,
                                               s.block_size, t.scales)
                  : t.scales == 1 ? "per tensor"
                  : s.axis >= 0   ? fmt::format("per axis {} ({})", s.axis, t.scales)
                                  : fmt::format("per axis ({})", t.scales);
  if (s.zero_point && s.zero_point->isConstant() && !s.packed) {
    if (auto zp = ir::readInts(*s.zero_point, &why)) {
      std::set<int64_t> seen;
      for (int64_t z : *zp)
        if (seen.insert(z).second && t.zero_points.size() < 8) t.zero_points.push_back(z);
    }
  } else if (!s.zero_point) {
    t.zero_points = {0};
  }
  return t;
}

struct Description {
  std::map<std::string, std::map<std::string, int>> dialects;  // dialect -> its ops -> count
  std::map<std::string, int> ops;
  std::vector<TensorSummary> tensors;
};

/// What analysis::contentsOf reads, as inspect shows it.
Description describe(const ir::Model& model) {
  analysis::Contents c = analysis::contentsOf(model);
  Description d{std::move(c.dialects), std::move(c.ops), {}};
  for (const analysis::QuantSite& s : c.tensors) d.tensors.push_back(summarize(s));
  return d;
}

/// The nodes check-saturation advised about in the dry run (its Advisory lines).
std::vector<const Said*> saturationRisks(const ItemReport& run) {
  std::vector<const Said*> risks;
  for (const Said& s : run.said)
    if (s.pass == "check-saturation" && s.kind == Report::Advisory) risks.push_back(&s);
  return risks;
}

Json toJson(const InspectCommand& c, const Description& d, const ItemReport& run) {
  Json j;
  j["qconv_inspect"] = 1;
  j["model"] = c.model;
  j["exit_code"] = 0;
  j["error"] = Json();
  j["error_node"] = Json();
  Json dialects = Json::array();
  for (const auto& [name, ops] : d.dialects) dialects.push_back({{"dialect", name}, {"ops", ops}});
  j["dialects"] = std::move(dialects);
  j["ops"] = d.ops;
  Json tensors = Json::array();
  for (const TensorSummary& t : d.tensors) {
    Json e{{"tensor", t.tensor}, {"type", t.type}, {"granularity", t.granularity}};
    e["scales"] = t.scales;
    e["scale_min"] = t.constant ? Json(t.scale_min) : Json();
    e["scale_max"] = t.constant ? Json(t.scale_max) : Json();
    e["zero_points"] = t.zero_points;
    tensors.push_back(std::move(e));
  }
  j["quantized_tensors"] = std::move(tensors);
  Json convert = itemJson(run);
  convert.erase("output");
  convert.erase("data_file");
  convert.erase("dialects");  // said above, of the same reading
  convert.erase("quantized_tensors");
  convert["format"] = c.format == Format::Qop ? "qop" : "qdq";
  convert["target"] = c.target.empty() ? Json() : Json(c.target);
  j["convert"] = std::move(convert);
  Json saturation = Json::array();
  for (const Said* s : saturationRisks(run)) saturation.push_back({{"node", s->subject}, {"message", s->text}});
  j["saturation"] = std::move(saturation);
  return j;
}

void printText(std::ostream& out, const InspectCommand& c, const Description& d, const ItemReport& run) {
  fmt::print(out, "model: {}\n", c.model);
  if (d.dialects.empty()) fmt::print(out, "dialects: none (no quantization this tool knows)\n");
  for (const auto& [name, ops] : d.dialects) {
    std::string list;
    for (const auto& [op, n] : ops) list += fmt::format("{}{} {}", list.empty() ? "" : ", ", op, n);
    fmt::print(out, "dialect: {} ({})\n", name, list);
  }
  std::string ops;
  for (const auto& [op, n] : d.ops) ops += fmt::format("{}{} {}", ops.empty() ? "" : ", ", op, n);
  fmt::print(out, "ops: {}\n", ops.empty() ? "none" : ops);
  fmt::print(out, "quantized tensors: {}\n", d.tensors.size());
  for (const TensorSummary& t : d.tensors) {
    std::string zps;
    for (int64_t z : t.zero_points) zps += fmt::format("{}{}", zps.empty() ? "" : ", ", z);
    if (!t.constant) fmt::print(out, "  {}: {}, {}\n", t.tensor, t.type, t.granularity);
    else if (zps.empty() && t.scales == 1) fmt::print(out, "  {}: {}, {}, scale {:.6g}\n", t.tensor, t.type, t.granularity, t.scale_min);
    else if (zps.empty()) fmt::print(out, "  {}: {}, {}, scale {:.6g} to {:.6g}\n", t.tensor, t.type, t.granularity, t.scale_min, t.scale_max);
    else if (t.scales == 1) fmt::print(out, "  {}: {}, {}, scale {:.6g}, zero point {}\n", t.tensor, t.type, t.granularity, t.scale_min, zps);
    else fmt::print(out, "  {}: {}, {}, scale {:.6g} to {:.6g}, zero points {}\n", t.tensor, t.type, t.granularity, t.scale_min, t.scale_max, zps);
  }
  const char* format = c.format == Format::Qop ? "qop" : "qdq";
  fmt::print(out, "convert --format {}{}: {}\n", format, c.target.empty() ? "" : " --target " + c.target,
             run.exit_code ? fmt::format("would fail with exit {}: {}", run.exit_code, run.error) : "would succeed");
  for (const Rewritten& g : run.rewritten) {
    std::string became;
    for (const auto& b : g.became) became += (became.empty() ? "" : ", ") + b;
    const std::string what = !became.empty() ? (g.kept ? "stays, with " : "becomes ") + became
                             : g.kept ? "stays; the nodes around it change" : "removed";
    fmt::print(out, "  {} ({}): {} [{}]\n", g.node, g.op, what, g.pass);
  }
  for (const Said& s : run.said)
    if (s.kind == Report::Refused || s.kind == Report::Unconvertible || s.kind == Report::Approximation)
      fmt::print(out, "  {}: {} [{}]\n", s.subject, s.text, s.pass);
  const TargetProfile* target = c.target.empty() ? &unrestricted() : findTarget(c.target);
  if (!target || target->saturating_kernels.empty()) {  // the target's runtime has no such kernel
    fmt::print(out, "x86 u8 x s8 saturation risk: none for --target {} (its runtime has no such kernel)\n", c.target);
    return;
  }
  const auto risks = saturationRisks(run);
  fmt::print(out, "{} x86 u8 x s8 saturation risk (CPUs without VNNI): {}\n", target->saturating_kernels,
             risks.empty() ? "none" : std::to_string(risks.size()) + " node(s)");
  for (const Said* r : risks) fmt::print(out, "  {}: {}\n", r->subject, r->text);
}

}  // namespace

void dryRun(ir::Model& model, const ConvertOptions& options, ItemReport& report) {
  const Diagnostics quiet(nullptr, 0);  // no sink: what the passes say goes to the report only
  PassContext ctx(quiet, passOptionsOf(options), model.path);
  PassManager pm(pipelineFor(options.format));
  const io::OpSchemas schemas;
  pm.inferShapesWith(schemas);  // as convert runs it
  try {
    runPasses(pm, model, ctx, &report, nullptr, nullptr);  // each node's outcome, as convert's report has it
    io::FileBacked fileBacked;  // the large tensors stay in the input's files, as in convert
    onnx::ModelProto emitted = pm.timeStage("emit", [&] { return io::exportModel(model, &fileBacked); });
    nameOutputNodes(report.trace, emitted.graph());
    pm.timeStage("check", [&] { checkEmitted(emitted, &fileBacked, model.path, schemas, options.input_bytes); });
  } catch (...) {
    report.trace.forgetOutput();  // nothing convert would write
    const Failure failed = failureOf(model.path);
    report.exit_code = failed.code;
    report.error = printable(failed.what);
    report.error_node = failed.node;
  }
  keepWhatWasSaid(ctx, report);
  report.stages = pm.timings();
}

std::string inspectFailureJson(const std::string& model, int code, const std::string& error,
                               const std::string& error_node) {
  Json j;
  j["qconv_inspect"] = 1;
  j["model"] = model.empty() ? Json() : Json(model);
  j["exit_code"] = code;
  j["error"] = printable(error);
  j["error_node"] = error_node.empty() ? Json() : Json(error_node);
  return jsonText(j);
}

int inspect(const InspectCommand& command, std::ostream& out, std::ostream& err) {
  StderrLines lines(err);
  return inspect(command, out, lines);
}

int inspect(const InspectCommand& command, std::ostream& out, DiagnosticSink& sink) {
  const Diagnostics log(&sink, 1, command.model, false);
  try {
    ConvertOptions options;  // the conversion to dry-run: --format, or the target's
    options.format = command.format;
    options.format_given = command.format_given || command.target.empty();
    options.target = command.target;
    options = withTarget(options);
    options.input_bytes = command.model_bytes;
    InspectCommand resolved = command;
    resolved.format = options.format;
    if (!command.model_bytes) requireWholePath("the model path", command.model);
    io::InputModel input = openInput(command.model, command.model_bytes);
    const std::shared_ptr<io::ExternalFiles> files = input.files;
    ir::Model model = io::importModel(std::move(input), command.model);
    const Description d = describe(model);
    ItemReport run;
    run.input = command.model;
    dryRun(model, options, run);
    if (files) files->checkUnchanged();  // described from the bytes the files still have
    // what convert calls unreadable or invalid is inspect's failure too (exit 3), not a description
    if (run.exit_code == static_cast<int>(ExitCode::BadInput) || run.exit_code == static_cast<int>(ExitCode::Internal) ||
        run.exit_code == static_cast<int>(ExitCode::OutOfMemory))
      throw Error(static_cast<ExitCode>(run.exit_code), run.error, run.error_node);
    if (command.json) {
      out << jsonText(toJson(resolved, d, run));  // JSON escapes what a terminal would act on
    } else {
      std::ostringstream text;
      printText(text, resolved, d, run);
      std::istringstream lines_in(text.str());
      for (std::string line; std::getline(lines_in, line);) out << printable(line, size_t{1} << 20) << '\n';
    }
    return 0;
  } catch (...) {
    const Failure failed = failureOf(command.model);
    log.error(failed.what, failed.node);
    if (command.json) out << inspectFailureJson(command.model, failed.code, failed.what, failed.node);  // one object, also then
    return failed.code;
  }
}

}  // namespace qconv
