#include "qconv/diag.h"

namespace qconv {

void internalError(const char* file, int line, const std::string& what) {
  throw Error(ExitCode::Internal, fmt::format("internal error at {}:{}: {}", file, line, what));
}

}  // namespace qconv
