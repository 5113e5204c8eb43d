// Large tensor bytes left in the file and spliced back (io/splice.h). The judge is protobuf
// itself: what the reader makes, its spans filled in from the file, must be what protobuf's
// parse makes; what the writer writes must be what protobuf's serializer writes.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "model_builder.h"
#include "qconv/diag.h"
#include "qconv/io/external_data.h"
#include "qconv/io/model_io.h"
#include "qconv/io/splice.h"
#include "qconv/io/wire.h"

using namespace qtest;
namespace fs = std::filesystem;
using qconv::io::kSpliceThreshold;
using qconv::io::TensorSpan;

namespace {

std::string pattern(size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed * 7 + (i >> 9)) & 0xff);
  return s;
}

TensorProto rawTensor(const std::string& name, int32_t type, std::vector<int64_t> dims, std::string raw) {
  TensorProto t;
  t.set_name(name);
  t.set_data_type(type);
  for (int64_t d : dims) t.add_dims(d);
  t.set_raw_data(std::move(raw));
  return t;
}

/// A QDQ MatMul whose weight (300 x 300 int8) and a float constant (128 x 256) are large, with
/// small tensors around them.
ModelBuilder largeModel() {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1, 300});
  b.floats("s", {}, {0.02f});
  b.ints("z", TensorProto::INT8, {}, {0});
  *b.graph().add_initializer() = rawTensor("w", TensorProto::INT8, {300, 300}, pattern(90000, 1));
  b.ints("small", TensorProto::INT8, {4}, {1, 2, 3, 4});
  *b.graph().add_initializer() = rawTensor("f", TensorProto::FLOAT, {128, 256}, pattern(131072, 2));
  b.node("DequantizeLinear", {"w", "s", "z"}, {"wd"}, "dqw");
  b.node("MatMul", {"x", "wd"}, {"y"}, "mm");
  b.output("y", TensorProto::FLOAT, {1, 300});
  return b;
}

std::string serialized(const google::protobuf::MessageLite& m) {
  std::string s;
  REQUIRE(m.SerializeToString(&s));
  return s;
}

/// The reader's result with each span's bytes copied in from `bytes`.
onnx::ModelProto filledIn(onnx::ModelProto m, const std::vector<TensorSpan>& spans, const std::string& bytes) {
  for (const auto& s : spans) m.mutable_graph()->mutable_initializer(s.index)->set_raw_data(bytes.substr(s.offset, s.length));
  return m;
}

/// Parse `bytes` both ways. When the walker follows them, protobuf must parse them too, to the
/// same model once the spans are filled in. Returns whether the walker followed them.
bool agreesWithProtobuf(const std::string& bytes, std::vector<TensorSpan>* spans) {
  onnx::ModelProto walked;
  const bool ok =
      qconv::io::parseLeavingTensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &walked, spans);
  onnx::ModelProto whole;
  const bool parsed = whole.ParseFromString(bytes);
  if (!ok) {
    REQUIRE(spans->empty());
    REQUIRE(serialized(walked).empty());
    return false;
  }
  REQUIRE(parsed);
  REQUIRE(serialized(filledIn(walked, *spans, bytes)) == serialized(whole));
  return true;
}

std::string lenField(uint32_t number, const std::string& payload) {
  std::string s;
  qconv::io::wire::putVarint(s, qconv::io::wire::lenTag(number));
  qconv::io::wire::putVarint(s, payload.size());
  return s + payload;
}

/// A serialized model holding one graph with `initializers` (serialized TensorProtos), built by
/// hand so that fields can repeat or come in any order.
std::string modelWith(const std::vector<std::string>& initializers) {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1});
  std::string g;
  REQUIRE(b.graph().SerializeToString(&g));
  for (const auto& t : initializers) g += lenField(5, t);
  onnx::ModelProto shell = b.proto();
  shell.clear_graph();
  return serialized(shell) + lenField(7, g);
}

struct StringSink : qconv::io::SpliceSink {
  std::string out;
  void bytes(const char* data, size_t size) override { out.append(data, size); }
  void fileRange(int fd, uint64_t from, uint64_t size) override {
    std::string buf(size, '\0');
    REQUIRE(pread(fd, buf.data(), size, static_cast<off_t>(from)) == static_cast<ssize_t>(size));
    out += buf;
  }
};

std::string written(onnx::ModelProto& m, const qconv::io::FileBacked* file_backed = nullptr) {
  const qconv::io::InlineModel plan(m, kSpliceThreshold, file_backed);
  StringSink sink;
  plan.write(sink);
  REQUIRE(sink.out.size() == plan.size());
  return sink.out;
}

/// The reader's spans made file-backed, as import makes them, and listed as export lists them.
qconv::io::FileBacked pointIntoFile(qconv::io::InputModel& in) {
  qconv::io::FileBacked file_backed;
  for (const auto& s : in.spans) {
    TensorProto& t = *in.proto.mutable_graph()->mutable_initializer(s.index);
    file_backed.emplace(&t, in.files->range(in.files->pointIntoModelFile(t, s.offset, s.length)));
  }
  return file_backed;
}

