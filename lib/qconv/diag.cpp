#include "qconv/diag.h"

#include <sys/stat.h>

namespace qconv {

void internalError(const char* file, int line, const std::string& what) {
  throw Error(ExitCode::Internal, fmt::format("internal error at {}:{}: {}", file, line, what));
}

const char* fileKind(unsigned mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return S_ISREG(mode) ? "a regular file" : "not a regular file";
}

std::string withoutNul(const std::string& message) {
  if (message.find('\0') == std::string::npos) return message;
  std::string out;
  for (char c : message) out += c == '\0' ? std::string("\\x00") : std::string(1, c);
  return out;
}

std::string printable(std::string_view text, size_t max_bytes) {
  std::string out;
  size_t i = 0;
  // past the bound, finish the UTF-8 character under way (its continuation bytes), then stop
  for (; i < text.size() && (out.size() < max_bytes || (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const bool c1 = c == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(text[i + 1]) <= 0x9F;  // U+0080..U+009F in UTF-8
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02x}", c);
    else if (c1) out += fmt::format("\\u{:04x}", static_cast<unsigned char>(text[++i]));
    else out += static_cast<char>(c);
  }
  if (i < text.size()) out += fmt::format("... [{} more bytes]", text.size() - i);
  return out;
}

}  // namespace qconv
