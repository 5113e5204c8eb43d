// printable() and Error: what qconv prints of a model's names is shown, never sent, and bounded.
#include <catch2/catch.hpp>

#include "qconv/diag.h"

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
