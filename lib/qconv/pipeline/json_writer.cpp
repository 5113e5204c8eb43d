#include "qconv/pipeline/json_writer.h"

#include <fmt/format.h>

#include <cmath>

#include "qconv/diag.h"

namespace qconv {

void JsonWriter::newline() {
  if (!indent_) return;
  out_ += '\n';
  out_.append(counts_.size() * static_cast<size_t>(indent_), ' ');
}

void JsonWriter::beforeValue() {
  if (after_key_) {  // an object's value: its key placed it
    after_key_ = false;
    return;
  }
  if (counts_.empty()) return;  // the document's one value
  if (counts_.back()++) out_ += ',';
  newline();
}

void JsonWriter::key(std::string_view k) {
  QCONV_ASSERT(!counts_.empty() && !after_key_, "a JSON key outside an object");
  if (counts_.back()++) out_ += ',';
  newline();
  quoted(k);
  out_ += indent_ ? ": " : ":";
  after_key_ = true;
}

void JsonWriter::open(char c) {
  beforeValue();
  out_ += c;
  counts_.push_back(0);
}

void JsonWriter::close(char c) {
  QCONV_ASSERT(!counts_.empty() && !after_key_, "a JSON container closed twice, or after a key");
  const size_t n = counts_.back();
  counts_.pop_back();
  if (n) newline();
  out_ += c;
}

void JsonWriter::value(std::string_view s) {
  beforeValue();
  quoted(s);
}

void JsonWriter::value(int64_t n) {
  beforeValue();
  fmt::format_to(std::back_inserter(out_), "{}", n);
}

void JsonWriter::value(size_t n) {
  beforeValue();
  fmt::format_to(std::back_inserter(out_), "{}", n);
}

void JsonWriter::value(double d) {
  beforeValue();
  if (!std::isfinite(d)) {
    out_ += "null";  // as nlohmann writes NaN and infinities
    return;
  }
  const size_t at = out_.size();
  fmt::format_to(std::back_inserter(out_), "{}", d);  // the shortest text that reads back as d
  if (out_.find_first_of(".eE", at) == std::string::npos) out_ += ".0";  // a number with a fraction, as nlohmann's
}

void JsonWriter::value(bool b) {
  beforeValue();
  out_ += b ? "true" : "false";
}

void JsonWriter::null() {
  beforeValue();
  out_ += "null";
}

void JsonWriter::stringOrNull(std::string_view s) {
  if (s.empty()) null();
  else value(s);
}

void JsonWriter::strings(const std::vector<std::string>& list) {
  beginArray();
  for (const std::string& s : list) value(s);
  endArray();
}

namespace {

/// The length of the UTF-8 sequence at `s[i]`, or 0 when it is not one (overlong, a surrogate,
/// past U+10FFFF, cut short): what nlohmann's decoder rejects.
size_t utf8Length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  auto cont = [&](size_t k) { return k < s.size() && (b(k) & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(i + 1) || !cont(i + 2)) return 0;
    if (c == 0xE0 && b(i + 1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(i + 1) >= 0xA0) return 0;  // a surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
    if (c == 0xF0 && b(i + 1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(i + 1) >= 0x90) return 0;  // past U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

void JsonWriter::quoted(std::string_view s) {
  out_ += '"';
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {  // most of every name: copied as a run
      size_t j = i + 1;
      while (j < s.size()) {
        const auto d = static_cast<unsigned char>(s[j]);
        if (d < 0x20 || d >= 0x80 || d == '"' || d == '\\') break;
        ++j;
      }
      out_.append(s.substr(i, j - i));
      i = j;
      continue;
    }
    switch (c) {
      case '"': out_ += "\\\""; break;
      case '\\': out_ += "\\\\"; break;
      case '\b': out_ += "\\b"; break;
      case '\f': out_ += "\\f"; break;
      case '\n': out_ += "\\n"; break;
      case '\r': out_ += "\\r"; break;
      case '\t': out_ += "\\t"; break;
      default:
        if (c < 0x20) {
          fmt::format_to(std::back_inserter(out_), "\\u{:04x}", c);
        } else if (const size_t n = utf8Length(s, i)) {
          out_.append(s.substr(i, n));
          i += n;
          continue;
        } else {
          out_ += "\xEF\xBF\xBD";  // U+FFFD for a byte that starts no UTF-8 sequence
        }
    }
    ++i;
  }
  out_ += '"';
}

std::string JsonWriter::take() {
  QCONV_ASSERT(counts_.empty(), "JSON text taken with {} containers open", counts_.size());
  if (indent_) out_ += '\n';
  return std::move(out_);
}

}  // namespace qconv
