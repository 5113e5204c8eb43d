// The output pair (issue 16): OUT and the data file it names are put in place together, the
// data file named by its content, so no instant and no failure leaves OUT naming other bytes.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "model_builder.h"
#include "qconv/diag.h"
#include "qconv/io/content_hash.h"
#include "qconv/io/model_io.h"
#include "qconv/io/temp_file.h"

using namespace qtest;
namespace fs = std::filesystem;

namespace {
fs::path freshDir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("qconv-unit-" + std::to_string(getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

/// A model whose one initializer (2 KiB of `fill`) goes to the data file.
onnx::ModelProto modelFilledWith(char fill) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {512});
  auto* w = b.graph().add_initializer();
  w->set_name("w");
  w->set_data_type(TensorProto::FLOAT);
  w->add_dims(512);
  w->set_raw_data(std::string(2048, fill));
  b.node("Add", {"x", "w"}, {"y"}, "add");
  b.output("y", TensorProto::FLOAT);
  return b.proto();
}

std::set<std::string> listing(const fs::path& d) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(d)) names.insert(e.path().filename().string());
  return names;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

/// The data file OUT names, and that it holds `fill` where OUT says w is.
std::string checkPair(const fs::path& out, char fill) {
  onnx::ModelProto m = qconv::io::readModelFile(out.string());
  const auto& w = m.graph().initializer(0);
  REQUIRE(w.data_location() == TensorProto::EXTERNAL);
  std::string location;
  uint64_t offset = 0, length = 0;
  for (const auto& e : w.external_data()) {
    if (e.key() == "location") location = e.value();
    if (e.key() == "offset") offset = std::stoull(e.value());
    if (e.key() == "length") length = std::stoull(e.value());
  }
  REQUIRE(qconv::io::isDataFileName("out.onnx", location));
  const std::string bytes = slurp(out.parent_path() / location);
  REQUIRE(length == 2048);
  REQUIRE(bytes.size() >= offset + length);
  REQUIRE(bytes.substr(offset, length) == std::string(2048, fill));
  return location;
}

/// The data file OUT names (threeWeights), after checking each weight's bytes there and the
/// file's name against a hash of its bytes.
std::string checkWeights(const fs::path& out) {
  onnx::ModelProto m = qconv::io::readModelFile(out.string());
  std::string location;
  for (const auto& w : m.graph().initializer()) {
    REQUIRE(w.data_location() == TensorProto::EXTERNAL);
    uint64_t offset = 0, length = 0;
    for (const auto& e : w.external_data()) {
      if (e.key() == "location") location = e.value();
      if (e.key() == "offset") offset = std::stoull(e.value());
      if (e.key() == "length") length = std::stoull(e.value());
    }
    REQUIRE(offset % qconv::io::kExternalAlignment == 0);
    const std::string bytes = slurp(out.parent_path() / location);
    REQUIRE(bytes.substr(offset, length) == std::string(static_cast<size_t>(w.dims(0)), static_cast<char>('a' + (w.name()[1] - '1'))));
  }
  const std::string bytes = slurp(out.parent_path() / location);
  qconv::io::ContentHash hash;
  hash.add(bytes.data(), bytes.size());
  REQUIRE(location == qconv::io::dataFileName("out.onnx", hash.value()));
  return location;
}

qconv::io::WriteOptions external() {
  qconv::io::WriteOptions o;
  o.external_data = true;
  return o;
}
}  // namespace

TEST_CASE("the data file is named by a hash of its bytes") {
  REQUIRE(qconv::io::dataFileName("m.onnx", 0xabcULL) == "m.onnx.0000000000000abc.data");
  REQUIRE(qconv::io::isDataFileName("m.onnx", "m.onnx.0123456789abcdef.data"));
  for (const char* other : {"m.onnx.data", "m.onnx.0123456789ABCDEF.data", "m.onnx.0123456789abcdeg.data",
                            "m.onnx.0123456789abcde.data", "n.onnx.0123456789abcdef.data", "m.onnx.0123456789abcdef"})
    REQUIRE_FALSE(qconv::io::isDataFileName("m.onnx", other));
  // the hash: the same bytes the same value, in one piece or many; one byte more or changed, another
  std::string bytes(100003, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 131 + 7);
  qconv::io::ContentHash whole, pieces, longer, changed;
  whole.add(bytes.data(), bytes.size());
  for (size_t at = 0; at < bytes.size(); at += 33) pieces.add(bytes.data() + at, std::min<size_t>(33, bytes.size() - at));
  longer.add(bytes.data(), bytes.size());
  longer.add("\0", 1);
  bytes[5000] ^= 1;
  changed.add(bytes.data(), bytes.size());
  REQUIRE(whole.value() == pieces.value());
  REQUIRE(whole.value() != longer.value());
  REQUIRE(whole.value() != changed.value());
}

