#include "qconv/pipeline/declare_types.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>
#include <onnx/shape_inference/implementation.h>

#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "qconv/io/op_schemas.h"
#include "qconv/passes/common/qop_forms.h"

namespace qconv {

namespace {

/// A com.microsoft QOp node seen as its float op: input i is the QOp's operand row i, with the
/// dequantized ones typed float; output 0 is the float op's, retyped afterwards.
class AsFloatOp final : public onnx::InferenceContext {
 public:
  AsFloatOp(onnx::InferenceContext& q, const QOpForm& form) : q_(q), form_(form) {
    if (form.variadic_from >= 0) {  // QLinearConcat: (X, scale, zero point) triples
      for (size_t i = static_cast<size_t>(form.variadic_from); i < q.getNumInputs(); i += 3) slots_.push_back(i);
    } else {
      for (const QOperand& o : form.operands) slots_.push_back(static_cast<size_t>(o.x));
    }
    for (size_t k = 0; k < slots_.size(); ++k) {
      const onnx::TypeProto* t = slots_[k] < q.getNumInputs() ? q.getInputType(slots_[k]) : nullptr;
      types_.emplace_back();
      if (!t) continue;
      types_.back() = *t;
      const bool plain = form.variadic_from < 0 && form.operands[k].kind == QOperand::kPlain;
      if (!plain && types_.back().has_tensor_type()) types_.back().mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    }
  }
  const onnx::AttributeProto* getAttribute(const std::string& name) const override { return q_.getAttribute(name); }
  size_t getNumInputs() const override { return slots_.size(); }
  const onnx::TypeProto* getInputType(size_t i) const override {
    return i < types_.size() && types_[i].has_tensor_type() ? &types_[i] : nullptr;
  }
  const onnx::TensorProto* getInputData(size_t i) const override {
    const bool plain = form_.variadic_from < 0 && i < form_.operands.size() && form_.operands[i].kind == QOperand::kPlain;
    return plain ? q_.getInputData(slots_[i]) : nullptr;  // a dequantized value's numbers are not its input's
  }
  size_t getNumOutputs() const override { return 1; }
  onnx::TypeProto* getOutputType(size_t) override { return &out_; }
  onnx::GraphInferencer* getGraphAttributeInferencer(const std::string&) override { return nullptr; }
  const onnx::SparseTensorProto* getInputSparseData(size_t) const override { return nullptr; }
  const onnx::TensorShapeProto* getSymbolicInput(size_t) const override { return nullptr; }
  const onnx::TypeProto& output() const { return out_; }

 private:
  onnx::InferenceContext& q_;
  const QOpForm& form_;
  std::vector<size_t> slots_;
  std::vector<onnx::TypeProto> types_;
  onnx::TypeProto out_;
};

/// The standard operators' schemas, and for com.microsoft QOp ops one whose inference is the
/// float op's.
class WithContrib final : public onnx::ISchemaRegistry {
 public:
  WithContrib(const io::OpSchemas& standard, int opset) : standard_(standard), opset_(opset) {}

  const onnx::OpSchema* GetSchema(const std::string& op, const int max_version, const std::string& domain) const override {
    if (domain != "com.microsoft") return standard_.GetSchema(op, max_version, domain);
    const QOpForm* form = qopFormNamed(op, domain);
    if (!form) return nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    auto& slot = contrib_[op];
    if (!slot) {
      const onnx::OpSchema* float_schema = standard_.GetSchema(form->float_op, opset_, "");
      slot = std::make_unique<onnx::OpSchema>();
      slot->SetName(op).SetDomain(domain).SinceVersion(1);
      slot->TypeAndShapeInferenceFunction([form, float_schema](onnx::InferenceContext& ctx) { infer(ctx, *form, float_schema); });
    }
    return slot.get();
  }

 private:
  static void infer(onnx::InferenceContext& ctx, const QOpForm& form, const onnx::OpSchema* float_schema) {
    // the element type: the output zero point's (uint8 when absent), or float for a float output
    int32_t elem = onnx::TensorProto::FLOAT;
    if (form.y_scale >= 0) {
      elem = onnx::TensorProto::UINT8;
      const size_t zp = static_cast<size_t>(form.y_zero_point);
      if (zp < ctx.getNumInputs() && ctx.getInputType(zp) && ctx.getInputType(zp)->has_tensor_type())
        elem = ctx.getInputType(zp)->tensor_type().elem_type();
    }
    onnx::TypeProto* out = ctx.getOutputType(0);
    const onnx::AttributeProto* last = ctx.getAttribute("channels_last");
    const bool transposed = last && last->i() != 0;  // the float op's layout differs: type only
    if (float_schema && float_schema->has_type_and_shape_inference_function() && !transposed) {
      AsFloatOp as(ctx, form);
      try {
        float_schema->GetTypeAndShapeInferenceFunction()(as);
        if (as.output().has_tensor_type() && as.output().tensor_type().has_shape())
          *out->mutable_tensor_type()->mutable_shape() = as.output().tensor_type().shape();
      } catch (const std::exception&) {  // the float op's inference declined: the type alone
      }
    }
    out->mutable_tensor_type()->set_elem_type(elem);
  }

  const io::OpSchemas& standard_;
  int opset_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::unique_ptr<onnx::OpSchema>> contrib_;
};

constexpr size_t kSkeletonBytes = 4096;  // tensors up to this size keep their bytes (shapes, axes)

}  // namespace

void declareValueTypes(onnx::ModelProto& model, const io::ValueTypes& untyped, const io::OpSchemas& schemas) {
  if (untyped.empty()) return;
  onnx::GraphProto* g = model.mutable_graph();
  // the skeleton: the graph with every large tensor's bytes left out
  onnx::ModelProto skeleton;
  skeleton.set_ir_version(model.ir_version());
  *skeleton.mutable_opset_import() = model.opset_import();
  onnx::GraphProto* s = skeleton.mutable_graph();
  *s->mutable_node() = g->node();
  *s->mutable_input() = g->input();
  *s->mutable_output() = g->output();
  *s->mutable_value_info() = g->value_info();
  for (const auto& t : g->initializer()) {
    onnx::TensorProto* c = s->add_initializer();
    if (t.ByteSizeLong() <= kSkeletonBytes && t.data_location() != onnx::TensorProto::EXTERNAL) {
      *c = t;
    } else {
      c->set_name(t.name());
      c->set_data_type(t.data_type());
      *c->mutable_dims() = t.dims();
    }
  }
  int opset = 0;
  for (const auto& op : model.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") opset = static_cast<int>(op.version());
  const WithContrib registry(schemas, opset);
  try {
    onnx::shape_inference::InferShapes(skeleton, &registry, onnx::ShapeInferenceOptions(false, 0, false));
  } catch (const std::exception&) {
    // a value_info the input declared disagrees with its op: what was inferred before it stays
  }
  std::unordered_map<std::string, const onnx::ValueInfoProto*> inferred;
  for (const auto& v : s->value_info())
    if (v.type().has_tensor_type() && v.type().tensor_type().elem_type() != 0) inferred.emplace(v.name(), &v);
  for (const auto& [name, elem] : untyped) {
    auto it = inferred.find(name);
    // the inference's type and shape (the operators' own rules), else the type qconv knows
    if (it != inferred.end()) {
      *g->add_value_info() = *it->second;
    } else if (elem != 0) {
      onnx::ValueInfoProto* v = g->add_value_info();
      v->set_name(name);
      v->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
    }
  }
}

}  // namespace qconv
