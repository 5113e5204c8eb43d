// What qconv says, as records: each message a command or a pass has for its user is a
// Diagnostic (level, kind, file, node, text) handed to a DiagnosticSink. The CLI's sink prints
// each as one stderr line ("qconv: <level>: <line>"); the Python binding's keeps the records, which
// become `result.messages`, the logger's records and the exceptions, so no text format stands
// between two of qconv's own layers. The line is made here, once, for both.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace qconv {

/// How much a message matters; a command's verbosity says which it shows: 0 (-q) errors; 1
/// warnings and info too; 2 (-v) notes too; 3 (-vv) debug lines too.
enum class Level : uint8_t { Error, Warning, Info, Note, Debug };

/// "error", "warning", "info", "note", "debug": the word the line carries.
std::string_view levelName(Level level);

struct Diagnostic {
  Level level = Level::Info;
  /// What it is: "error"; a pass's report: "refused", "unconvertible", "done", "advisory",
  /// "approximation", "warning", "detail"; a command's: "summary", "unchanged", "contents",
  /// "time", "batch".
  std::string kind;
  std::string file;  // the model it is about, as the command was given it (empty: none, a usage error)
  std::string node;  // the node (its label) or tensor it is about, or empty
  std::string text;  // what is said (an error: the whole message, which names its file and node itself)
  /// The line as the command prints it after "qconv: <level>: ": file, node and text joined by
  /// ": " (an approximation's text after "approximation: "; an error's own text, with the file
  /// in front only in a batch), made printable (diag.h).
  std::string line;
};

/// Where a command's diagnostics go. emit() and progress() may be called from several threads
/// at once (a batch's conversions): a sink serializes them.
class DiagnosticSink {
 public:
  virtual ~DiagnosticSink() = default;
  virtual void emit(const Diagnostic& d) = 0;
  /// The progress line of a long conversion (pipeline/progress.h): shown in place, or cleared
  /// when `text` is empty. Only a terminal's sink shows it.
  virtual void progress(const std::string& text) { (void)text; }
};

/// What one command or conversion says: its file and verbosity, and the sink (null: nothing is
/// said, as in a dry run whose words become findings).
class Diagnostics {
 public:
  /// `file_in_errors`: an error's line names the file in front (a batch's items; a lone run's
  /// error names its own file).
  Diagnostics(DiagnosticSink* sink, int verbosity, std::string file = {}, bool file_in_errors = true);

  bool shows(Level level) const { return sink_ && level <= shown_; }
  /// A message about `node` (empty: the file as a whole).
  void say(Level level, std::string_view kind, std::string_view node, std::string_view text) const;
  /// A message shown at every verbosity, -q too (a batch's total, --time-passes's lines).
  void always(Level level, std::string_view kind, std::string_view text) const;
  /// An error: `what` is the whole message (it names its file, and `node` where it is about one).
  void error(std::string_view what, std::string_view node = {}) const;
  const std::string& file() const { return file_; }

 private:
  void emit(Level level, std::string_view kind, std::string_view node, std::string_view text, bool whole) const;
  DiagnosticSink* sink_;
  Level shown_;
  std::string file_;
  bool file_in_errors_;
};

}  // namespace qconv