fs::path tempFile(const std::string& name, const std::string& bytes) {
  fs::path d = fs::temp_directory_path() / ("qconv-splice-" + std::to_string(getpid()));
  fs::create_directories(d);
  std::ofstream(d / name, std::ios::binary) << bytes;
  return d / name;
}

}  // namespace

TEST_CASE("the reader leaves large initializer bytes in the file and parses the rest as protobuf does") {
  const std::string bytes = serialized(largeModel().proto());
  std::vector<TensorSpan> spans;
  REQUIRE(agreesWithProtobuf(bytes, &spans));
  REQUIRE(spans.size() == 2);  // w and f; s, z and small are below the threshold
  REQUIRE(spans[0].index == 2);
  REQUIRE(spans[1].index == 4);
  REQUIRE(bytes.substr(spans[0].offset, spans[0].length) == pattern(90000, 1));
  REQUIRE(bytes.substr(spans[1].offset, spans[1].length) == pattern(131072, 2));
}

TEST_CASE("the reader agrees with protobuf on repeated, reordered and unknown fields") {
  const std::string big = pattern(kSpliceThreshold, 3);
  const std::string w = serialized(rawTensor("w", TensorProto::UINT8, {static_cast<int64_t>(big.size())}, big));
  std::vector<TensorSpan> spans;

  SECTION("raw_data twice: the last one wins, large or small") {
    REQUIRE(agreesWithProtobuf(modelWith({w + lenField(9, "abcd")}), &spans));  // ends small: parsed
    REQUIRE(spans.empty());
    REQUIRE(agreesWithProtobuf(modelWith({lenField(9, "abcd") + w}), &spans));  // ends large: left in the file
    REQUIRE(spans.size() == 1);
  }
  SECTION("the graph field twice is one graph, merged; initializer indices run on across both") {
    const std::string bytes = modelWith({w}) + lenField(7, lenField(5, w) + lenField(2, "second"));
    REQUIRE(agreesWithProtobuf(bytes, &spans));
    REQUIRE(spans.size() == 2);
    REQUIRE(spans[1].index == 1);
  }
  SECTION("fields of a tensor after its raw_data, and unknown fields, are kept") {
    std::string unknown;
    qconv::io::wire::putVarint(unknown, (uint64_t{1000} << 3) | qconv::io::wire::kVarint);
    qconv::io::wire::putVarint(unknown, 77);
    const std::string late = lenField(9, big) + lenField(8, "late_name") + unknown;
    TensorProto dims;
    dims.set_data_type(TensorProto::UINT8);
    dims.add_dims(static_cast<int64_t>(big.size()));
    REQUIRE(agreesWithProtobuf(modelWith({late + serialized(dims)}) + unknown, &spans));
    REQUIRE(spans.size() == 1);
  }
  SECTION("a tensor that is not ordinary inline storage is parsed whole") {
    TensorProto t = rawTensor("w", TensorProto::UINT8, {static_cast<int64_t>(big.size())}, big);
    SECTION("typed values beside raw_data") { t.add_int32_data(1); }
    SECTION("external data") { t.set_data_location(TensorProto::EXTERNAL); }
    SECTION("dims that need other bytes") { t.set_dims(0, 3); }
    SECTION("a type of no fixed width") { t.set_data_type(TensorProto::STRING); }
    REQUIRE(agreesWithProtobuf(modelWith({serialized(t)}), &spans));
    REQUIRE(spans.empty());
  }
}

TEST_CASE("the reader gives up, for protobuf to judge, on what it does not follow") {
  const std::string bytes = serialized(largeModel().proto());
  std::vector<TensorSpan> spans;
  SECTION("truncated") { REQUIRE_FALSE(agreesWithProtobuf(bytes.substr(0, bytes.size() - 10), &spans)); }
  SECTION("a group among the model's fields (protobuf keeps it as an unknown field)") {
    // field 99 as a start group, one varint field inside, end group
    std::string group;
    qconv::io::wire::putVarint(group, (uint64_t{99} << 3) | qconv::io::wire::kStartGroup);
    group += std::string("\x08\x01", 2);
    qconv::io::wire::putVarint(group, (uint64_t{99} << 3) | qconv::io::wire::kEndGroup);
    onnx::ModelProto whole;
    REQUIRE(whole.ParseFromString(bytes + group));  // valid protobuf
    REQUIRE_FALSE(agreesWithProtobuf(bytes + group, &spans));
  }
  SECTION("a field number 0 inside a tensor") {
    std::string bad = modelWith({serialized(rawTensor("w", TensorProto::UINT8, {1}, "a")) + std::string("\x00\x00", 2)});
    REQUIRE_FALSE(agreesWithProtobuf(bad, &spans));
  }
}

