#include "qconv/io/op_schemas.h"

#include <onnx/defs/operator_sets.h>
#include <onnx/defs/operator_sets_ml.h>
#include <onnx/defs/operator_sets_preview.h>
#include <onnx/defs/operator_sets_training.h>

#include <algorithm>
#include <cstring>
#include <string_view>

namespace qconv::io {

namespace {

struct Declared {
  std::string_view op;  // compared by length first
  const char* domain;
  int since;
  onnx::OpSchema (*make)();
};

/// The domain a schema class's set names; null for OnnxPreview, whose classes belong to
/// ai.onnx.preview or ai.onnx.preview.training: only the schema itself says which.
constexpr const char* domainOf(std::string_view set) {
  return set == "Onnx"           ? onnx::ONNX_DOMAIN
         : set == "OnnxML"       ? onnx::AI_ONNX_ML_DOMAIN
         : set == "OnnxTraining" ? onnx::AI_ONNX_TRAINING_DOMAIN
                                 : nullptr;
}

bool isPreviewDomain(const std::string& domain) {
  return domain == onnx::AI_ONNX_PREVIEW_DOMAIN || domain == onnx::AI_ONNX_PREVIEW_TRAINING_DOMAIN;
}

// every schema class libonnx's headers declare (third_party/OnnxSchemaTable.cmake)
#define QCONV_SCHEMA(set, ver, name) \
  {#name, domainOf(#set), ver, &onnx::GetOpSchema<onnx::ONNX_OPERATOR_SET_SCHEMA_CLASS_NAME(set, ver, name)>},
#define QCONV_PREVIEW_SCHEMA(ver, name) QCONV_SCHEMA(OnnxPreview, ver, name)
const Declared kDeclared[] = {
#include "qconv/onnx_schemas.inc"
};
#undef QCONV_PREVIEW_SCHEMA
#undef QCONV_SCHEMA

}  // namespace

size_t OpSchemas::declared() { return std::size(kDeclared); }

size_t OpSchemas::built() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return built_.size();
}

const onnx::OpSchema* OpSchemas::GetSchema(const std::string& op, int max_version, const std::string& domain) const {
  std::string key = op;
  key += '\0';
  key += domain;
  key += '\0';
  key += std::to_string(max_version);
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = answered_.find(key); it != answered_.end()) return it->second;
  // the declaration with the greatest since-version not above max_version (a scan of the table:
  // once per operator, domain and version the model uses)
  auto build = [&](const Declared& d, const std::string& in) -> const onnx::OpSchema* {
    auto& slot = built_[{op, in, d.since}];
    if (!slot) {
      slot = std::make_unique<onnx::OpSchema>(d.make());
      slot->Finalize();
    }
    return slot.get();
  };
  const Declared* best = nullptr;
  for (const Declared& d : kDeclared) {
    if (d.since > max_version || op != d.op || (best && d.since <= best->since)) continue;
    if (d.domain ? domain == d.domain : isPreviewDomain(domain) && d.make().domain() == domain) best = &d;
  }
  const onnx::OpSchema* schema = best ? build(*best, domain) : nullptr;
  answered_.emplace(std::move(key), schema);
  return schema;
}

}  // namespace qconv::io
