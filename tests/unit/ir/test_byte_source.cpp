// Tensor bytes that stay in a file: the IR reads them only through an ir::ByteSource (io owns
// the files); a read that fails during a pass is bad input (exit 3) with its own message, and
// during the write a failed write (exit 5). Never a refusal, never exit 4 or 70.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>

#include "model_builder.h"
#include "qconv/diag.h"
#include "qconv/io/external_data.h"
#include "qconv/io/model_io.h"
#include "qconv/ir/tensor.h"
#include "qconv/pipeline/pass_manager.h"
#include "qconv/pipeline/run.h"
#include "qconv/quant.h"

using namespace qtest;
namespace fs = std::filesystem;

namespace {

/// Bytes in memory, served as a file would serve them; or a source whose reads fail.
class FakeSource : public qconv::ir::ByteSource {
 public:
  explicit FakeSource(std::string bytes, bool fails = false) : bytes_(std::move(bytes)), fails_(fails) {}
  void read(uint32_t span, uint64_t at, uint64_t n, char* out) const override {
    REQUIRE(span == 7);
    ++reads;
    if (fails_) throw qconv::Error(qconv::ExitCode::BadInput, "fake.onnx: initializer 'w': cannot read its bytes: EIO");
    std::copy_n(bytes_.data() + at, n, out);
  }
  std::optional<unsigned> writtenFloatFlaws(uint32_t span) const override {
    REQUIRE(span == 7);
    return written;
  }
  mutable int reads = 0;
  std::optional<unsigned> written;  // as a keeper says of what it wrote

