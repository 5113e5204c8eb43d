// printable(), Error and the diagnostic records: what qconv prints of a model's names is shown, never sent, and bounded.
#include <catch2/catch.hpp>

#include <vector>

#include "qconv/diag.h"
#include "qconv/diagnostics.h"

TEST_CASE("printable shows control characters instead of sending them") {
  REQUIRE(qconv::printable("a\nb\rc\td") == "a\\nb\\rc\\td");
  REQUIRE(qconv::printable(std::string("x\0y", 3)) == "x\\x00y");
  REQUIRE(qconv::printable("\x1b[31m\x07\x7f") == "\\x1b[31m\\x07\\x7f");
  REQUIRE(qconv::printable("\xc2\x9b and \xc2\xa0") == "\\u009b and \xc2\xa0");  // C1 control vs NBSP
  REQUIRE(qconv::printable("caf\xc3\xa9") == "caf\xc3\xa9");
}

TEST_CASE("printable cuts a long text at a character boundary and counts the rest") {
  REQUIRE(qconv::printable(std::string(10, 'n'), 4) == "nnnn... [6 more bytes]");
  // the bound falls inside the two bytes of an e-acute: the character is finished, then cut
  REQUIRE(qconv::printable("abc\xc3\xa9xyz", 4) == "abc\xc3\xa9... [3 more bytes]");
}

TEST_CASE("an Error shows a NUL in its message instead of ending there") {
  const qconv::Error e(qconv::ExitCode::BadInput, std::string("location 'a\0b' is bad", 21));
  REQUIRE(std::string(e.what()) == "location 'a\\x00b' is bad");
}

namespace {

struct Kept final : qconv::DiagnosticSink {
  std::vector<qconv::Diagnostic> all;
  void emit(const qconv::Diagnostic& d) override { all.push_back(d); }
};

}  // namespace

TEST_CASE("diagnostics: records carry level, kind, file and node apart; the line joins them once") {
  Kept kept;
  const qconv::Diagnostics notes(&kept, 2, "m.onnx", false);  // -v, a lone run
  notes.say(qconv::Level::Note, "refused", "conv_17", "not fused: weight zero point is not constant");
  notes.say(qconv::Level::Warning, "approximation", "gelu_3", "Erf written as Gelu");
  notes.say(qconv::Level::Info, "summary", "", "wrote out.onnx: 3 QLinearConv");
  notes.say(qconv::Level::Note, "advisory", "m.onnx", "the model as a whole");  // a whole-model report
  notes.say(qconv::Level::Debug, "detail", "conv_17", "not shown at -v");
  notes.error("out.onnx: cannot write: No space left on device", "conv_17");
  notes.say(qconv::Level::Note, "refused", "bad\nname", "a name with a newline");
  REQUIRE(kept.all.size() == 6);
  const qconv::Diagnostic& r = kept.all[0];
  REQUIRE((r.level == qconv::Level::Note && r.kind == "refused" && r.file == "m.onnx" && r.node == "conv_17"));
  REQUIRE(r.text == "not fused: weight zero point is not constant");
  REQUIRE(r.line == "m.onnx: conv_17: not fused: weight zero point is not constant");
  REQUIRE(kept.all[1].line == "m.onnx: gelu_3: approximation: Erf written as Gelu");
  REQUIRE(kept.all[2].line == "m.onnx: wrote out.onnx: 3 QLinearConv");
  REQUIRE((kept.all[3].node.empty() && kept.all[3].line == "m.onnx: the model as a whole"));
  // an error's message names its own file: a lone run's line is that message, its node apart
  REQUIRE((kept.all[4].kind == "error" && kept.all[4].node == "conv_17"));
  REQUIRE(kept.all[4].line == "out.onnx: cannot write: No space left on device");
  REQUIRE(kept.all[5].line == "m.onnx: bad\\nname: a name with a newline");  // printable: no forged line
  REQUIRE(qconv::levelName(kept.all[1].level) == "warning");

  Kept batch;
  const qconv::Diagnostics item(&batch, 0, "a.onnx", true);  // -q, a batch's item
  item.say(qconv::Level::Warning, "warning", "", "not shown at -q");
  item.always(qconv::Level::Info, "time", "time: read 1.00 ms");
  item.error("out/a.onnx: cannot write");
  REQUIRE(batch.all.size() == 2);
  REQUIRE(batch.all[0].line == "a.onnx: time: read 1.00 ms");
  REQUIRE(batch.all[1].line == "a.onnx: out/a.onnx: cannot write");
  const qconv::Diagnostics none(nullptr, 3, "a.onnx");
  REQUIRE(!none.shows(qconv::Level::Error));
  none.error("said nowhere");
}
