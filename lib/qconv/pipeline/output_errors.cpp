#include "qconv/pipeline/output_errors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <set>
#include <string>

namespace qconv {

namespace {

/// What makes an output's finding the input's: its kind and tensor (node names change across
/// passes; a tensor keeps its name), or its kind and node when it names no tensor.
std::string keyOf(const analysis::Finding& f) { return f.kind + '\n' + (f.tensor.empty() ? f.node : f.tensor); }

/// "representation 2: a, b; scale-invalid 1: c" (at most 3 nodes per kind named).
std::string byKind(const std::vector<const analysis::Finding*>& findings) {
  std::map<std::string, std::vector<std::string>> nodes;
  for (const analysis::Finding* f : findings) nodes[f->kind].push_back(f->node);
  std::vector<std::string> parts;
  for (const auto& [kind, names] : nodes) {
    std::vector<std::string> shown(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(3, names.size())));
    parts.push_back(fmt::format("{} {}: {}{}", kind, names.size(), fmt::join(shown, ", "),
                                names.size() > shown.size() ? fmt::format(" and {} more", names.size() - shown.size()) : ""));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

}  // namespace

std::vector<analysis::Finding> verifyErrors(ir::Model& model, ValidScales* valid_scales) {
  std::vector<analysis::Finding> errors;
  analysis::VerifyOptions options;
  options.valid_scales = valid_scales;
  options.saturation = false;  // never an error, and it reads every weight
  for (analysis::Finding& f : analysis::verifyModel(model, options))
    if (f.severity == analysis::Severity::Error) errors.push_back(std::move(f));
  return errors;
}

void sayOutputErrors(const std::vector<analysis::Finding>& input_errors, ir::Model& output, PassContext& ctx) {
  const std::vector<analysis::Finding> errors = verifyErrors(output);
  if (errors.empty()) return;
  std::set<std::string> theirs;
  for (const analysis::Finding& f : input_errors) theirs.insert(keyOf(f));
  std::vector<const analysis::Finding*> kept, made;
  for (const analysis::Finding& f : errors) {
    (theirs.count(keyOf(f)) ? kept : made).push_back(&f);
    ctx.report(Report::Advisory, f.node, fmt::format("the output keeps an error ({}): {}", f.kind, f.message));
  }
  if (!kept.empty())
    ctx.report(Report::Warning, ctx.path(),
               fmt::format("the output keeps {} error{} `qconv verify` reports in the input too ({}): qconv keeps the "
                           "input's math; -v or `qconv verify` names each; `qconv verify` on the input says each one's remedy",
                           kept.size(), kept.size() == 1 ? "" : "s", byKind(kept)));
  if (!made.empty())
    ctx.report(Report::Warning, ctx.path(),
               fmt::format("the output has {} error{} `qconv verify` reports that the input has not ({}): qconv's own; "
                           "please report it with the input",
                           made.size(), made.size() == 1 ? "" : "s", byKind(made)));
}

}  // namespace qconv
