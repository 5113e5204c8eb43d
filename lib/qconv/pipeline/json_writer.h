// JSON text written as it goes, for the report (report.cpp): one string, no tree of values. A
// report lists every node of a model (5,000 for a large one), which nlohmann::json built as a
// tree and serialized at a third of a ResNet-50 conversion's instructions; this writes the
// same text (nlohmann's dump: 2-space indent or compact, `"key": value`, `[]` and `{}` when
// empty, bytes that are not UTF-8 as U+FFFD) at a fraction of that.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qconv {

class JsonWriter {
 public:
  /// `indent` 2: as nlohmann's dump(2); 0: compact, as dump(-1).
  explicit JsonWriter(int indent) : indent_(indent) {}

  void beginObject() { open('{'); }
  void endObject() { close('}'); }
  void beginArray() { open('['); }
  void endArray() { close(']'); }
  /// The key of the next value of an object.
  void key(std::string_view k);

  void value(std::string_view s);
  void value(const char* s) { value(std::string_view(s)); }
  void value(const std::string& s) { value(std::string_view(s)); }
  void value(int64_t n);
  void value(int n) { value(static_cast<int64_t>(n)); }
  void value(size_t n);
  void value(double d);
  void value(bool b);
  void null();
  /// A string, or null when it is empty.
  void stringOrNull(std::string_view s);
  void strings(const std::vector<std::string>& list);

  /// A key and its value.
  template <typename T>
  void field(std::string_view k, const T& v) {
    key(k);
    value(v);
  }
  void fieldOrNull(std::string_view k, std::string_view s) {
    key(k);
    stringOrNull(s);
  }
  void fieldStrings(std::string_view k, const std::vector<std::string>& list) {
    key(k);
    strings(list);
  }

  /// The text, with a newline after it when indented (as jsonText writes a file).
  std::string take();

 private:
  void open(char c);
  void close(char c);
  void beforeValue();  // the comma and the line of a value of an array (an object's: key())
  void newline();
  void quoted(std::string_view s);

  int indent_;
  std::string out_;
  std::vector<size_t> counts_;  // per open container: the values written in it
  bool after_key_ = false;
};

}  // namespace qconv
