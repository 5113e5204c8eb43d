// Failure tiers (see docs/architecture.md):
//  1. our own bugs: QCONV_ASSERT, which throws an Error with ExitCode::Internal;
//  2. a refused match: a pass keeps a reason string and carries on (never an Error);
//  3. bad input: an Error naming the file and, where it applies, the node.
#pragma once

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace qconv {

/// Documented exit codes of the qconv command (README.md, docs/cli.md).
enum class ExitCode : int {
  Ok = 0,
  Usage = 2,        // bad flags or arguments
  BadInput = 3,     // cannot read the input, or it is not a valid ONNX model
  Unsupported = 4,  // valid model, but a construct qconv cannot convert exactly
  Output = 5,       // cannot write the output
  Internal = 70,    // a bug in qconv
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

/// The text of errno, for a message about a failed system call.
inline std::string sysError() { return std::strerror(errno); }

[[noreturn]] void internalError(const char* file, int line, const std::string& what);

}  // namespace qconv

#define QCONV_ASSERT(cond, ...)                                                   \
  do {                                                                             \
    if (!(cond)) ::qconv::internalError(__FILE__, __LINE__, fmt::format(__VA_ARGS__)); \
  } while (false)
