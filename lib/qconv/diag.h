// Failure tiers (see docs/architecture.md):
//  1. our own bugs: QCONV_ASSERT, which throws an Error with ExitCode::Internal;
//  2. a refused match: a pass keeps a reason string and carries on (never an Error);
//  3. bad input: an Error naming the file and, where it applies, the node.
#pragma once

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace qconv {

/// Documented exit codes of the qconv command (README.md, docs/cli.md).
enum class ExitCode : int {
  Ok = 0,
  Findings = 1,     // qconv verify: the model has findings
  Usage = 2,        // bad flags or arguments
  BadInput = 3,     // cannot read the input, or it is not a valid ONNX model
  Unsupported = 4,  // valid model, but a construct qconv cannot convert exactly
  Output = 5,       // cannot write the output
  OutOfMemory = 6,  // the conversion needs more memory than the process may have
  Unchanged = 7,    // --require-change: nothing in the input is quantized, or nothing was rewritten
  Internal = 70,    // a bug in qconv
  Cancelled = 130,  // the library's caller cancelled (ConvertOptions::cancel): nothing was committed
};

/// `message` with each NUL shown as \x00: what() is a C string, which would end at the first.
std::string withoutNul(const std::string& message);

class Error : public std::runtime_error {
 public:
  /// `node`: the node the message names (its label), where it names one; the report and the
  /// Python API carry it apart from the text.
  Error(ExitCode code, const std::string& message, std::string node = {})
      : std::runtime_error(withoutNul(message)), code_(code), node_(std::move(node)) {}
  ExitCode code() const { return code_; }
  const std::string& node() const { return node_; }

 private:
  ExitCode code_;
  std::string node_;
};

/// Throws Error(Cancelled) naming `what` when the caller has set `cancel` (null: never). A
/// cancelled conversion commits nothing (pipeline/run.h, ConvertOptions::cancel).
inline void throwIfCancelled(const std::atomic<bool>* cancel, const std::string& what) {
  if (cancel && cancel->load(std::memory_order_relaxed))
    throw Error(ExitCode::Cancelled, fmt::format("{}: cancelled; nothing was written", what));
}

/// The text of errno, for a message about a failed system call.
inline std::string sysError() { return std::strerror(errno); }

[[noreturn]] void internalError(const char* file, int line, const std::string& what);

/// What a file that is not a regular one is, for messages: "a folder", "a FIFO", ...
const char* fileKind(unsigned mode);

/// The longest message qconv prints, in bytes: the rest is cut and counted.
constexpr size_t kMaxMessageBytes = 4096;

/// `text` made safe for a terminal and a log reader: control characters (newline, ESC, BEL, NUL,
/// DEL, and the C1 controls U+0080..U+009F) shown as \n, \r, \t or \xNN instead of sent, so a
/// name in a model cannot forge or hide a line; cut to kMaxMessageBytes, with "... [N more
/// bytes]". Every line qconv writes to stderr goes through it (pipeline/run.cpp's sink).
std::string printable(std::string_view text, size_t max_bytes = kMaxMessageBytes);

}  // namespace qconv

#define QCONV_ASSERT(cond, ...)                                                   \
  do {                                                                             \
    if (!(cond)) ::qconv::internalError(__FILE__, __LINE__, fmt::format(__VA_ARGS__)); \
  } while (false)
