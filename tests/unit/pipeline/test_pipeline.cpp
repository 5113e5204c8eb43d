// The pass manager and run(): pass lists, dumps, exit codes, no partial output.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "model_builder.h"
#include "qconv/diag.h"
#include "qconv/io/model_io.h"
#include "qconv/ir/tensor.h"
#include "qconv/pipeline/pass_manager.h"
#include "qconv/pipeline/run.h"

using namespace qtest;
namespace fs = std::filesystem;

namespace {
struct Dir {
  fs::path path = fs::temp_directory_path() / ("qconv-pipeline-" + std::to_string(getpid()));
  Dir() { fs::create_directories(path); }
  ~Dir() { fs::remove_all(path); }
  std::string operator/(const std::string& f) const { return (path / f).string(); }
  size_t files() const {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(path)) n += e.is_regular_file();
    return n;
  }
};

int convert(const std::string& in, const std::string& out, std::string* err, std::string* dump = nullptr,
            std::vector<std::string> passes = {}) {
  qconv::ConvertOptions o;
  o.input = in;
  o.output = out;
  o.passes = std::move(passes);
  o.dump = dump != nullptr;
  std::ostringstream os, es;
  int rc = qconv::run(o, os, es);
  *err = es.str();
  if (dump) *dump = os.str();
  return rc;
}
}  // namespace

namespace {
std::vector<std::string> registryNames(bool qop) {
  std::vector<std::string> names;
  for (const auto& p : qconv::passRegistry())
    if (p.formats != (qop ? qconv::PassFormats::QdqOnly : qconv::PassFormats::QopOnly)) names.emplace_back(p.name);
  return names;
}
std::vector<std::string> namesOf(const qconv::PassManager& pm) {
  std::vector<std::string> names;
  for (const auto* p : pm.passes()) names.emplace_back(p->name);
  return names;
}
}  // namespace

TEST_CASE("the pass list: the registry in order; unknown names are usage errors") {
  try {
    qconv::PassManager pm({"fold-producers", "fuse-everything"});
    FAIL("accepted an unknown pass");
  } catch (const qconv::Error& e) {
    REQUIRE(e.code() == qconv::ExitCode::Usage);
    REQUIRE(std::string(e.what()).rfind("unknown pass 'fuse-everything' (passes: validate, fold-constants, lower-contrib-qdq", 0) == 0);
  }
  REQUIRE(qconv::pipelineFor(qconv::Format::Qop) == registryNames(true));
  REQUIRE(qconv::pipelineFor(qconv::Format::Qdq) == registryNames(false));
  REQUIRE(namesOf(qconv::PassManager(qconv::pipelineFor(qconv::Format::Qop))) == registryNames(true));
  // the fusions are the --format qop pipeline's only
  auto qdq = qconv::pipelineFor(qconv::Format::Qdq);
  REQUIRE(std::find(qdq.begin(), qdq.end(), "fuse-qlinear-conv") == qdq.end());
  REQUIRE(std::find(qdq.begin(), qdq.end(), "pair-qdq") != qdq.end());
}

TEST_CASE("a --passes list runs between the stages every pipeline has") {
  REQUIRE(namesOf(qconv::PassManager({"pair-qdq", "fuse-qlinear-conv"})) ==
          std::vector<std::string>{"validate", "pair-qdq", "fuse-qlinear-conv", "redeclare-opset", "check-target",
                                   "check-ops", "refuse-foreign-ops"});
  // a stage the list names runs where the list puts it, once
  REQUIRE(namesOf(qconv::PassManager({"refuse-foreign-ops", "pair-qdq"})) ==
          std::vector<std::string>{"validate", "refuse-foreign-ops", "pair-qdq", "redeclare-opset", "check-target",
                                   "check-ops"});
}

