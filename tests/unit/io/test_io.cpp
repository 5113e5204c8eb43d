// parse and emit: bad graphs are refused naming file and node; what the IR does not
// interpret survives a round trip.
#include <catch2/catch.hpp>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "model_builder.h"
#include "qconv/diag.h"
#include "qconv/io/model_io.h"

using namespace qtest;
namespace fs = std::filesystem;

namespace {
std::string errorOf(const ModelBuilder& b, qconv::ExitCode want) {
  try {
    b.build();
  } catch (const qconv::Error& e) {
    REQUIRE(e.code() == want);
    return e.what();
  }
  FAIL("the model was accepted");
  return {};
}

fs::path tempDir() {
  fs::path d = fs::temp_directory_path() / ("qconv-unit-" + std::to_string(getpid()));
  fs::create_directories(d);
  return d;
}
}  // namespace

TEST_CASE("a dangling input is refused naming file, node and value") {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1});
  b.node("Relu", {"nowhere"}, {"y"}, "relu_7");
  b.output("y", TensorProto::FLOAT);
  REQUIRE(errorOf(b, qconv::ExitCode::BadInput) ==
          "test.onnx: node 'relu_7' (Relu): input 'nowhere' is not produced by any node, initializer or graph input");
}

TEST_CASE("nodes out of topological order are refused") {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1});
  b.node("Neg", {"a"}, {"y"}, "neg");
  b.node("Relu", {"x"}, {"a"}, "relu");
  b.output("y", TensorProto::FLOAT);
  REQUIRE(errorOf(b, qconv::ExitCode::BadInput).find("produced by a later node") != std::string::npos);
}

TEST_CASE("a value defined twice is refused") {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1});
  b.node("Relu", {"x"}, {"y"}, "r1");
  b.node("Neg", {"x"}, {"y"}, "r2");
  b.output("y", TensorProto::FLOAT);
  REQUIRE(errorOf(b, qconv::ExitCode::BadInput) ==
          "test.onnx: node 'r2' (Neg): output 'y' is already defined (values must have one producer)");
}

TEST_CASE("a graph output nobody produces is refused") {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1});
  b.output("ghost", TensorProto::FLOAT);
  REQUIRE(errorOf(b, qconv::ExitCode::BadInput).find("graph output 'ghost'") != std::string::npos);
}

TEST_CASE("external data without a location is bad input, naming the tensor") {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1});
  auto* t = b.graph().add_initializer();
  t->set_name("big_w");
  t->set_data_type(TensorProto::FLOAT);
  t->add_dims(1);
  t->set_data_location(TensorProto::EXTERNAL);
  b.node("Add", {"x", "big_w"}, {"y"}, "add");
  b.output("y", TensorProto::FLOAT);
  REQUIRE(errorOf(b, qconv::ExitCode::BadInput).find("initializer 'big_w': external data has no location") != std::string::npos);
}

TEST_CASE("emit preserves what the IR does not interpret") {
  ModelBuilder b;
  b.proto().set_doc_string("model doc");
  auto* meta = b.proto().add_metadata_props();
  meta->set_key("author");
  meta->set_value("someone");
  auto* ms = b.proto().add_opset_import();
  ms->set_domain("com.example");
  ms->set_version(3);
  b.proto().add_functions()->set_name("my_function");
  b.input("x", TensorProto::FLOAT, {2});
  b.floats("k", {1}, {2.0f});
  auto& custom = b.node("Fancy", {"x", "k"}, {"a"}, "fancy");
  custom.set_domain("com.example");
  custom.set_doc_string("node doc");
  setFloat(custom, "alpha", 0.25f);
  // an If whose branch reads the outer value "a"
  auto& cond = b.node("Greater", {"x", "k"}, {"c"}, "gt");
  (void)cond;
  auto& iff = b.node("If", {"c"}, {"y"}, "if");
  auto* attr = iff.add_attribute();
  attr->set_name("then_branch");
  attr->set_type(onnx::AttributeProto::GRAPH);
  auto* then = attr->mutable_g();
  then->set_name("then");
  auto* inner = then->add_node();
  inner->set_op_type("Identity");
  inner->add_input("a");
  inner->add_output("t");
  then->add_output()->set_name("t");
  auto* vi = b.graph().add_value_info();
  vi->set_name("a");
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(TensorProto::FLOAT);
  b.output("y", TensorProto::FLOAT);

  auto m = b.build();
  auto* fancy = only(m.graph, "Fancy");
  // the subgraph's read of "a" is an implicit use: "a" is not dead
  REQUIRE(fancy->output(0)->hasImplicitUses());
  onnx::ModelProto out = qconv::io::exportModel(m);
  REQUIRE(out.doc_string() == "model doc");
  REQUIRE(out.metadata_props_size() == 1);
  REQUIRE(out.functions_size() == 1);
  REQUIRE(out.graph().node_size() == 3);
  const auto& n0 = out.graph().node(0);
  REQUIRE(n0.domain() == "com.example");
  REQUIRE(n0.doc_string() == "node doc");
  REQUIRE(n0.attribute(0).f() == 0.25f);
  REQUIRE(n0.input(1) == "k");
  REQUIRE(out.graph().node(2).attribute(0).g().node(0).input(0) == "a");
  REQUIRE(out.graph().value_info_size() == 1);
  bool hasExample = false;
  for (const auto& op : out.opset_import()) hasExample |= op.domain() == "com.example" && op.version() == 3;
  REQUIRE(hasExample);
}

