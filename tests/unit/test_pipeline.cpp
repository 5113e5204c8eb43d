// The pass manager and run(): pass lists, dumps, exit codes, no partial output.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "model_builder.h"
#include "qconv/diag.h"
#include "qconv/io/model_io.h"
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

TEST_CASE("the pass list: unknown names and an invalid order are usage errors") {
  try {
    qconv::PassManager pm({"fold-producers", "fuse-everything"});
    FAIL("accepted an unknown pass");
  } catch (const qconv::Error& e) {
    REQUIRE(e.code() == qconv::ExitCode::Usage);
    REQUIRE(std::string(e.what()).rfind("unknown pass 'fuse-everything' (passes: fold-constants, lower-contrib-qdq, lower-vitis-qdq, lower-qonnx-quant, lower-fake-quantize, lower-qgemm, fold-producers", 0) == 0);
  }
  REQUIRE_THROWS_AS(qconv::PassManager({"pair-qdq", "fuse-qlinear-conv"}), qconv::Error);
  REQUIRE(qconv::PassManager(qconv::pipelineFor(qconv::Format::Qop)).passes().size() == 15);
  REQUIRE(qconv::pipelineFor(qconv::Format::Qdq) ==
          std::vector<std::string>{"fold-constants", "lower-contrib-qdq", "lower-vitis-qdq", "lower-qonnx-quant", "lower-fake-quantize",
                                   "lower-qgemm", "fold-producers", "lower-primitive-qdq", "lower-integer-ops", "pair-qdq",
                                   "shift-types", "check-saturation"});
}

TEST_CASE("run converts, dumps after every pass and reports") {
  Dir d;
  auto b = convModel({});
  qconv::io::writeModelAtomically(b.proto(), d / "in.onnx");
  std::string err, dump;
  REQUIRE(convert(d / "in.onnx", d / "out.onnx", &err, &dump) == 0);
  for (const char* stage : {"; IR after parse", "; IR after fold-constants", "; IR after lower-contrib-qdq", "; IR after lower-qonnx-quant", "; IR after fold-producers",
                            "; IR after lower-primitive-qdq", "; IR after pair-qdq",
                            "; IR after fuse-qlinear-conv", "; IR after fuse-qlinear-matmul",
                            "; IR after fix-bias-scale", "; IR after shift-types", "; IR after check-saturation"})
    REQUIRE(dump.find(stage) != std::string::npos);
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

TEST_CASE("an overflowing bias fails with exit code 4 and leaves no output") {
  Dir d;
  ConvSpec s;
  s.x_scale = 1e-6f;
  s.w_scale = 1e-6f;
  s.bias_scale = 1.0f;  // bias 150 at scale 1: 1.5e14 steps of 1e-12
  qconv::io::writeModelAtomically(convModel(s).proto(), d / "in.onnx");
  std::string err;
  REQUIRE(convert(d / "in.onnx", d / "out.onnx", &err) == static_cast<int>(qconv::ExitCode::Unsupported));
  REQUIRE(err.find("node 'conv_1' (QLinearConv): bias of output channel 0") != std::string::npos);
  REQUIRE_FALSE(fs::exists(d / "out.onnx"));
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
