#include "qconv/passes/pass.h"

#include <fmt/format.h>

#include <algorithm>

namespace qconv {

const char* reportKindName(Report kind) {
  switch (kind) {
    case Report::Refused:
      return "refused";
    case Report::Unconvertible:
      return "unconvertible";
    case Report::Done:
      return "done";
    case Report::Detail:
      return "detail";
    case Report::Approximation:
      return "approximation";
    case Report::Warning:
      return "warning";
    case Report::Advisory:
      return "advisory";
  }
  return "unknown";
}

void PassContext::report(Report kind, const std::string& subject, const std::string& text) {
  // the level each kind is printed at: notes with -v, details with -vv, the rest by default
  Level level = Level::Note;
  if (kind == Report::Detail) level = Level::Debug;
  if (kind == Report::Approximation || kind == Report::Warning) level = Level::Warning;
  diagnostics_.say(level, reportKindName(kind), subject, text);
  if (kind == Report::Detail) return;  // not kept
  if (kind == Report::Unconvertible) unconvertible_.emplace(subject, text);
  said_.push_back({kind, pass_, subject, text});
}

std::vector<std::string> PassContext::reports(std::initializer_list<Report> kinds) const {
  std::vector<std::string> lines;
  for (const Said& s : said_)
    if (std::find(kinds.begin(), kinds.end(), s.kind) != kinds.end()) lines.push_back(fmt::format("{}: {}", s.subject, s.text));
  return lines;
}

size_t PassContext::advisories() const {
  return static_cast<size_t>(std::count_if(said_.begin(), said_.end(), [](const Said& s) { return s.kind == Report::Advisory; }));
}

std::string PassContext::unconvertibleReason(const std::string& label) const {
  auto it = unconvertible_.find(label);
  return it == unconvertible_.end() ? std::string() : it->second;
}

const std::vector<PassInfo>& passRegistry() {
  static const std::vector<PassInfo> registry = {
#define QCONV_PASS(NAME, FN, FORMATS, PHASE, SUMMARY) {NAME, &FN, PassFormats::FORMATS, PassPhase::PHASE, SUMMARY},
#include "qconv/passes/passes.def"
#undef QCONV_PASS
  };
  return registry;
}

std::string_view phaseName(PassPhase phase) {
  switch (phase) {
    case PassPhase::Read:
      return "read";
    case PassPhase::Canonical:
      return "canonicalize";
    case PassPhase::Qop:
      return "write QOp";
    case PassPhase::Target:
      return "fit a target";
  }
  return "?";
}

const PassInfo* findPass(std::string_view name) {
  for (const auto& p : passRegistry())
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace qconv