TEST_CASE("emit gives generated values unique names") {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {2});
  b.node("Relu", {"x"}, {"Neg_out"}, "relu");
  b.output("Neg_out", TensorProto::FLOAT);
  auto m = b.build();
  auto* relu = only(m.graph, "Relu");
  auto* neg = m.graph.createNode("Neg", "", {relu->input(0)}, 1, nullptr);
  m.graph.markGraphOutput(neg->output(0));
  onnx::ModelProto out = qconv::io::exportModel(m);
  REQUIRE(out.graph().node(1).output(0) == "Neg_out_1");
}

TEST_CASE("reading a file: missing, empty and garbage files are bad input naming the file") {
  fs::path d = tempDir();
  auto expectBad = [](const std::string& path, const std::string& text) {
    try {
      qconv::io::readModelFile(path);
      FAIL("accepted " + path);
    } catch (const qconv::Error& e) {
      REQUIRE(e.code() == qconv::ExitCode::BadInput);
      REQUIRE(std::string(e.what()).rfind(path + ": ", 0) == 0);
      REQUIRE(std::string(e.what()).find(text) != std::string::npos);
    }
  };
  expectBad((d / "missing.onnx").string(), "cannot open");
  std::ofstream((d / "empty.onnx").string()).close();
  expectBad((d / "empty.onnx").string(), "empty file");
  std::ofstream((d / "junk.onnx").string()) << "\xff\xff\xff\xff this is not protobuf";
  expectBad((d / "junk.onnx").string(), "not an ONNX model");
  fs::remove_all(d);
}

TEST_CASE("writing is atomic: a failed write leaves nothing behind") {
  fs::path d = tempDir();
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1});
  b.output("x", TensorProto::FLOAT);
  REQUIRE_THROWS_AS(qconv::io::writeModelAtomically(b.proto(), (d / "no_such_dir" / "out.onnx").string()),
                    qconv::Error);
  qconv::io::writeModelAtomically(b.proto(), (d / "out.onnx").string());
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(d)) files += e.is_regular_file();
  REQUIRE(files == 1);  // out.onnx only: no temporary left
  onnx::ModelProto back = qconv::io::readModelFile((d / "out.onnx").string());
  REQUIRE(back.graph().input(0).name() == "x");
  fs::remove_all(d);
}

TEST_CASE("emit raises the default opset and IR version to what emitted ops need") {
  ModelBuilder b(/*opset=*/9, /*ir_version=*/4);
  b.input("x", TensorProto::FLOAT, {1});
  b.node("Relu", {"x"}, {"y"}, "relu");
  b.output("y", TensorProto::FLOAT);
  auto m = b.build();
  auto* relu = only(m.graph, "Relu");
  auto* q = m.graph.createNode("QLinearMatMul", "", {relu->input(0)}, 1, nullptr);
  (void)q;
  onnx::ModelProto out = qconv::io::exportModel(m);
  REQUIRE(out.opset_import(0).version() == 10);
  REQUIRE(out.ir_version() == 5);
}

/// One field as it is on the wire (what the lite runtime keeps of a field it does not know):
/// a varint when `bytes` is null, else length-delimited.
std::string wireField(uint32_t number, uint64_t varint, const char* bytes = nullptr) {
  std::string wire;
  {
    google::protobuf::io::StringOutputStream stream(&wire);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.WriteTag(number << 3 | (bytes ? 2 : 0));
    if (bytes) {
      out.WriteVarint32(static_cast<uint32_t>(std::strlen(bytes)));
      out.WriteRaw(bytes, static_cast<int>(std::strlen(bytes)));
    } else {
      out.WriteVarint64(varint);
    }
  }
  return wire;
}

TEST_CASE("protobuf fields the schema does not know survive parse and emit") {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1});
  auto& relu = b.node("Relu", {"x"}, {"y"}, "relu");
  const std::string node_field = wireField(9999, 42);  // a field from a future schema
  const std::string model_field = wireField(8888, 0, "future");
  relu.mutable_unknown_fields()->append(node_field);
  b.proto().mutable_unknown_fields()->append(model_field);
  b.output("y", TensorProto::FLOAT);
  auto m = b.build();
  onnx::ModelProto out = qconv::io::exportModel(m);
  REQUIRE(out.graph().node(0).unknown_fields() == node_field);
  REQUIRE(out.unknown_fields() == model_field);
  // and through the bytes: parsed back, each is still there
  onnx::ModelProto again;
  REQUIRE(again.ParseFromString(out.SerializeAsString()));
  REQUIRE(again.graph().node(0).unknown_fields() == node_field);
  REQUIRE(again.unknown_fields() == model_field);
}

TEST_CASE("a value listed more than once keeps its type in every entry (found by the fuzzer)") {
  // an input that is also an output, and an output listed twice: the ONNX checker requires a
  // type on each entry, and accepts this input
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {2});
  b.node("Relu", {"x"}, {"y"}, "relu");
  b.output("x", TensorProto::FLOAT);
  b.output("y", TensorProto::FLOAT);
  b.output("y", TensorProto::FLOAT);
  REQUIRE(qconv::io::checkModel(b.proto()).empty());
  auto m = b.build();
  onnx::ModelProto out = qconv::io::exportModel(m);
  REQUIRE(qconv::io::checkModel(out).empty());
  REQUIRE(out.graph().output_size() == 3);
  for (const auto& o : out.graph().output()) REQUIRE(o.type().tensor_type().elem_type() == TensorProto::FLOAT);
  REQUIRE(out.graph().output(0).name() == "x");
}
