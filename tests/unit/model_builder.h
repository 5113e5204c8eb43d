// Test helpers: build ONNX models in a few lines, parse them into the IR, and capture what
// passes report.
#pragma once

#include <onnx/onnx_pb.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "qconv/ir/ir.h"
#include "qconv/passes/pass.h"

namespace qtest {

using onnx::TensorProto;

class ModelBuilder {
 public:
  explicit ModelBuilder(int64_t opset = 13, int64_t ir_version = 7);
  onnx::ModelProto& proto() { return model_; }
  onnx::GraphProto& graph() { return *model_.mutable_graph(); }

  void input(const std::string& name, int32_t type, const std::vector<int64_t>& dims);
  void output(const std::string& name, int32_t type, const std::vector<int64_t>& dims = {});
  void floats(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values);
  void ints(const std::string& name, int32_t type, const std::vector<int64_t>& dims, const std::vector<int64_t>& values);
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "");

  /// Parse into the IR (the proto is copied, so a builder can be parsed more than once).
  qconv::ir::Model build() const;

 private:
  onnx::ModelProto model_;
};

void setInt(onnx::NodeProto& n, const std::string& name, int64_t v);
void setInts(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v);
void setFloat(onnx::NodeProto& n, const std::string& name, float v);

/// Nodes of a type, in order.
std::vector<qconv::ir::Node*> nodesOf(const qconv::ir::Graph& g, const std::string& op);
/// The only node of a type (fails the test otherwise).
qconv::ir::Node* only(const qconv::ir::Graph& g, const std::string& op);

/// Values of a constant initializer.
std::vector<int64_t> intsOf(const qconv::ir::Value* v);
std::vector<float> floatsOf(const qconv::ir::Value* v);

/// Pass options for --target `name` (a profile that exists), with --approximate or not.
qconv::PassOptions forTarget(const char* name, bool approximate = false);

/// Diagnostics kept as text, one "<level>: <line>" each.
struct TextSink final : qconv::DiagnosticSink {
  std::ostringstream& text;
  explicit TextSink(std::ostringstream& t) : text(t) {}
  void emit(const qconv::Diagnostic& d) override { text << qconv::levelName(d.level) << ": " << d.line << '\n'; }
};

/// A PassContext whose diagnostics go to a string, every one (its details too).
struct Reporter {
  explicit Reporter(qconv::PassOptions options = {});
  std::ostringstream text;
  TextSink sink;
  qconv::Diagnostics diagnostics;
  qconv::PassContext ctx;
};

/// x -> Q(0.1, zp: `type`) -> MaxPool 2x2 (on the 8-bit tensor) -> DQ(0.1, zp) -> y: data movement
/// on an 8-bit tensor, as a QOp model has it.
ModelBuilder poolModel(int32_t type, int64_t zp);

/// A standard QDQ Conv: x(float) -Q-> DQ -> Conv(DQ(w int8), DQ(b int32)) -> Q -> DQ -> y.
/// Knobs let tests break one condition at a time.
struct ConvSpec {
  int64_t cin = 2, cout = 3;
  int32_t x_type = TensorProto::UINT8;
  int32_t w_type = TensorProto::INT8;
  int32_t y_type = TensorProto::UINT8;
  bool per_channel = false;
  bool bias = true;
  float bias_scale = 0.0f;  // bias DQ scale; 0: x_scale * w_scale[c] (float32 product)
  float x_scale = 0.05f, w_scale = 0.02f, y_scale = 0.1f;
  int64_t x_zp = 128, y_zp = 128;
  std::string activation;  // "", "Relu" or "Clip"
  float clip_lo = 0.0f, clip_hi = 6.0f;
};
ModelBuilder convModel(const ConvSpec& spec);

}  // namespace qtest