TEST_CASE("run converts, dumps after every pass and reports") {
  Dir d;
  auto b = convModel({});
  qconv::io::writeModelAtomically(b.proto(), d / "in.onnx");
  std::string err, dump;
  REQUIRE(convert(d / "in.onnx", d / "out.onnx", &err, &dump) == 0);
  REQUIRE(dump.rfind("; IR after parse\n", 0) == 0);
  size_t at = 0;  // every pass, in order
  for (const auto& name : registryNames(true)) {
    const size_t next = dump.find("; IR after " + name + "\n", at);
    REQUIRE(next != std::string::npos);
    at = next;
  }
  REQUIRE(dump.find("= QLinearConv(%x_q, %x_scale, %x_zp, %w, %w_scale, %w_zp, %y_scale, %y_zp, %b)") !=
          std::string::npos);
  REQUIRE(err.find("1 QLinearConv") != std::string::npos);
  auto out = qconv::io::readModelFile(d / "out.onnx");
  REQUIRE(qconv::io::checkModel(out).empty());
}

TEST_CASE("exit codes: unreadable input, invalid model, same file, unwritable output; never a partial file") {
  Dir d;
  std::string err;
  REQUIRE(convert(d / "missing.onnx", d / "out.onnx", &err) == static_cast<int>(qconv::ExitCode::BadInput));
  REQUIRE(err.rfind("qconv: error: " + (d / "missing.onnx") + ": cannot open", 0) == 0);
  REQUIRE(d.files() == 0);

  ModelBuilder bad;
  bad.input("x", TensorProto::FLOAT, {1});
  bad.node("Relu", {"x"}, {"y"}, "relu");  // the graph output is not declared with a type
  bad.output("y", TensorProto::FLOAT);
  bad.graph().mutable_node(0)->set_op_type("NoSuchOp");
  qconv::io::writeModelAtomically(bad.proto(), d / "bad.onnx");
  REQUIRE(convert(d / "bad.onnx", d / "out.onnx", &err) == static_cast<int>(qconv::ExitCode::BadInput));
  REQUIRE(err.find("node 'relu' (NoSuchOp): not an ai.onnx operator at opset") != std::string::npos);

  // Only the ONNX checker sees this one (a Relu with two inputs): it judges the output before the
  // rename, finds the input at fault, and nothing is left behind.
  ModelBuilder twoInputs;
  twoInputs.input("x", TensorProto::FLOAT, {1});
  twoInputs.node("Relu", {"x", "x"}, {"y"}, "relu");
  twoInputs.output("y", TensorProto::FLOAT);
  qconv::io::writeModelAtomically(twoInputs.proto(), d / "bad.onnx");
  REQUIRE(convert(d / "bad.onnx", d / "out.onnx", &err) == static_cast<int>(qconv::ExitCode::BadInput));
  REQUIRE(err.rfind("qconv: error: " + (d / "bad.onnx") + ": invalid model: ", 0) == 0);
  REQUIRE(err.find("Relu") != std::string::npos);

  qconv::io::writeModelAtomically(convModel({}).proto(), d / "in.onnx");
  REQUIRE(convert(d / "in.onnx", d / "in.onnx", &err) == static_cast<int>(qconv::ExitCode::Usage));
  REQUIRE(err.find("output is the input file") != std::string::npos);
  REQUIRE(convert(d / "in.onnx", d / "nodir/out.onnx", &err) == static_cast<int>(qconv::ExitCode::Output));
  REQUIRE(d.files() == 2);  // in.onnx and bad.onnx: nothing else was left behind
}

TEST_CASE("an overflowing bias leaves its conv in QDQ form and the model converts") {
  Dir d;
  ConvSpec s;
  s.x_scale = 1e-6f;
  s.w_scale = 1e-6f;
  s.bias_scale = 1.0f;  // bias 150 at scale 1: 1.5e14 steps of 1e-12
  qconv::io::writeModelAtomically(convModel(s).proto(), d / "in.onnx");
  std::string err;
  REQUIRE(convert(d / "in.onnx", d / "out.onnx", &err) == 0);
  // by default one summary line counts it; -v names it, as a note
  REQUIRE(err == fmt::format("qconv: info: {0}: wrote {1}: 1 Conv left in QDQ form; 1 left as they were\n",
                             d / "in.onnx", d / "out.onnx"));
  qconv::ConvertOptions verbose;
  verbose.input = d / "in.onnx";
  verbose.output = d / "out.onnx";
  verbose.verbosity = 2;
  std::ostringstream os, es;
  REQUIRE(qconv::run(verbose, os, es) == 0);
  REQUIRE(es.str().find(fmt::format("qconv: note: {}: conv_1: not fused: bias of output channel 0 is -50 and does not "
                                    "fit int32", d / "in.onnx")) != std::string::npos);
  auto out = qconv::io::readModelFile(d / "out.onnx");
  REQUIRE(out.graph().node_size() == 7);  // Q, DQ(x), DQ(w), DQ(b), Conv, Q, DQ: still QDQ
  for (const auto& n : out.graph().node()) REQUIRE(n.op_type() != "QLinearConv");
}

