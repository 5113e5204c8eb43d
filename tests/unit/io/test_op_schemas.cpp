// io::OpSchemas against libonnx's registry: the same answer to every lookup, the same checker
// verdicts, and only the schemas a model's operators need built.
#include <catch2/catch.hpp>
#include <onnx/checker.h>
#include <onnx/defs/schema.h>

#include <set>
#include <string>

#include "model_builder.h"
#include "qconv/io/model_io.h"
#include "qconv/io/op_schemas.h"
#include "qconv/passes/common/opset_history.h"

using namespace qtest;

namespace {

std::string registryVerdict(const onnx::ModelProto& m) {
  try {
    onnx::checker::check_model(m);
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

std::string ourVerdict(onnx::ModelProto m, const qconv::io::OpSchemas& schemas) {
  return qconv::io::checkModel(m, nullptr, &schemas);
}

}  // namespace

TEST_CASE("OpSchemas answers every lookup as libonnx registry does", "[schemas]") {
  const auto all = onnx::OpSchemaRegistry::get_all_schemas_with_history();
  REQUIRE(all.size() > 400);
  REQUIRE(qconv::io::OpSchemas::declared() == all.size());
  qconv::io::OpSchemas ours;
  std::set<std::pair<std::string, std::string>> ops;
  for (const auto& s : all) ops.emplace(s.Name(), s.domain());
  size_t compared = 0;
  for (const auto& [op, domain] : ops)
    for (int v = 0; v <= 26; ++v) {
      const onnx::OpSchema* theirs = onnx::OpSchemaRegistry::Schema(op, v, domain);
      const onnx::OpSchema* mine = ours.GetSchema(op, v, domain);
      INFO(op << " domain '" << domain << "' version " << v);
      REQUIRE((theirs == nullptr) == (mine == nullptr));
      if (!theirs) continue;
      REQUIRE(mine->Name() == theirs->Name());
      REQUIRE(mine->domain() == theirs->domain());
      REQUIRE(mine->SinceVersion() == theirs->SinceVersion());
      REQUIRE(mine->Deprecated() == theirs->Deprecated());
      REQUIRE(mine->inputs().size() == theirs->inputs().size());
      REQUIRE(mine->outputs().size() == theirs->outputs().size());
      REQUIRE(mine->attributes().size() == theirs->attributes().size());
      ++compared;
    }
  REQUIRE(compared > 4000);
  REQUIRE(ours.GetSchema("NoSuchOp", 17, "") == nullptr);
  REQUIRE(ours.GetSchema("Conv", 17, "com.microsoft") == nullptr);
}

TEST_CASE("A check with OpSchemas gives the registry verdict and builds only what the model uses", "[schemas]") {
  // valid: a QDQ Conv (QuantizeLinear, DequantizeLinear, Conv)
  ModelBuilder ok = convModel(ConvSpec{});
  qconv::io::OpSchemas schemas;
  REQUIRE(ourVerdict(ok.proto(), schemas).empty());
  REQUIRE(registryVerdict(ok.proto()).empty());
  REQUIRE(schemas.built() == 3);

  // an unknown standard operator, a missing attribute value type, a deprecated operator
  ModelBuilder unknown(13);
  unknown.input("x", TensorProto::FLOAT, {1});
  unknown.output("y", TensorProto::FLOAT, {1});
  unknown.node("NoSuchOp", {"x"}, {"y"}, "n0");
  ModelBuilder bad_attr(13);
  bad_attr.input("x", TensorProto::FLOAT, {1, 1, 4, 4});
  bad_attr.output("y", TensorProto::FLOAT);
  setInt(bad_attr.node("MaxPool", {"x"}, {"y"}, "pool"), "no_such_attribute", 1);
  ModelBuilder deprecated(10);
  deprecated.input("x", TensorProto::FLOAT, {1, 1, 2, 2});
  deprecated.floats("s", {4}, {1, 1, 2, 2});
  deprecated.output("y", TensorProto::FLOAT);
  deprecated.node("Upsample", {"x", "s"}, {"y"}, "up");
  for (ModelBuilder* m : {&unknown, &bad_attr, &deprecated}) {
    const std::string theirs = registryVerdict(m->proto());
    REQUIRE(!theirs.empty());
    std::string mine = ourVerdict(m->proto(), schemas);
    REQUIRE(!mine.empty());
    // checkModel joins the checker's lines with spaces
    std::string joined = theirs;
    while (!joined.empty() && (joined.back() == '\n' || joined.back() == ' ')) joined.pop_back();
    for (auto& c : joined)
      if (c == '\n') c = ' ';
    REQUIRE(mine == joined);
  }
}

TEST_CASE("the operator history and the checker's schemas come from the same ONNX") {
  // opset_history.inc is generated from the onnx package; the schemas from the ONNX qconv links
  const auto& range = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  REQUIRE(range.at(onnx::ONNX_DOMAIN).second == qconv::newestKnownOpset());
  qconv::io::OpSchemas schemas;
  for (const char* op : {"QuantizeLinear", "DequantizeLinear"}) {
    const onnx::OpSchema* newest = schemas.GetSchema(op, static_cast<int>(qconv::newestKnownOpset()), "");
    REQUIRE(newest != nullptr);
    REQUIRE(qconv::isKnownOperator(op, newest->SinceVersion()));
  }
}
