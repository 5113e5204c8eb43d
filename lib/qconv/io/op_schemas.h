// The operator schemas the ONNX checker reads, built one at a time when it first asks for one.
//
// libonnx's own registry (onnx::OpSchemaRegistry) builds all ~440 schemas on its first lookup:
// about 10 ms, most of a small model's conversion. The checker reads its schemas through
// CheckerContext's ISchemaRegistry, so io::checkModel hands it an OpSchemas instead, which
// answers the same lookups with the same schemas (tests/unit/test_op_schemas.cpp holds it to
// the registry, lookup by lookup) and builds only those of the operators the model uses.
//
// One OpSchemas may serve many checks (a batch), from several threads: it is thread-safe, and
// a schema once built stays, at the same address, until the OpSchemas is destroyed.
#pragma once

#include <onnx/defs/schema.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>

namespace qconv::io {

class OpSchemas final : public onnx::ISchemaRegistry {
 public:
  OpSchemas() = default;
  OpSchemas(const OpSchemas&) = delete;
  OpSchemas& operator=(const OpSchemas&) = delete;

  /// What onnx::OpSchemaRegistry::Schema(op, max_version, domain) returns: the schema of `op`
  /// in `domain` with the greatest since-version not above `max_version`, or null.
  const onnx::OpSchema* GetSchema(const std::string& op, int max_version, const std::string& domain) const override;

  /// How many schemas libonnx declares (the table's length); how many this one has built.
  static size_t declared();
  size_t built() const;

 private:
  mutable std::mutex mutex_;
  mutable std::map<std::tuple<std::string, std::string, int>, std::unique_ptr<onnx::OpSchema>> built_;
  /// Every lookup answered so far ("op\0domain\0version" -> its schema, or null): the checker
  /// asks once per node, and a model uses few operators.
  mutable std::unordered_map<std::string, const onnx::OpSchema*> answered_;
};

}  // namespace qconv::io