TEST_CASE("the same input and flags give byte-identical output") {
  Dir d;
  qconv::io::writeModelAtomically(convModel({}).proto(), d / "in.onnx");
  std::string err;
  REQUIRE(convert(d / "in.onnx", d / "a.onnx", &err) == 0);
  REQUIRE(convert(d / "in.onnx", d / "b.onnx", &err) == 0);
  auto slurp = [](const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  REQUIRE(slurp(d / "a.onnx") == slurp(d / "b.onnx"));
}

namespace {
/// run() with the Python API's in-memory ends: `in` bytes (named `name`), the result's bytes and report.
int convertInMemory(const std::string& in, std::string* out, std::string* report, std::string* err,
                    const std::string& output_path = "") {
  qconv::ConvertOptions o;
  o.input = "<memory>";
  o.output = output_path.empty() ? "<memory>" : output_path;
  const std::string_view bytes(in);
  o.input_bytes = &bytes;
  if (output_path.empty()) o.output_bytes = out;
  o.report_json = report;
  std::ostringstream os, es;
  const int rc = qconv::run(o, os, es);
  *err = es.str();
  return rc;
}
}  // namespace

TEST_CASE("in memory: bytes in, bytes out, equal to the file the path form writes; no file touched") {
  Dir d;
  std::string in;
  REQUIRE(convModel({}).proto().SerializeToString(&in));
  qconv::io::writeModelAtomically(convModel({}).proto(), d / "in.onnx");
  std::string err;
  REQUIRE(convert(d / "in.onnx", d / "out.onnx", &err) == 0);
  std::ifstream f(d / "out.onnx", std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::string out, report;
  REQUIRE(convertInMemory(in, &out, &report, &err) == 0);
  REQUIRE(out == file);
  REQUIRE(err.find("qconv: info: <memory>: converted in memory: 1 QLinearConv") != std::string::npos);
  REQUIRE(report.find("\"exit_code\":0") != std::string::npos);
  REQUIRE(d.files() == 2);
  // bytes in, a file out: the same file
  REQUIRE(convertInMemory(in, nullptr, &report, &err, d / "from_bytes.onnx") == 0);
  std::ifstream g(d / "from_bytes.onnx", std::ios::binary);
  REQUIRE(std::string((std::istreambuf_iterator<char>(g)), std::istreambuf_iterator<char>()) == file);
}

TEST_CASE("in memory: no model, a model naming external data, an invalid one; the error names its node") {
  std::string out, report, err;
  REQUIRE(convertInMemory("garbage", &out, &report, &err) == static_cast<int>(qconv::ExitCode::BadInput));
  REQUIRE(err.rfind("qconv: error: <memory>: not an ONNX model (protobuf parse failed", 0) == 0);
  REQUIRE(out.empty());

  auto ext = convModel({});
  auto* w = ext.graph().mutable_initializer(0);
  w->set_data_location(TensorProto::EXTERNAL);
  auto* loc = w->add_external_data();
  loc->set_key("location");
  loc->set_value("weights.bin");
  std::string in;
  REQUIRE(ext.proto().SerializeToString(&in));
  REQUIRE(convertInMemory(in, &out, &report, &err) == static_cast<int>(qconv::ExitCode::Usage));
  REQUIRE(err.find("<memory>: a tensor keeps its data in the external file 'weights.bin', which a model given in "
                   "memory cannot reach: give the model's path instead") != std::string::npos);

  ModelBuilder twoInputs;  // only the checker sees it: its second look parses the bytes again
  twoInputs.input("x", TensorProto::FLOAT, {1});
  twoInputs.node("Relu", {"x", "x"}, {"y"}, "relu");
  twoInputs.output("y", TensorProto::FLOAT);
  REQUIRE(twoInputs.proto().SerializeToString(&in));
  REQUIRE(convertInMemory(in, &out, &report, &err) == static_cast<int>(qconv::ExitCode::BadInput));
  REQUIRE(err.rfind("qconv: error: <memory>: invalid model: ", 0) == 0);

  ModelBuilder unknown;
  unknown.input("x", TensorProto::FLOAT, {1});
  unknown.node("NoSuchOp", {"x"}, {"y"}, "odd_7");
  unknown.output("y", TensorProto::FLOAT);
  REQUIRE(unknown.proto().SerializeToString(&in));
  REQUIRE(convertInMemory(in, &out, &report, &err) == static_cast<int>(qconv::ExitCode::BadInput));
  REQUIRE(report.find("\"error_node\":\"odd_7\"") != std::string::npos);
}

TEST_CASE("fold-shapes and ONNX's inference run to a fixed point: a shape read from a tensor a folded Reshape made") {
  // the captcha OCR's LSTM head: x [1,2,3,4] -> Reshape(x, Shape(x)[0:2] ++ [-1]) -> r [1,2,12]
  // -> Relu -> t -> Reshape(t, [-1] ++ Shape(t)[2:3]) -> y [2,12]. The second Shape reads t, whose
  // shape ONNX's inference gives only once the first Reshape's shape is a constant: a second round.
  ModelBuilder b(13);
  b.input("x", TensorProto::FLOAT, {1, 2, 3, 4});
  b.ints("zero", TensorProto::INT64, {1}, {0});
  b.ints("two", TensorProto::INT64, {1}, {2});
  b.ints("three", TensorProto::INT64, {1}, {3});
  b.ints("minus_one", TensorProto::INT64, {1}, {-1});
  b.ints("last", TensorProto::INT64, {}, {2});  // a scalar index: rank 0, not unknown
  b.node("Shape", {"x"}, {"sx"}, "shape_x");
  b.node("Slice", {"sx", "zero", "two"}, {"head"}, "slice_x");
  setInt(b.node("Concat", {"head", "minus_one"}, {"shape_r"}, "concat_r"), "axis", 0);
  b.node("Reshape", {"x", "shape_r"}, {"r"}, "reshape_r");
  b.node("Relu", {"r"}, {"t"}, "relu");
  b.node("Shape", {"t"}, {"st"}, "shape_t");
  setInt(b.node("Gather", {"st", "last"}, {"width"}, "gather_t"), "axis", 0);
  b.node("Unsqueeze", {"width", "zero"}, {"width_1"}, "unsqueeze_t");
  setInt(b.node("Concat", {"minus_one", "width_1"}, {"shape_y"}, "concat_y"), "axis", 0);
  b.node("Reshape", {"t", "shape_y"}, {"y"}, "reshape_y");
  b.output("y", TensorProto::FLOAT, {2, 12});
  Dir d;
  qconv::io::writeModelAtomically(b.proto(), d / "in.onnx");
  qconv::ConvertOptions o;
  o.input = d / "in.onnx";
  o.output = d / "out.onnx";
  o.target = "iree";
  o.format_given = false;
  std::ostringstream os, es;
  REQUIRE(qconv::run(o, os, es) == 0);
  auto out = qconv::io::readModelFile(d / "out.onnx");
  std::vector<std::string> ops;
  for (const auto& n : out.graph().node()) ops.push_back(n.op_type());
  REQUIRE(ops == std::vector<std::string>{"Reshape", "Relu", "Reshape"});  // both shapes are constants
  std::map<std::string, std::vector<int64_t>> constants;
  for (const auto& t : out.graph().initializer()) {
    std::string why;
    if (t.data_type() == TensorProto::INT64) constants[t.name()] = *qconv::ir::readInts(t, &why);
  }
  REQUIRE(constants.at(out.graph().node(0).input(1)) == std::vector<int64_t>{1, 2, -1});
  REQUIRE(constants.at(out.graph().node(2).input(1)) == std::vector<int64_t>{-1, 12});
  REQUIRE(es.str().find("not folded") == std::string::npos);
}