TEST_CASE("openModel falls back to protobuf's whole parse, with its message, when the walker gives up") {
  const std::string bytes = serialized(largeModel().proto());
  const fs::path path = tempFile("truncated.onnx", bytes.substr(0, bytes.size() - 10));
  try {
    qconv::io::openModel(path.string());
    FAIL("a truncated model was accepted");
  } catch (const qconv::Error& e) {
    REQUIRE(e.code() == qconv::ExitCode::BadInput);
    REQUIRE(std::string(e.what()).find("not an ONNX model (protobuf parse failed") != std::string::npos);
  }
}

TEST_CASE("the writer writes the bytes protobuf's serializer writes") {
  SECTION("large raw_data held in memory") {
    onnx::ModelProto m = largeModel().proto();
    const std::string want = serialized(m);
    REQUIRE(written(m) == want);
    REQUIRE(serialized(m) == want);  // the model is as it was
  }
  SECTION("nothing large: the serialization itself") {
    ModelBuilder b;
    b.input("x", TensorProto::FLOAT, {1});
    b.ints("small", TensorProto::INT8, {4}, {1, 2, 3, 4});
    REQUIRE(written(b.proto()) == serialized(b.proto()));
  }
  SECTION("initializers backed by the model file, as the reader and import leave them") {
    onnx::ModelProto m = largeModel().proto();
    m.mutable_graph()->mutable_initializer(4)->set_data_location(TensorProto::DEFAULT);  // explicit DEFAULT
    const fs::path path = tempFile("large.onnx", serialized(m));
    qconv::io::InputModel in = qconv::io::openModel(path.string());
    REQUIRE(in.spans.size() == 2);
    const qconv::io::FileBacked file_backed = pointIntoFile(in);
    REQUIRE(in.proto.graph().initializer(2).raw_data().empty());
    // protobuf's bytes for the model with its tensors loaded; a file-backed tensor is written
    // without data_location, its default
    onnx::ModelProto want = qconv::io::readModelFile(path.string());
    want.mutable_graph()->mutable_initializer(4)->clear_data_location();
    REQUIRE(written(in.proto, &file_backed) == serialized(want));

    // and the checker accepts it, shown stand-ins, and leaves it as it was
    const std::string before = serialized(in.proto);
    const std::string why = qconv::io::checkModel(in.proto, &file_backed);
    INFO(why);
    REQUIRE(why.empty());
    REQUIRE(serialized(in.proto) == before);
  }
}

TEST_CASE("the checker still judges a model whose initializers are file-backed") {
  onnx::ModelProto m = largeModel().proto();
  m.mutable_graph()->mutable_node(1)->set_op_type("NoSuchOp");
  const fs::path path = tempFile("bad_op.onnx", serialized(m));
  qconv::io::InputModel in = qconv::io::openModel(path.string());
  const qconv::io::FileBacked file_backed = pointIntoFile(in);
  const std::string before = serialized(in.proto);
  REQUIRE(qconv::io::checkModel(in.proto, &file_backed).find("NoSuchOp") != std::string::npos);
  REQUIRE(serialized(in.proto) == before);
}

TEST_CASE("import reads file-backed initializers through the file, with their values") {
  const fs::path path = tempFile("import.onnx", serialized(largeModel().proto()));
  qconv::ir::Model model = qconv::io::importModel(qconv::io::openModel(path.string()), path.string());
  const qconv::ir::Value* w = nullptr;
  for (const auto& v : model.graph.allValues())
    if (v->name() == "w") w = v.get();
  REQUIRE(w);
  std::vector<int64_t> want;
  for (char c : pattern(90000, 1)) want.push_back(static_cast<int8_t>(c));
  REQUIRE(intsOf(w) == want);
}

TEST_CASE("an input that shrinks before its bytes are copied fails the write, leaving no output") {
  const fs::path path = tempFile("shrinks.onnx", serialized(largeModel().proto()));
  qconv::io::InputModel in = qconv::io::openModel(path.string());
  const qconv::io::FileBacked file_backed = pointIntoFile(in);
  fs::resize_file(path, in.spans.back().offset);  // the last tensor's bytes are gone
  const fs::path out = path.parent_path() / "shrinks_out.onnx";
  try {
    qconv::io::WriteOptions options;
    options.file_backed = &file_backed;
    qconv::io::writeModel(in.proto, out.string(), options);
    FAIL("the write succeeded");
  } catch (const qconv::Error& e) {
    REQUIRE(e.code() == qconv::ExitCode::Output);
    REQUIRE(std::string(e.what()) == out.string() +
                                         ": cannot copy tensor bytes from the input: the input file is shorter than "
                                         "when it was read");
  }
  REQUIRE_FALSE(fs::exists(out));
  for (const auto& entry : fs::directory_iterator(path.parent_path()))
    REQUIRE(entry.path().filename().string().find(".qconv-") == std::string::npos);  // no temporary left
}