namespace {
uint64_t hashOf(const std::string& bytes, qconv::io::ContentHash::Kernel kernel = qconv::io::ContentHash::Kernel::best) {
  qconv::io::ContentHash h(kernel);
  h.add(bytes.data(), bytes.size());
  return h.value();
}
}  // namespace

TEST_CASE("the data file's hash: the vector code gives the word-at-a-time code's value, and place matters") {
  std::string bytes(5000, '\0');
  uint64_t x = 0x2545f4914f6cdd1dULL;
  for (char& c : bytes) c = static_cast<char>((x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 56);
  using Kernel = qconv::io::ContentHash::Kernel;
  // every length across blocks (1 KiB) and their tails, whole, and cut in pieces at odd places
  for (size_t n = 0; n <= 2100; n += (n < 200 ? 1 : 7)) {
    const std::string head = bytes.substr(0, n);
    const uint64_t best = hashOf(head);
    REQUIRE(best == hashOf(head, Kernel::scalar));
    qconv::io::ContentHash cut, cutScalar(Kernel::scalar);
    for (size_t at = 0, piece = 1; at < n; at += piece, piece = piece * 3 % 97 + 1) {
      cut.add(head.data() + at, std::min(piece, n - at));
      cutScalar.add(head.data() + at, std::min(piece, n - at));
    }
    REQUIRE(cut.value() == best);
    REQUIRE(cutScalar.value() == best);
  }
  // two stripes (64 bytes) of one block swapped, or of two blocks: another value
  std::string swapped = bytes;
  std::swap_ranges(swapped.begin() + 64, swapped.begin() + 128, swapped.begin() + 320);
  REQUIRE(hashOf(swapped) != hashOf(bytes));
  swapped = bytes;
  std::swap_ranges(swapped.begin(), swapped.begin() + 64, swapped.begin() + 1024);
  REQUIRE(hashOf(swapped) != hashOf(bytes));
  // zeros of different lengths (the tail's padding is zeros): different values
  REQUIRE(hashOf(std::string(63, '\0')) != hashOf(std::string(64, '\0')));
  REQUIRE(hashOf(std::string()) != hashOf(std::string(1, '\0')));
  // the names are a format: these values are the data-file names of released outputs, and a
  // change to them must keep the old function for the sweep as ContentHashV1 is kept
  REQUIRE(hashOf(std::string()) == 0x473aec5fa6ac51b5ULL);
  REQUIRE(hashOf("qconv") == 0xd7d1413e0b3ffa37ULL);
  qconv::io::ContentHashV1 v1;
  v1.add("qconv", 5);
  REQUIRE(v1.value() == 0x947793e705940e47ULL);  // the value the hash before this one gave (7156ae9)
}

TEST_CASE("a data file an earlier qconv named (ContentHashV1) is still its own to replace") {
  const fs::path d = freshDir("v1");
  const fs::path out = d / "out.onnx";
  auto a = modelFilledWith('a');
  qconv::io::writeModel(a, out.string(), external());
  const std::string da = checkPair(out, 'a');
  // the same bytes under the name the hash before gave them, and under a name no hash gives them
  const std::string bytes = slurp(d / da);
  qconv::io::ContentHashV1 v1;
  v1.add(bytes.data(), bytes.size());
  const std::string old_name = qconv::io::dataFileName("out.onnx", v1.value());
  const std::string look_alike = qconv::io::dataFileName("out.onnx", v1.value() ^ 1);
  REQUIRE(old_name != da);
  fs::copy_file(d / da, d / old_name);
  fs::copy_file(d / da, d / look_alike);
  auto b = modelFilledWith('b');
  qconv::io::writeModel(b, out.string(), external());
  const std::string db = checkPair(out, 'b');
  REQUIRE(listing(d) == std::set<std::string>{"out.onnx", db, look_alike});
  fs::remove_all(d);
}

TEST_CASE("a new output replaces the old pair and removes the old data file") {
  const fs::path d = freshDir("pair");
  const fs::path out = d / "out.onnx";
  auto a = modelFilledWith('a');
  qconv::io::writeModel(a, out.string(), external());
  const std::string da = checkPair(out, 'a');
  REQUIRE(listing(d) == std::set<std::string>{"out.onnx", da});
  // an unrelated file, a data file of another output, and the old naming: none is qconv's to remove
  for (const char* keep : {"out.onnx.data", "other.onnx.0123456789abcdef.data", "out.onnx.notes"})
    std::ofstream(d / keep) << "keep";
  auto b = modelFilledWith('b');
  qconv::io::writeModel(b, out.string(), external());
  const std::string db = checkPair(out, 'b');
  REQUIRE(db != da);
  REQUIRE(listing(d) == std::set<std::string>{"out.onnx", db, "out.onnx.data", "other.onnx.0123456789abcdef.data",
                                              "out.onnx.notes"});
  // the same bytes again: the same name, and nothing else changes
  auto b2 = modelFilledWith('b');
  qconv::io::writeModel(b2, out.string(), external());
  REQUIRE(checkPair(out, 'b') == db);
  // an output with no data file: the last one goes
  auto inline_b = modelFilledWith('b');
  qconv::io::writeModel(inline_b, out.string(), {});
  REQUIRE(listing(d) == std::set<std::string>{"out.onnx", "out.onnx.data", "other.onnx.0123456789abcdef.data",
                                              "out.onnx.notes"});
  fs::remove_all(d);
}

TEST_CASE("between the two renames the old pair is whole, and a failed commit keeps it") {
  const fs::path d = freshDir("failed");
  const fs::path out = d / "out.onnx";
  auto a = modelFilledWith('a');
  qconv::io::writeModel(a, out.string(), external());
  const std::string da = checkPair(out, 'a');

  // the model's rename fails after the data file went in: the old pair stays, the new data goes
  auto b = modelFilledWith('b');
  qconv::io::PendingWrite failing = qconv::io::writeTemporary(b, out.string(), external());
  std::set<std::string> during;
  REQUIRE_THROWS_WITH(failing.commit([&] {
    during = listing(d);
    REQUIRE(checkPair(out, 'a') == da);  // the instant between the renames: OUT still names a whole pair
    throw qconv::Error(qconv::ExitCode::Output, "out.onnx: injected: the model's rename failed");
  }),
                      "out.onnx: injected: the model's rename failed");
  // out.onnx, the old data file and the new one (the model's temporary is unnamed, or hidden)
  REQUIRE(std::count_if(during.begin(), during.end(), [](const std::string& n) { return n[0] != '.'; }) == 3);
  REQUIRE(during.count(da) == 1);
  REQUIRE(checkPair(out, 'a') == da);
  REQUIRE(listing(d) == std::set<std::string>{"out.onnx", da});

  // the same write, committed: the new pair, and only it
  auto b2 = modelFilledWith('b');
  qconv::io::writeTemporary(b2, out.string(), external()).commit();
  const std::string db = checkPair(out, 'b');
  REQUIRE(listing(d) == std::set<std::string>{"out.onnx", db});
  fs::remove_all(d);
}

TEST_CASE("a failed commit of the same bytes keeps the data file the old model names") {
  const fs::path d = freshDir("same");
  const fs::path out = d / "out.onnx";
  auto a = modelFilledWith('a');
  qconv::io::writeModel(a, out.string(), external());
  const std::string da = checkPair(out, 'a');
  auto again = modelFilledWith('a');
  qconv::io::PendingWrite failing = qconv::io::writeTemporary(again, out.string(), external());
  REQUIRE_THROWS(failing.commit([] { throw qconv::Error(qconv::ExitCode::Output, "injected"); }));
  REQUIRE(checkPair(out, 'a') == da);
  REQUIRE(listing(d) == std::set<std::string>{"out.onnx", da});
  fs::remove_all(d);
}

TEST_CASE("the sweep's names: data files and the temporaries a killed commit leaves, of that output only") {
  REQUIRE(qconv::io::linkedTemporaryBase(".m.onnx.qconv-123-0") == "m.onnx");
  REQUIRE(qconv::io::linkedTemporaryBase(".m.onnx.data.qconv-7-12") == "m.onnx.data");
  for (const char* no : {"m.onnx.qconv-1-0", ".m.onnx.qconv-AbC123", ".m.onnx.qconv-1-", ".m.onnx.qconv--1", ".qconv-1-0",
                         ".m.onnx.qconv-1-0x"})
    REQUIRE(qconv::io::linkedTemporaryBase(no).empty());
  REQUIRE(qconv::io::isSweptName("m.onnx", "m.onnx.0123456789abcdef.data"));
  REQUIRE(qconv::io::isSweptName("m.onnx", ".m.onnx.qconv-1-0"));
  REQUIRE(qconv::io::isSweptName("m.onnx", ".m.onnx.data.qconv-1-0"));
  REQUIRE_FALSE(qconv::io::isSweptName("m.onnx", ".n.onnx.qconv-1-0"));
  REQUIRE_FALSE(qconv::io::isSweptName("m.onnx", "m.onnx.data"));
  REQUIRE(qconv::io::sweptNameOwners(".a.data.qconv-1-0") == std::vector<std::string>{"a.data", "a"});
  REQUIRE(qconv::io::sweptNameOwners("a.0123456789abcdef.data") == std::vector<std::string>{"a"});
  REQUIRE(qconv::io::sweptNameOwners("a.data").empty());
}

TEST_CASE("only a data file whose bytes hash to its name is qconv's: a look-alike stays, a killed commit's leftovers go") {
  const fs::path d = freshDir("tag");
  const std::string out = (d / "out.onnx").string();
  onnx::ModelProto a = modelFilledWith('a');
  qconv::io::WriteOptions options;
  options.external_data = true;
  qconv::io::writeModel(a, out, options);
  const std::string da = checkPair(out, 'a');
  REQUIRE(qconv::io::tagMatches((d / da).string()));
  // a look-alike: a name of the pattern, other bytes; and what a commit killed after its link left
  std::ofstream(d / "out.onnx.0123456789abcdef.data") << "user's bytes";
  REQUIRE_FALSE(qconv::io::tagMatches((d / "out.onnx.0123456789abcdef.data").string()));
  std::ofstream(d / ".out.onnx.qconv-99999-0") << "a killed commit's model";
  std::ofstream(d / ".out.onnx.data.qconv-99999-1") << "a killed commit's data";
  onnx::ModelProto b = modelFilledWith('b');
  qconv::io::writeModel(b, out, options);
  REQUIRE(listing(d) == std::set<std::string>{"out.onnx", checkPair(out, 'b'), "out.onnx.0123456789abcdef.data"});
  fs::remove_all(d);
}

namespace {
/// w1, w2 and w3 (3, 5 and 2 KiB of 'a', 'b', 'c'), each going to the data file.
onnx::ModelProto threeWeights() {
  ModelBuilder b;
  b.input("x", TensorProto::UINT8, {1});
  const std::pair<const char*, size_t> weights[] = {{"w1", 3072}, {"w2", 5120}, {"w3", 2048}};
  for (const auto& [name, size] : weights) {
    auto* w = b.graph().add_initializer();
    w->set_name(name);
    w->set_data_type(TensorProto::UINT8);
    w->add_dims(static_cast<int64_t>(size));
    w->set_raw_data(std::string(size, static_cast<char>('a' + (name[1] - '1'))));
  }
  b.node("Concat", {"x", "w1", "w2", "w3"}, {"y"}, "cat");
  b.output("y", TensorProto::UINT8);
  return b.proto();
}

/// The data file of `model` written to `out`, w1 and w2 first kept by an ExternalFiles (beside
/// `out` when `beside`; `dead` a tensor kept too that the model no longer has).
std::string writeKept(const fs::path& out, bool beside, bool dead) {
  onnx::ModelProto m = threeWeights();
  qconv::io::ExternalFiles files((out.parent_path() / "in.onnx").string());
  if (beside) files.keepBeside(out.string());
  qconv::io::FileBacked backed;
  for (int i = 0; i < 2; ++i) {
    auto& t = *m.mutable_graph()->mutable_initializer(i);
    std::string bytes = t.raw_data();
    if (i == 1 && dead) {
      onnx::TensorProto gone = t;
      files.keep(gone, std::string(1000, 'z'));
    }
    backed[&t] = files.range(files.keep(t, std::move(bytes)));
  }
  qconv::io::WriteOptions o = external();
  o.file_backed = &backed;
  o.kept = files.kept();
  REQUIRE(o.kept->beside_output == beside);
  qconv::io::writeModel(m, out.string(), o);
  REQUIRE((o.kept->file == nullptr) == (beside && !dead));  // taken as the data file, or copied from
  return checkWeights(out);
}
}  // namespace

TEST_CASE("tensors a pass kept beside the output become its data file: the bytes and name a copy gets") {
  const fs::path d = freshDir("kept");
  const fs::path out = d / "out.onnx";
  onnx::ModelProto plain = threeWeights();
  qconv::io::writeModel(plain, out.string(), external());
  const std::string copied = checkWeights(out);
  const std::string bytes = slurp(d / copied);
  for (const auto& [beside, dead] : {std::pair{true, false}, {true, true}, {false, false}}) {
    INFO("kept beside the output: " << beside << ", a dead tensor kept: " << dead);
    fs::remove_all(d);
    fs::create_directories(d);
    REQUIRE(writeKept(out, beside, dead) == copied);
    REQUIRE(slurp(d / copied) == bytes);
    REQUIRE(listing(d) == std::set<std::string>{"out.onnx", copied});  // nothing else was left beside it
  }
  fs::remove_all(d);
}
