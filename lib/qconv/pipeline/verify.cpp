// qconv verify: read a model, run the static checks of analysis/verify.h, print the findings.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <map>
#include <nlohmann/json.hpp>

#include "qconv/analysis/verify.h"
#include "qconv/diag.h"
#include "qconv/io/model_io.h"
#include "qconv/pipeline/item.h"

namespace qconv {

int verify(const VerifyCommand& command, std::ostream& out, std::ostream& err) {
  StderrLines lines(err);
  const auto log = stderrLogger(lines, command.verbosity);
  std::vector<analysis::Finding> findings;
  try {
    ir::Model model = io::importModel(io::openModel(command.model), command.model);
    findings = analysis::verifyModel(model, analysis::VerifyOptions{command.symmetric});
  } catch (...) {
    const auto [code, what] = failureOf(command.model);
    log->error("{}", what);
    return code;
  }
  const int code = static_cast<int>(findings.empty() ? ExitCode::Ok : ExitCode::Findings);
  if (command.json) {
    nlohmann::ordered_json j;
    j["qconv_verify"] = 1;
    j["model"] = command.model;
    j["exit_code"] = code;
    j["findings"] = nlohmann::ordered_json::array();
    for (const auto& f : findings)
      j["findings"].push_back({{"kind", f.kind}, {"node", f.node}, {"tensor", f.tensor}, {"message", f.message}});
    out << jsonText(j);
  } else {
    for (const auto& f : findings) fmt::print(out, "{}\n", printable(fmt::format("{}: {}: {}: {}", command.model, f.node, f.kind, f.message)));
  }
  std::map<std::string, int> kinds;
  for (const auto& f : findings) ++kinds[f.kind];
  std::string summary;
  for (const auto& [k, n] : kinds) summary += fmt::format("{}{} {}", summary.empty() ? "" : ", ", n, k);
  log->info("{}: {}", command.model, findings.empty() ? "no findings" : fmt::format("{} finding(s): {}", findings.size(), summary));
  return code;
}

}  // namespace qconv