 private:
  std::string bytes_;
  bool fails_;
};

/// An int8 [n] initializer whose bytes are in `source`.
qconv::ir::Value* fileBacked(qconv::ir::Graph& g, const FakeSource& source, int64_t n) {
  auto t = std::make_unique<onnx::TensorProto>();
  t->set_data_type(TensorProto::INT8);
  t->add_dims(n);
  t->set_data_location(TensorProto::EXTERNAL);
  qconv::ir::Value* v = g.addValue("w");
  g.setInitializer(v, std::move(t), qconv::ir::FileBytes{&source, 7, static_cast<uint64_t>(n)});
  return v;
}

struct Dir {
  fs::path path = fs::temp_directory_path() / ("qconv-bytes-" + std::to_string(getpid()));
  Dir() { fs::create_directories(path); }
  ~Dir() { fs::remove_all(path); }
  std::string operator/(const std::string& f) const { return (path / f).string(); }
};

/// Move initializer `name`'s bytes to `<dir>/<name>.data` and make it refer to them.
void externalize(onnx::ModelProto& m, const std::string& name, const Dir& d) {
  for (auto& t : *m.mutable_graph()->mutable_initializer()) {
    if (t.name() != name) continue;
    std::ofstream(d / (name + ".data"), std::ios::binary) << t.raw_data();
    const size_t length = t.raw_data().size();
    t.clear_raw_data();
    t.set_data_location(TensorProto::EXTERNAL);
    for (auto [k, v] : {std::pair<std::string, std::string>{"location", name + ".data"}, {"offset", "0"},
                        {"length", std::to_string(length)}}) {
      auto* e = t.add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
    return;
  }
  FAIL("no initializer " << name);
}

/// convModel with `name` in external data, read back as qconv reads it.
qconv::ir::Model importWithExternal(const ConvSpec& spec, const std::string& name, const Dir& d) {
  onnx::ModelProto m = convModel(spec).proto();
  externalize(m, name, d);
  qconv::io::writeModelAtomically(m, d / "in.onnx");
  return qconv::io::importModel(qconv::io::openModel(d / "in.onnx"), d / "in.onnx");
}

std::string passError(qconv::ir::Model& model, qconv::PassOptions options) {
  Reporter r(options);
  try {
    qconv::PassManager(qconv::pipelineFor(qconv::Format::Qop)).run(model, r.ctx, nullptr);
  } catch (const qconv::Error& e) {
    REQUIRE(e.code() == qconv::ExitCode::BadInput);  // exit 3
    REQUIRE(r.ctx.refusals().empty());
    return e.what();
  }
  FAIL("the passes ran without the bytes");
  return {};
}

}  // namespace

TEST_CASE("the IR reads a file-backed tensor through its source and nowhere else") {
  qconv::ir::Graph g;
  const FakeSource source(std::string("\x01\xff\x7f\x80", 4));
  const qconv::ir::Value* w = fileBacked(g, source, 4);
  std::string why;
  REQUIRE(qconv::ir::readInts(*w, &why) == std::vector<int64_t>{1, -1, 127, -128});
  REQUIRE(source.reads == 1);
  std::string buffer;
  qconv::ir::ByteStream in(*w, buffer);
  REQUIRE(in.ok());
  const uint8_t* b = in.next(4);
  REQUIRE((b && b[0] == 1 && b[1] == 0xff && b[3] == 0x80));
  REQUIRE(source.reads == 2);
  // the proto alone holds no bytes, and says so rather than reading anything
  REQUIRE_FALSE(qconv::ir::readInts(*w->initializer(), &why));
  REQUIRE(why == "its bytes are in a file, and it was read without them");
  REQUIRE_FALSE(qconv::ir::ByteStream(*w->initializer(), buffer).ok());
  REQUIRE(source.reads == 2);
  // a length that is not what the dims need is a reason, not a read past the end
  qconv::ir::Graph g2;
  auto t = std::make_unique<onnx::TensorProto>();
  t->set_data_type(TensorProto::INT8);
  t->add_dims(8);
  t->set_data_location(TensorProto::EXTERNAL);
  qconv::ir::Value* short_w = g2.addValue("w");
  g2.setInitializer(short_w, std::move(t), qconv::ir::FileBytes{&source, 7, 4});
  REQUIRE_FALSE(qconv::ir::readInts(*short_w, &why));
  REQUIRE(why == "its file holds 4 bytes, dims need 8");
  REQUIRE(qconv::ir::ByteStream(*short_w, buffer).why() == "tensor holds 4 bytes, dims need 8");
}

TEST_CASE("a source that fails is an Error of the input, whichever reader meets it") {
  qconv::ir::Graph g;
  const FakeSource source(std::string(4, '\0'), true);
  const qconv::ir::Value* w = fileBacked(g, source, 4);
  std::string why, buffer;
  auto expectEio = [](auto&& read) {
    try {
      read();
      FAIL("the read succeeded");
    } catch (const qconv::Error& e) {
      REQUIRE(e.code() == qconv::ExitCode::BadInput);
      REQUIRE(std::string(e.what()) == "fake.onnx: initializer 'w': cannot read its bytes: EIO");
    }
  };
  expectEio([&] { qconv::ir::readInts(*w, &why); });
  expectEio([&] {
    qconv::ir::ByteStream in(*w, buffer);
    in.next(1);
  });
}

TEST_CASE("external data that cannot be read during a pass exits 3 naming the file and tensor") {
  Dir d;
  SECTION("a scale validate reads") {
    qconv::ir::Model model = importWithExternal({}, "w_scale", d);
    fs::resize_file(d / "w_scale.data", 0);  // gone after it was opened and checked
    REQUIRE(passError(model, {}) == d / "in.onnx" +
                                        ": initializer 'w_scale' (bytes in 'w_scale.data'): changed while it was read "
                                        "(it is shorter than when it was opened); nothing was written");
  }
  SECTION("a weight shift-types streams") {
    qconv::ir::Model model = importWithExternal({}, "w", d);
    fs::resize_file(d / "w.data", 1);
    qconv::PassOptions options;
    options.weight_type = TensorProto::UINT8;
    REQUIRE(passError(model, options) == d / "in.onnx" +
                                             ": initializer 'w' (bytes in 'w.data'): changed while it was read (it "
                                             "is shorter than when it was opened); nothing was written");
  }
}

TEST_CASE("external data that cannot be read during the write exits 5, leaving no output") {
  Dir d;
  qconv::ir::Model model = importWithExternal({}, "w", d);
  Reporter r;
  qconv::PassManager(qconv::pipelineFor(qconv::Format::Qop)).run(model, r.ctx, nullptr);
  qconv::io::FileBacked file_backed;
  onnx::ModelProto out = qconv::io::exportModel(model, &file_backed);
  REQUIRE(file_backed.size() == 1);  // w, still in its file: the writer copies it from there
  // check-saturation read w in place: the writer writes from its mapping, where the shortened
  // file is an error of the write, not a signal; or, never read in place, copies it in the kernel
  REQUIRE(file_backed.begin()->second.memory);
  SECTION("from the pages a pass mapped") {}
  SECTION("from the file") { file_backed.begin()->second.memory = nullptr; }
  fs::resize_file(d / "w.data", 0);
  qconv::io::WriteOptions options;
  options.file_backed = &file_backed;
  try {
    qconv::io::writeModel(out, d / "out.onnx", options);
    FAIL("the write succeeded");
  } catch (const qconv::Error& e) {
    REQUIRE(e.code() == qconv::ExitCode::Output);
    REQUIRE(std::string(e.what()) == d / "out.onnx" +
                                         ": cannot copy tensor bytes from the input: the input file is shorter than "
                                         "when it was read");
  }
  REQUIRE_FALSE(fs::exists(d / "out.onnx"));
}

TEST_CASE("emit without a table reads file-backed bytes into the model") {
  Dir d;
  qconv::ir::Model model = importWithExternal({}, "w", d);
  onnx::ModelProto out = qconv::io::exportModel(model);
  const onnx::TensorProto* w = nullptr;
  for (const auto& t : out.graph().initializer())
    if (t.name() == "w") w = &t;
  REQUIRE(w);
  REQUIRE(w->data_location() == TensorProto::DEFAULT);
  REQUIRE(w->external_data_size() == 0);
  std::ifstream f(d / "w.data", std::ios::binary);
  REQUIRE(w->raw_data() == std::string(std::istreambuf_iterator<char>(f), {}));
  REQUIRE(qconv::io::checkModel(out).empty());
}

namespace {

/// An int8 [n] initializer `name` whose bytes (i * 7 + k, wrapping) are in `<dir>/<name>.data`,
/// resolved by `files` as the reader resolves external data.
qconv::ir::FileBytes externalTensor(qconv::io::ExternalFiles& files, const Dir& d, const std::string& name, size_t n,
                                    int k, onnx::TensorProto& t) {
  std::string bytes(n, '\0');
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>(i * 7 + static_cast<size_t>(k));
  std::ofstream(d / (name + ".data"), std::ios::binary) << bytes;
  t.set_name(name);
  t.set_data_type(TensorProto::INT8);
  t.add_dims(static_cast<int64_t>(n));
  t.set_data_location(TensorProto::EXTERNAL);
  auto* e = t.add_external_data();
  e->set_key("location");
  e->set_value(name + ".data");
  return files.resolve(t, "initializer '" + name + "'");
}

}  // namespace

TEST_CASE("a tensor read in place stays mapped for the writer, within the view window") {
  Dir d;
  constexpr uint64_t kWindow = 64 << 10;
  qconv::io::ExternalFiles files(d / "in.onnx", kWindow);
  onnx::TensorProto ta, tb, tc;
  const qconv::ir::FileBytes a = externalTensor(files, d, "a", 40 << 10, 1, ta);
  const qconv::ir::FileBytes b = externalTensor(files, d, "b", 40 << 10, 2, tb);
  const qconv::ir::FileBytes c = externalTensor(files, d, "c", 100 << 10, 3, tc);
  auto expectBytes = [](const char* p, size_t n, int k) {
    for (size_t i = 0; i < n; i += 997) REQUIRE(p[i] == static_cast<char>(i * 7 + static_cast<size_t>(k)));
  };
  REQUIRE_FALSE(files.range(a).memory);  // nothing viewed yet: the writer copies from the file
  const char* pa = files.view(a.span, 0, a.length);
  REQUIRE(pa);
  expectBytes(pa, a.length, 1);
  REQUIRE(files.range(a).memory == pa);
  // a part of a tensor is not the tensor: the writer copies it from the file
  REQUIRE(files.view(b.span, 0, 1024));
  REQUIRE_FALSE(files.range(b).memory);
  const char* pb = files.view(b.span, 1024, b.length - 1024) - 1024;
  REQUIRE(files.range(b).memory == pb);
  // 80 KiB held once b was whole, over the window: a's pages left, oldest first (its view
  // still reads its bytes: they are mapped again)
  REQUIRE_FALSE(files.range(a).memory);
  expectBytes(pa, a.length, 1);
  // a tensor larger than the window keeps only the window behind where it is read, and the
  // writer copies it from the file
  for (uint64_t at = 0; at < c.length; at += 16 << 10) {
    const uint64_t n = std::min<uint64_t>(16 << 10, c.length - at);
    const char* p = files.view(c.span, at, n);
    REQUIRE(p);
    for (uint64_t i = 0; i < n; i += 101) REQUIRE(p[i] == static_cast<char>((at + i) * 7 + 3));
  }
  REQUIRE_FALSE(files.range(b).memory);
  REQUIRE_FALSE(files.range(c).memory);
  // a file now shorter than its tensor is not shown in place: read() says what is wrong
  fs::resize_file(d / "c.data", 10);
  REQUIRE_FALSE(files.view(c.span, 0, 1));
}

TEST_CASE("the writer writes the same bytes from a pass's mapping as from the file") {
  Dir d;
  // the model, or its data file, written from the pages check-saturation mapped, or copied
  auto written = [&](bool mapped, bool external_data) {
    qconv::ir::Model model = importWithExternal({}, "w", d);
    Reporter r;
    qconv::PassManager(qconv::pipelineFor(qconv::Format::Qop)).run(model, r.ctx, nullptr);
    qconv::io::FileBacked file_backed;
    onnx::ModelProto out = qconv::io::exportModel(model, &file_backed);
    REQUIRE(file_backed.begin()->second.memory);  // check-saturation read w in place
    if (!mapped) file_backed.begin()->second.memory = nullptr;
    qconv::io::WriteOptions options;
    options.file_backed = &file_backed;
    options.external_data = external_data;
    const std::string dir = d / (mapped ? "mapped" : "copied");
    fs::create_directories(dir);
    qconv::io::writeModel(out, dir + "/out.onnx", options);
    std::string all;
    std::set<fs::path> files(fs::directory_iterator(dir), {});  // the model and its data file, by name
    for (const fs::path& f : files) {
      std::ifstream in(f, std::ios::binary);
      all += f.filename().string() + ":" + std::string(std::istreambuf_iterator<char>(in), {}) + "\n";
    }
    fs::remove_all(dir);
    return all;
  };
  for (bool external_data : {false, true}) {
    const std::string mapped = written(true, external_data);
    REQUIRE(mapped.size() > 100);
    REQUIRE(mapped == written(false, external_data));
  }
}

TEST_CASE("the keeper's buffers: a spare whose bytes hold the request first, and no large spare for a small request") {
  Dir d;
  qconv::io::ExternalFiles files(d / "in.onnx");
  constexpr size_t kBig = 8 << 20, kSmall = 2 << 20;
  std::string big = files.buffer(kBig);
  const char* const big_at = big.data();
  files.recycle(std::move(big));
  // 1 MiB: not the 8 MiB spare (it would come back holding 1 MiB, and the next 8 MiB request
  // would write 7 MiB of zeros over it)
  std::string small = files.buffer(1 << 20);
  REQUIRE(small.size() == size_t{1} << 20);
  REQUIRE(small.data() != big_at);
  // 8 MiB: the spare, whose bytes already hold 8 MiB
  big = files.buffer(kBig);
  REQUIRE(big.data() == big_at);
  REQUIRE(big.size() == kBig);
  // between a spare holding 2 MiB in room for 3.5 and one holding 4 MiB, a 3 MiB request takes
  // the one whose bytes hold it, though the other is smaller
  std::string roomy = files.buffer((7 << 20) / 2);
  roomy.resize(kSmall);
  std::string four = files.buffer(4 << 20);
  const char* const three_at = four.data();
  files.recycle(std::move(roomy));
  files.recycle(std::move(four));
  std::string again = files.buffer(3 << 20);
  REQUIRE(again.data() == three_at);
}

namespace {

/// a [1, 64] -> DequantizeLinear(x int8 [64, 8], scale [4, 8] from `source`, block 16) -> MatMul.
qconv::ir::Model blockedModel(const FakeSource& source) {
  ModelBuilder b(21, 10);
  b.input("a", TensorProto::FLOAT, {1, 64});
  b.output("y", TensorProto::FLOAT, {1, 8});
  b.ints("x", TensorProto::INT8, {64, 8}, std::vector<int64_t>(64 * 8, 3));
  b.floats("scale", {4, 8}, std::vector<float>(32, 0.5f));
  auto& dq = b.node("DequantizeLinear", {"x", "scale"}, {"w"}, "w_dq");
  setInt(dq, "axis", 0);
  setInt(dq, "block_size", 16);
  b.node("MatMul", {"a", "w"}, {"y"}, "mm");
  qconv::ir::Model model = b.build();
  for (qconv::ir::Value* v : model.graph.initializers()) {
    if (v->name() != "scale") continue;
    auto t = model.graph.releaseInitializer(v);
    t->clear_float_data();
    t->clear_raw_data();
    t->set_data_location(TensorProto::EXTERNAL);
    model.graph.setInitializer(v, std::move(t), qconv::ir::FileBytes{&source, 7, 32 * 4});
  }
  return model;
}

std::string floatBytes(std::vector<float> f) { return std::string(reinterpret_cast<const char*>(f.data()), f.size() * 4); }

}  // namespace

TEST_CASE("blocked scales verify found valid are not read again by validate, when validate runs first") {
  // validate first (as it always is unless --passes puts it later): verify input's read and verify
  // output's; validate after fold-constants (which may change them) reads them once more
  auto reads = [](const std::vector<std::string>& passes) {
    const FakeSource source(floatBytes(std::vector<float>(32, 0.5f)));
    qconv::ir::Model model = blockedModel(source);
    Reporter r;
    qconv::PassManager(passes).run(model, r.ctx, nullptr);
    return source.reads;
  };
  const int first = reads({"validate", "fold-constants"}), later = reads({"fold-constants", "validate"});
  REQUIRE(first == 2);
  REQUIRE(later == first + 1);
  // a 0 among them: verify names it, and validate still refuses the input (exit 3)
  std::vector<float> with_zero(32, 0.5f);
  with_zero[19] = 0.0f;
  const FakeSource bad(floatBytes(with_zero));
  qconv::ir::Model third = blockedModel(bad);
  Reporter r3;
  try {
    qconv::PassManager({"validate"}).run(third, r3.ctx, nullptr);
    FAIL("a zero scale passed validate");
  } catch (const qconv::Error& e) {
    REQUIRE(e.code() == qconv::ExitCode::BadInput);
    REQUIRE_THAT(e.what(), Catch::Contains("w_dq") && Catch::Contains("scale 0 is not positive and finite"));
  }
}

TEST_CASE("blocked scales their writer checked as it wrote them are not read back, unless flawed") {
  auto run = [](std::optional<unsigned> written, std::vector<float> values) {
    FakeSource source(floatBytes(std::move(values)));
    source.written = written;
    qconv::ir::Model model = blockedModel(source);
    Reporter r;
    qconv::PassManager({"validate"}).run(model, r.ctx, nullptr);
    return source.reads;
  };
  const std::vector<float> valid(32, 0.5f);
  // verify input and verify output read them once each, validate none (verify found them valid)
  REQUIRE(run(std::nullopt, valid) == 2);
  // written and checked, with no flaw: neither verify reads them
  REQUIRE(run(0u, valid) == 0);
  // a negative value, which a DequantizeLinear's blocked scale may be: still not read
  REQUIRE(run(qconv::kScaleNegative, valid) == 0);
  // a flaw that is an error (a zero): read, and the value named
  std::vector<float> with_zero(32, 0.5f);
  with_zero[19] = 0.0f;
  FakeSource bad(floatBytes(with_zero));
  bad.written = qconv::kScaleZero;
  qconv::ir::Model model = blockedModel(bad);
  Reporter r;
  REQUIRE_THROWS_WITH(qconv::PassManager({"validate"}).run(model, r.ctx, nullptr),
                      Catch::Contains("w_dq") && Catch::Contains("scale 0 is not positive and finite"));
  REQUIRE(bad.reads >= 1);
}

TEST_CASE("the keeper checks a float tensor's values as it writes them, and says nothing of other tensors") {
  Dir d;
  qconv::io::ExternalFiles files(d / "in.onnx");
  auto keepFloats = [&](const std::vector<float>& values, bool pieces) {
    onnx::TensorProto t;
    t.set_data_type(TensorProto::FLOAT);
    t.add_dims(static_cast<int64_t>(values.size()));
    const std::string bytes = floatBytes(values);
    if (!pieces) return files.keep(t, bytes);
    size_t at = 0;  // pieces of 6 bytes and the rest: values cut in two
    return files.keepPieces(t, bytes.size(), [&](std::string& piece) {
      const size_t n = at == 0 ? 6 : bytes.size() - at;
      piece = bytes.substr(at, n);
      at += n;
    });
  };
  std::vector<float> values(300000, 0.25f);  // more than one 256 KiB write
  REQUIRE(files.writtenFloatFlaws(keepFloats(values, false).span) == 0u);
  values[299999] = 0.0f;
  values[70000] = -1.0f;
  REQUIRE(files.writtenFloatFlaws(keepFloats(values, false).span) == (qconv::kScaleZero | qconv::kScaleNegative));
  values[5] = std::numeric_limits<float>::quiet_NaN();
  REQUIRE(files.writtenFloatFlaws(keepFloats(values, false).span) ==
          (qconv::kScaleZero | qconv::kScaleNegative | qconv::kScaleNotFinite));
  REQUIRE_FALSE(files.writtenFloatFlaws(keepFloats(values, true).span));  // not whole values a piece: unknown
  onnx::TensorProto ints;
  ints.set_data_type(TensorProto::INT8);
  ints.add_dims(4096);
  REQUIRE_FALSE(files.writtenFloatFlaws(files.keep(ints, std::string(4096, '\1')).span));
}
