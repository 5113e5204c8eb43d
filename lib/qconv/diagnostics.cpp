#include "qconv/diagnostics.h"

#include <fmt/format.h>

#include "qconv/diag.h"

namespace qconv {

std::string_view levelName(Level level) {
  switch (level) {
    case Level::Error:
      return "error";
    case Level::Warning:
      return "warning";
    case Level::Info:
      return "info";
    case Level::Note:
      return "note";
    case Level::Debug:
      return "debug";
  }
  return "debug";
}

namespace {

Level shownAt(int verbosity) {
  if (verbosity <= 0) return Level::Error;
  if (verbosity == 1) return Level::Info;
  if (verbosity == 2) return Level::Note;
  return Level::Debug;
}

}  // namespace

Diagnostics::Diagnostics(DiagnosticSink* sink, int verbosity, std::string file, bool file_in_errors)
    : sink_(sink), shown_(shownAt(verbosity)), file_(std::move(file)), file_in_errors_(file_in_errors) {}

void Diagnostics::say(Level level, std::string_view kind, std::string_view node, std::string_view text) const {
  if (shows(level)) emit(level, kind, node, text, false);
}

void Diagnostics::always(Level level, std::string_view kind, std::string_view text) const {
  if (sink_) emit(level, kind, {}, text, false);
}

void Diagnostics::error(std::string_view what, std::string_view node) const {
  if (sink_) emit(Level::Error, "error", node, what, true);
}

void Diagnostics::emit(Level level, std::string_view kind, std::string_view node, std::string_view text,
                       bool whole) const {
  Diagnostic d;
  d.level = level;
  d.kind = kind;
  d.file = file_;
  d.node = node == file_ ? std::string_view() : node;  // a whole-model report names the file as its subject
  d.text = text;
  std::string line(text);
  if (!whole) {
    if (kind == "approximation") line = "approximation: " + line;
    if (!d.node.empty()) line = fmt::format("{}: {}", d.node, line);
  }
  line = printable(line);
  const std::string prefix = printable(file_ + ": ");
  if (!file_.empty() && (!whole || file_in_errors_) && line.rfind(prefix, 0) != 0) line = prefix + line;
  d.line = std::move(line);
  sink_->emit(d);
}

}  // namespace qconv
