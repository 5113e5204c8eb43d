// qconv verify: read a model as convert reads it, run the static checks of analysis/verify.h,
// print the findings.
//
// The model is judged with convert's strictness (issue 25): after the checks, the validate pass
// and the ONNX checker on the model as qconv would emit it unchanged, with convert's verdict when
// it fails (checkEmitted: the input's fault, exit 3, or qconv's, 70). So what convert calls
// unreadable or invalid (exit 3), or beyond it (exit 4), verify does too, its findings (which
// often say why: scale-invalid, zero-point-range, per-axis) listed all the same; exit 1 is a
// valid model with findings.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "qconv/analysis/contents.h"
#include "qconv/analysis/verify.h"
#include "qconv/diag.h"
#include "qconv/io/model_io.h"
#include "qconv/pipeline/item.h"
#include "qconv/pipeline/write_plan.h"

namespace qconv {

namespace {

/// verify's one JSON object (docs/cli.md): for its findings, an unreadable model, or a usage error.
nlohmann::ordered_json verifyObject(const std::string& model, const std::string& target, int code, const std::string& error,
                       const std::string& error_node, const std::vector<std::string>& dialects, size_t tensors, analysis::Severity fail_on, size_t ignored,
                       const std::vector<analysis::Finding>& findings) {
  nlohmann::ordered_json j;
  j["qconv_verify"] = 1;
  j["model"] = model.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(model);
  j["target"] = target.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(target);
  j["exit_code"] = code;
  j["error"] = error.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(error);
  j["error_node"] = error_node.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(error_node);
  j["dialects"] = dialects;
  j["quantized_tensors"] = tensors;
  j["fail_on"] = analysis::severityName(fail_on);
  j["ignored"] = ignored;
  j["findings"] = nlohmann::ordered_json::array();
  for (const auto& f : findings)
    j["findings"].push_back({{"kind", f.kind}, {"node", f.node}, {"tensor", f.tensor}, {"message", f.message},
                             {"severity", analysis::severityName(f.severity)}});
  return j;
}

std::string verifyJson(const std::string& model, const std::string& target, int code, const std::string& error,
                       const std::string& error_node, const std::vector<std::string>& dialects, size_t tensors,
                       analysis::Severity fail_on, size_t ignored, const std::vector<analysis::Finding>& findings) {
  return jsonText(verifyObject(model, target, code, error, error_node, dialects, tensors, fail_on, ignored, findings));
}

/// A node of the model, as verify's report lists it.
struct InputNode {
  std::string label;  // what findings name it by
  std::string op;
  std::string id;  // Model Explorer's (explorerNodeIds)
};

/// Each node's row: its worst finding's severity as its outcome ("will-not-run" for what the
/// target cannot run), every finding's message as its reason, their kinds as its "passes".
std::vector<NodeOverlay> nodeRows(const std::vector<InputNode>& nodes, const std::vector<analysis::Finding>& findings,
                                  nlohmann::ordered_json& rows) {
  std::map<std::string, std::vector<const analysis::Finding*>> of;
  for (const analysis::Finding& f : findings) of[f.node].push_back(&f);
  std::vector<NodeOverlay> overlay;
  rows = nlohmann::ordered_json::array();
  for (const InputNode& n : nodes) {
    std::string outcome = "ok", reason, kinds;
    analysis::Severity worst = analysis::Severity::Note;
    bool any = false, target = false;
    if (auto it = of.find(n.label); it != of.end()) {
      // the runtime's reason first, then the worst
      std::stable_sort(it->second.begin(), it->second.end(), [](const analysis::Finding* a, const analysis::Finding* b) {
        return (a->kind == "target") != (b->kind == "target") ? a->kind == "target" : a->severity > b->severity;
      });
      for (const analysis::Finding* f : it->second) {
        if (!any || f->severity > worst) worst = f->severity;
        any = true;
        target = target || f->kind == "target";
        reason += (reason.empty() ? "" : "; ") + f->message;
        if (kinds.find(f->kind) == std::string::npos) kinds += (kinds.empty() ? "" : ", ") + f->kind;
      }
    }
    if (any) outcome = target ? "will-not-run" : analysis::severityName(worst);
    rows.push_back({{"name", n.label}, {"op", n.op}, {"outcome", outcome}, {"passes", kinds}, {"reason", reason},
                    {"became", nlohmann::ordered_json::array()}});
    overlay.push_back({n.id, outcome, reason});
  }
  return overlay;
}

}  // namespace

std::string usageErrorJson(const std::string& command, const std::string& model, const std::string& error) {
  const int code = static_cast<int>(ExitCode::Usage);
  if (command == "inspect") return inspectFailureJson(model, code, error, "");
  return verifyJson(model, "", code, printable(error), "", {}, 0, analysis::Severity::Error, 0, {});
}

int verify(const VerifyCommand& command, std::ostream& out, std::ostream& err) {
  StderrLines lines(err);
  return verify(command, out, lines);
}

int verify(const VerifyCommand& command, std::ostream& out, DiagnosticSink& sink) {
  const Diagnostics log(&sink, command.verbosity, command.model, false);
  if (const std::string why = command.model_bytes ? "" : wholePathError("the model path", command.model); !why.empty()) {
    log.error(why);
    if (command.json) out << usageErrorJson("verify", "", why);
    return static_cast<int>(ExitCode::Usage);
  }
  for (const std::string& kind : command.ignore)
    if (!analysis::findKind(kind)) {
      std::string kinds;
      for (const auto& k : analysis::findingKinds()) kinds += fmt::format("{}{}", kinds.empty() ? "" : ", ", k.name);
      const std::string what = fmt::format("--ignore {}: no such kind of finding; verify's kinds are {}", kind, kinds);
      log.error(what);
      if (command.json) out << usageErrorJson("verify", command.model, what);
      return static_cast<int>(ExitCode::Usage);
    }
  WritePlan plan;  // --report and --node-data: never the model, nor its data files, nor each other
  if (!command.report.empty() || !command.node_data.empty()) {
    try {
      requireWholePath("the report path", command.report);
      requireWholePath("the node data path", command.node_data);
      plan = planWrites(command.model_bytes ? std::vector<std::string>{} : std::vector<std::string>{command.model}, {},
                        command.report, command.node_data);
    } catch (const Error& e) {
      log.error(e.what());
      if (command.json) out << usageErrorJson("verify", command.model, e.what());
      return static_cast<int>(e.code());
    }
  }
  std::vector<analysis::Finding> findings;
  std::vector<InputNode> nodes;
  std::string graph_id;
  analysis::Contents held;
  int code = 0;
  std::string error, error_node;
  try {
    io::InputModel input = openInput(command.model, command.model_bytes);
    const std::shared_ptr<io::ExternalFiles> files = input.files;
    ir::Model model = io::importModel(std::move(input), command.model);
    const TargetProfile* target = nullptr;
    if (!command.target.empty() && !(target = findTarget(command.target)))
      throw Error(ExitCode::Usage, fmt::format("--target {}: no such target ('qconv targets' lists them)", command.target));
    graph_id = graphId(model.shell.graph().name());
    std::vector<const onnx::NodeProto*> protos;
    for (const ir::Node* n : model.graph.nodes()) protos.push_back(&n->proto());
    const std::vector<std::string> ids = explorerNodeIds(protos);
    size_t at = 0;
    for (const ir::Node* n : model.graph.nodes())
      nodes.push_back({n->label(), qualifiedOp(*n), ids[at++]});
    held = analysis::contentsOf(model);  // what convert and inspect read, too
    findings = analysis::verifyModel(model, analysis::VerifyOptions{command.symmetric, target});
    // With a target: what its runtime cannot run in the model as it is (verifyModel), and what
    // convert --target refuses, from convert's own passes, so that the two cannot disagree.
    if (target) {
      ConvertOptions options;  // the target's own format, as convert --target alone writes
      options.target = command.target;
      options.format_given = false;
      options = withTarget(options);
      options.input_bytes = command.model_bytes;
      // read again from the folder the first read opened: one model's findings, whatever the
      // folder's path names meanwhile
      ir::Model again = io::importModel(openInput(command.model, command.model_bytes, files ? files->folderFd() : -1),
                                        command.model);
      ItemReport run;
      dryRun(again, options, run);
      // what convert refuses, and what it rewrites because the runtime fails on it as it is
      const analysis::Severity severity = analysis::findKind("target")->severity;
      for (const Said& s : run.said) {
        if (s.kind == Report::Unconvertible) {
          const bool known = std::any_of(findings.begin(), findings.end(), [&](const analysis::Finding& f) {
            return f.kind == "target" && f.node == s.subject && f.message == s.text;
          });
          if (!known) findings.push_back({"target", s.subject, "", s.text, severity});
        } else if (const std::string_view why = target->failsAsItIs(s.pass); s.kind == Report::Done && !why.empty()) {
          findings.push_back({"target", s.subject, "",
                              fmt::format("as it is, {}; convert --target {}: {} ({})", why, target->name, s.text, s.pass),
                              severity});
        }
      }
    }
    const Diagnostics quiet(nullptr, 0);  // no sink: validate refuses by throwing, and says nothing else
    PassContext ctx(quiet, PassOptions{}, command.model);
    const PassInfo* validate = findPass("validate");
    QCONV_ASSERT(validate, "no validate pass");
    ctx.setPass(validate->name);
    validate->run(model, ctx);
    io::FileBacked fileBacked;  // the large tensors stay in the input's files, as in convert
    onnx::ModelProto emitted = io::exportModel(model, &fileBacked);
    const io::OpSchemas schemas;
    checkEmitted(emitted, &fileBacked, command.model, schemas, command.model_bytes);
    if (files) files->checkUnchanged();  // the findings are of the bytes the files still have
  } catch (...) {
    const Failure failed = failureOf(command.model);
    log.error(failed.what, failed.node);
    code = failed.code;
    error = printable(failed.what);
    error_node = failed.node;
  }
  if (!code && held.quantizesNothing())
    findings.push_back({"no-quantization", command.model, "", analysis::kNothingQuantized,
                        analysis::findKind("no-quantization")->severity});
  // --ignore: set aside, as a linter does; counted in the summary
  const auto kept_end = std::stable_partition(findings.begin(), findings.end(), [&](const analysis::Finding& f) {
    return std::find(command.ignore.begin(), command.ignore.end(), f.kind) == command.ignore.end();
  });
  const auto ignored = static_cast<size_t>(findings.end() - kept_end);
  findings.erase(kept_end, findings.end());
  const bool failing = std::any_of(findings.begin(), findings.end(),
                                   [&](const analysis::Finding& f) { return f.severity >= command.fail_on; });
  if (!code) code = static_cast<int>(failing ? ExitCode::Findings : ExitCode::Ok);
  if (command.json) {  // one object, also when the model cannot be read
    out << verifyJson(command.model, command.target, code, error, error_node, held.dialectNames(), held.tensors.size(), command.fail_on,
                      ignored, findings);
  } else {
    for (const auto& f : findings)
      fmt::print(out, "{}\n", printable(fmt::format("{}: {}: {}: {}: {}", command.model, f.node,
                                                    analysis::severityName(f.severity), f.kind, f.message)));
  }
  std::map<analysis::Severity, std::map<std::string, int>> counted;
  for (const auto& f : findings) ++counted[f.severity][f.kind];
  std::string summary;
  for (auto sev : {analysis::Severity::Error, analysis::Severity::Warning, analysis::Severity::Note}) {
    if (!counted.count(sev)) continue;
    int n = 0;
    std::string kinds;
    for (const auto& [k, c] : counted[sev]) {
      n += c;
      kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", c, k);
    }
    summary += fmt::format("{}{} {}{} ({})", summary.empty() ? "" : "; ", n, analysis::severityName(sev),
                           n == 1 ? "" : "s", kinds);
  }
  if (summary.empty()) summary = "no findings";
  if (ignored) summary += fmt::format("; {} ignored", ignored);
  if (!command.report.empty() || !command.node_data.empty()) {
    // the files, from the one object --json prints (and each node's rows from the same findings)
    nlohmann::ordered_json rows;
    const std::vector<NodeOverlay> overlay = nodeRows(nodes, findings, rows);
    nlohmann::ordered_json j = verifyObject(command.model, command.target, code, error, error_node, held.dialectNames(),
                                            held.tensors.size(), command.fail_on, ignored, findings);
    j["graph"] = graph_id.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(graph_id);
    j["nodes"] = rows;
    try {
      if (!command.report.empty()) {
        std::string text = jsonText(j);
        if (wantsHtml(command.report)) {
          nlohmann::ordered_json item = j;  // the page's one item: the model, as convert's report has its input
          item["input"] = command.model;
          item["summary"] = error.empty() ? summary : "";
          nlohmann::ordered_json page;
          page["command"] = "verify";
          page["target"] = j["target"];
          page["exit_code"] = code;
          page["items"] = nlohmann::ordered_json::array({item});
          text = reportPage(page.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
        }
        io::writeTextFile(command.report, text, plan.report_folder);
      }
      if (!command.node_data.empty() && !nodes.empty())
        io::writeTextFile(command.node_data, nodeDataJson(graph_id, overlay), plan.node_data_folder);
    } catch (const Error& e) {
      log.error(e.what());
      return std::max(code, static_cast<int>(e.code()));
    }
  }
  if (!error.empty()) return code;
  log.say(Level::Info, "summary", "", summary);
  return code;
}

}  // namespace qconv
