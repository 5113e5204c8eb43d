#include "qconv/pipeline/declare_types.h"

#include <google/protobuf/arena.h>
#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <map>
#include <memory>
#include <algorithm>
#include <optional>
#include <mutex>
#include <unordered_map>
#include <string_view>

#include "qconv/io/op_schemas.h"
#include "qconv/ir/tensor.h"
#include "qconv/passes/common/qop_forms.h"

namespace qconv {

namespace {

/// The rank of input i, or -1 when it has no shape.
int rankOf(const onnx::InferenceContext& ctx, size_t i) {
  const onnx::TypeProto* t = i < ctx.getNumInputs() ? ctx.getInputType(i) : nullptr;
  return t && t->has_tensor_type() && t->tensor_type().has_shape() ? t->tensor_type().shape().dim_size() : -1;
}

/// An INTS attribute's length, or -1 when it is absent.
int lengthOf(const onnx::InferenceContext& ctx, const char* name) {
  const onnx::AttributeProto* a = ctx.getAttribute(name);
  return a ? a->ints_size() : -1;
}

/// The values of a small constant int64 input, or nullopt.
std::optional<std::vector<int64_t>> intsOf(const onnx::InferenceContext& ctx, size_t i) {
  const onnx::TensorProto* t = i < ctx.getNumInputs() ? ctx.getInputData(i) : nullptr;
  if (!t || t->data_type() != onnx::TensorProto::INT64 || t->dims_size() > 1) return std::nullopt;
  std::string why;
  return ir::readInts(*t, &why);
}

/// Whether libonnx's inference function of `op` may be called on `ctx`: only for the operators
/// below, and only when what their inference indexes by is consistent. libonnx 1.12 reads
/// attribute lengths, weight ranks and axes without checking them against the input's rank (a
/// rank-3 x with a rank-4 Conv weight crashed it, found by the fuzzer), and a model the checker
/// accepts may still be inconsistent that way. Other operators' outputs get no shape.
bool safeToInfer(const std::string& op, const onnx::InferenceContext& ctx) {
  static constexpr std::string_view kSameShape[] = {
      "QuantizeLinear", "DequantizeLinear", "Relu", "Clip", "Sigmoid", "LeakyRelu", "Tanh", "Identity", "Cast",
      "Softmax", "HardSigmoid", "HardSwish", "Erf", "Sqrt", "Exp", "Neg", "Abs", "Round", "Floor", "Ceil", "Tanh"};
  static constexpr std::string_view kBroadcast[] = {"Add", "Sub", "Mul", "Div", "Where", "Max", "Min"};
  for (std::string_view o : kSameShape)
    if (op == o) return rankOf(ctx, 0) >= 0;
  for (std::string_view o : kBroadcast)
    if (op == o) return true;  // libonnx checks broadcasting, and fails by throwing
  const int rank = rankOf(ctx, 0);
  const bool conv = op == "Conv" || op == "ConvInteger" || op == "QLinearConv";
  if (conv || op == "MaxPool" || op == "AveragePool") {
    if (rank < 3) return false;
    const int spatial = rank - 2;
    if (conv && rankOf(ctx, op == "QLinearConv" ? 3 : 1) != rank) return false;
    for (const char* a : {"kernel_shape", "strides", "dilations"})
      if (lengthOf(ctx, a) >= 0 && lengthOf(ctx, a) != spatial) return false;
    if (lengthOf(ctx, "pads") >= 0 && lengthOf(ctx, "pads") != 2 * spatial) return false;
    return conv || lengthOf(ctx, "kernel_shape") == spatial;
  }
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") return rank >= 2;
  if (op == "MatMul" || op == "MatMulInteger") return rank >= 1 && rankOf(ctx, 1) >= 1;
  if (op == "QLinearMatMul") return rank >= 1 && rankOf(ctx, 3) >= 1;
  if (op == "Squeeze" || op == "Unsqueeze") {  // axes: an input from opset 13, else an attribute
    std::optional<std::vector<int64_t>> axes = intsOf(ctx, 1);
    if (const onnx::AttributeProto* a = ctx.getAttribute("axes"))
      axes = std::vector<int64_t>(a->ints().begin(), a->ints().end());
    if (rank < 0 || (!axes && (op == "Unsqueeze" || ctx.getNumInputs() > 1))) return false;
    if (!axes) return true;  // Squeeze of every dimension 1
    const int64_t out = op == "Unsqueeze" ? rank + static_cast<int64_t>(axes->size()) : rank;
    std::vector<int64_t> seen;
    for (int64_t x : *axes) {
      if (x < -out || x >= out) return false;
      seen.push_back(x < 0 ? x + out : x);
    }
    std::sort(seen.begin(), seen.end());
    return std::adjacent_find(seen.begin(), seen.end()) == seen.end();
  }
  if (op == "Pad") {  // pads: an input from opset 11
    auto pads = intsOf(ctx, 1);
    return rank >= 0 && pads && static_cast<int>(pads->size()) == 2 * rank;
  }
  if (op == "Gemm") return rank == 2 && rankOf(ctx, 1) == 2;
  if (op == "Shape") return rank >= 0;  // start and end are clamped to the rank
  if (op == "Gather") {  // the output's rank: data's + indices' - 1
    const onnx::AttributeProto* a = ctx.getAttribute("axis");
    const int64_t axis = a ? a->i() : 0;
    return rank >= 1 && rankOf(ctx, 1) >= 0 && axis >= -rank && axis < rank;
  }
  if (op == "Split") {  // split: an input from opset 13 (else an attribute, or even parts)
    const onnx::AttributeProto* a = ctx.getAttribute("axis");
    const int64_t axis = a ? a->i() : 0;
    if (rank < 1 || axis < -rank || axis >= rank) return false;
    std::optional<std::vector<int64_t>> split = intsOf(ctx, 1);
    if (const onnx::AttributeProto* attr = ctx.getAttribute("split"))
      split = std::vector<int64_t>(attr->ints().begin(), attr->ints().end());
    if (!split) return ctx.getNumInputs() < 2 || ctx.getInputType(1) == nullptr;  // even parts
    return split->size() == ctx.getNumOutputs() &&
           std::all_of(split->begin(), split->end(), [](int64_t d) { return d >= 0; });
  }
  if (op == "ConstantOfShape") {  // its shape: the values of input 0, a 1-D int64 constant
    auto dims = intsOf(ctx, 0);
    return rank == 1 && dims && std::all_of(dims->begin(), dims->end(), [](int64_t d) { return d >= 0; });
  }
  if (op == "Flatten") {
    const onnx::AttributeProto* a = ctx.getAttribute("axis");
    const int64_t axis = a ? a->i() : 1;
    return rank >= 0 && axis >= -rank && axis <= rank;
  }
  if (op == "Reshape") {
    auto shape = intsOf(ctx, 1);
    if (rank < 0 || !shape || std::count(shape->begin(), shape->end(), -1) > 1) return false;
    for (size_t i = 0; i < shape->size(); ++i)
      if ((*shape)[i] < -1 || ((*shape)[i] == 0 && static_cast<int>(i) >= rank)) return false;
    return true;
  }
  if (op == "Transpose") {
    const onnx::AttributeProto* perm = ctx.getAttribute("perm");
    if (rank < 0 || !perm) return rank >= 0;
    std::vector<int64_t> p(perm->ints().begin(), perm->ints().end());
    std::sort(p.begin(), p.end());
    for (int i = 0; i < static_cast<int>(p.size()); ++i)
      if (p[static_cast<size_t>(i)] != i) return false;
    return static_cast<int>(p.size()) == rank;
  }
  if (op == "Concat") {
    const onnx::AttributeProto* a = ctx.getAttribute("axis");
    if (!a || rank < 1 || a->i() < -rank || a->i() >= rank) return false;
    for (size_t i = 0; i < ctx.getNumInputs(); ++i)
      if (rankOf(ctx, i) != rank) return false;
    return true;
  }
  return false;
}

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
    AsFloatOp as(ctx, form);
    if (float_schema && float_schema->has_type_and_shape_inference_function() && !transposed &&
        safeToInfer(form.float_op, as)) {
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

constexpr size_t kDataBytes = 4096;  // constants up to this size are shown to the inference (shapes, axes)

/// One node, as ONNX's inference functions see it: its attributes, its inputs' types and small
/// constant values, and its outputs' types to fill.
class NodeContext final : public onnx::InferenceContext {
 public:
  /// The outputs' types are made in `arena`, where the inference's result stays.
  NodeContext(const onnx::NodeProto& n, const std::vector<const onnx::TypeProto*>& in,
              const std::vector<const onnx::TensorProto*>& data, google::protobuf::Arena& arena)
      : n_(n), in_(in), data_(data) {
    out_.reserve(static_cast<size_t>(n.output_size()));
    for (int i = 0; i < n.output_size(); ++i) out_.push_back(google::protobuf::Arena::CreateMessage<onnx::TypeProto>(&arena));
  }
  const onnx::AttributeProto* getAttribute(const std::string& name) const override {
    for (const auto& a : n_.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  size_t getNumInputs() const override { return in_.size(); }
  const onnx::TypeProto* getInputType(size_t i) const override { return i < in_.size() ? in_[i] : nullptr; }
  const onnx::TensorProto* getInputData(size_t i) const override { return i < data_.size() ? data_[i] : nullptr; }
  size_t getNumOutputs() const override { return out_.size(); }
  onnx::TypeProto* getOutputType(size_t i) override { return out_.at(i); }
  onnx::GraphInferencer* getGraphAttributeInferencer(const std::string&) override { return nullptr; }
  const onnx::SparseTensorProto* getInputSparseData(size_t) const override { return nullptr; }
  const onnx::TensorShapeProto* getSymbolicInput(size_t) const override { return nullptr; }
  onnx::TypeProto* output(size_t i) { return out_[i]; }

 private:
  const onnx::NodeProto& n_;
  const std::vector<const onnx::TypeProto*>& in_;
  const std::vector<const onnx::TensorProto*>& data_;
  std::vector<onnx::TypeProto*> out_;  // in the arena
};

/// A tensor type of a valid element type whose dimensions, where given, are not negative: what
/// ONNX's inference functions take for granted of their inputs (the checker checks it only later).
bool wellFormed(const onnx::TypeProto& t) {
  if (!t.has_tensor_type()) return false;
  const int32_t elem = t.tensor_type().elem_type();
  if (elem == onnx::TensorProto::UNDEFINED || !onnx::TensorProto_DataType_IsValid(elem)) return false;
  for (const auto& d : t.tensor_type().shape().dim())
    if (d.has_dim_value() && d.dim_value() < 0) return false;
  return true;
}

bool hasSubgraph(const onnx::NodeProto& n) {
  for (const auto& a : n.attribute())
    if (a.has_g() || a.graphs_size() > 0) return true;
  return false;
}

/// What ONNX's inference functions give each node output `g` declares nothing of, node by node in
/// graph order (`inferred`), from `types`: what `g` declares (inputs, value_info, outputs,
/// initializers' types and dims, the bytes of small ones). Keys are `g`'s own names, and the
/// types `g`'s own where it declares them: the types made here (an initializer's, an inferred
/// one) are in `arena`, freed at once with it.
struct Inference {
  google::protobuf::Arena arena;
  std::unordered_map<std::string_view, const onnx::TypeProto*> types;
  std::unordered_map<std::string_view, const onnx::TypeProto*> inferred;
};

void inferGraph(const onnx::GraphProto* g, const std::unordered_map<std::string, int>& opsets,
                const WithContrib& registry, Inference& result) {
  auto& types = result.types;
  auto& inferred = result.inferred;
  std::unordered_map<std::string_view, const onnx::TensorProto*> data;
  types.reserve(static_cast<size_t>(g->input_size() + g->value_info_size() + g->output_size() + g->initializer_size() +
                                    g->node_size()));
  for (const auto* list : {&g->input(), &g->value_info(), &g->output()})
    for (const auto& v : *list)
      if (wellFormed(v.type())) types.emplace(v.name(), &v.type());
  for (const auto& t : g->initializer()) {
    if (!onnx::TensorProto_DataType_IsValid(t.data_type()) || t.data_type() == onnx::TensorProto::UNDEFINED ||
        std::any_of(t.dims().begin(), t.dims().end(), [](int64_t d) { return d < 0; }))
      continue;  // not a type an inference function can take: the nodes reading it are left alone
    if (!types.count(t.name())) {  // a declaration stands (as the first entry does)
      auto* type = google::protobuf::Arena::CreateMessage<onnx::TypeProto>(&result.arena);
      type->mutable_tensor_type()->set_elem_type(t.data_type());
      onnx::TensorShapeProto* shape = type->mutable_tensor_type()->mutable_shape();  // a scalar's too: rank 0
      for (int64_t d : t.dims()) shape->add_dim()->set_dim_value(d);
      types.emplace(t.name(), type);
    }
    if (t.data_location() != onnx::TensorProto::EXTERNAL && t.ByteSizeLong() <= kDataBytes) data.emplace(t.name(), &t);
  }
  // one lookup per operator
  std::map<std::pair<std::string_view, std::string_view>, const onnx::OpSchema*> schemaOf;
  std::vector<const onnx::TypeProto*> in;
  std::vector<const onnx::TensorProto*> bytes;
  for (const auto& n : g->node()) {
    // a node with a subgraph, or an input of no known type, is left alone: ONNX's inference
    // functions read their inputs' types without asking whether they have them
    if (hasSubgraph(n)) continue;
    auto cached = schemaOf.find({n.domain(), n.op_type()});
    if (cached == schemaOf.end()) {
      auto version = opsets.find(n.domain() == "ai.onnx" ? "" : n.domain());
      const onnx::OpSchema* found =
          version == opsets.end() ? nullptr : registry.GetSchema(n.op_type(), version->second, n.domain());
      cached = schemaOf.emplace(std::make_pair(std::string_view(n.domain()), std::string_view(n.op_type())), found).first;
    }
    const onnx::OpSchema* schema = cached->second;
    if (!schema || !schema->has_type_and_shape_inference_function()) continue;
    in.clear();
    bytes.clear();
    bool known = true;
    for (const auto& name : n.input()) {
      if (name.empty()) {
        in.push_back(nullptr);
        bytes.push_back(nullptr);
        continue;
      }
      auto it = types.find(name);
      if (it == types.end()) {
        known = false;
        break;
      }
      in.push_back(it->second);
      auto d = data.find(name);
      bytes.push_back(d == data.end() ? nullptr : d->second);
    }
    if (!known) continue;
    NodeContext ctx(n, in, bytes, result.arena);
    if (n.domain().empty() && !safeToInfer(n.op_type(), ctx)) continue;
    try {
      schema->GetTypeAndShapeInferenceFunction()(ctx);
    } catch (const std::exception&) {  // the inference declined this node: its outputs stay unknown
      continue;
    }
    for (int i = 0; i < n.output_size(); ++i) {
      const onnx::TypeProto* t = ctx.output(static_cast<size_t>(i));
      if (n.output(i).empty() || !wellFormed(*t)) continue;
      if (types.emplace(n.output(i), t).second) inferred.emplace(n.output(i), t);  // a declared type stays
    }
  }
}

}  // namespace

void declareValueTypes(onnx::ModelProto& model, const io::ValueTypes& untyped, const io::OpSchemas& schemas) {
  if (untyped.empty()) return;
  onnx::GraphProto* g = model.mutable_graph();
  std::unordered_map<std::string, int> opsets;
  for (const auto& op : model.opset_import()) opsets[op.domain() == "ai.onnx" ? "" : op.domain()] = static_cast<int>(op.version());
  const WithContrib registry(schemas, opsets.count("") ? opsets[""] : 0);

  // what is known: graph inputs and outputs, value_info, initializers (type and dims; the bytes of
  // small ones), then what each node's inference gives, in graph order
  Inference known;
  inferGraph(g, opsets, registry, known);
  const auto& inferred = known.inferred;
  for (const auto& [name, elem] : untyped) {
    onnx::ValueInfoProto* v = nullptr;
    // the inference's type and shape (the operators' own rules), else the type qconv knows
    if (auto it = inferred.find(name); it != inferred.end()) {
      v = g->add_value_info();
      *v->mutable_type() = *it->second;
    } else if (elem != 0) {
      v = g->add_value_info();
      v->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
    }
    if (v) v->set_name(name);
  }
}

namespace {

bool fullShape(const onnx::TypeProto& t) {
  if (!t.has_tensor_type() || !t.tensor_type().has_shape()) return false;
  for (const auto& d : t.tensor_type().shape().dim())
    if (!d.has_dim_value()) return false;
  return true;
}

}  // namespace

size_t declareInferredShapes(ir::Model& model, const io::OpSchemas& schemas) {
  // the graph as the inference reads it: every value by a name of its own, constants with their
  // types and dims (and the bytes of small inline ones), each node's proto with those names
  onnx::GraphProto g;
  std::unordered_map<const ir::Value*, std::string> names;
  auto nameOf = [&](const ir::Value* v) -> const std::string& {
    auto [it, added] = names.emplace(v, std::string());
    if (added) it->second = "v" + std::to_string(names.size());
    return it->second;
  };
  for (const ir::Value* v : model.graph.inputs())
    if (v->info()) {
      *g.add_input() = *v->info();
      g.mutable_input(g.input_size() - 1)->set_name(nameOf(v));
    }
  for (const ir::Value* v : model.graph.initializers()) {
    const onnx::TensorProto& t = *v->initializer();
    onnx::TensorProto* c = g.add_initializer();
    if (t.data_location() != onnx::TensorProto::EXTERNAL && t.ByteSizeLong() <= kDataBytes) {
      *c = t;
    } else {  // its type and dims alone: marked external, so that no inference reads its (absent) bytes
      c->set_data_type(t.data_type());
      c->mutable_dims()->CopyFrom(t.dims());
      c->set_data_location(onnx::TensorProto::EXTERNAL);
    }
    c->set_name(nameOf(v));
  }
  std::vector<ir::Value*> outputs;  // node outputs that may be declared
  for (const ir::Node* n : model.graph.nodes()) {
    onnx::NodeProto* p = g.add_node();
    *p = n->proto();
    p->clear_input();
    p->clear_output();
    for (const ir::Value* v : n->inputs()) p->add_input(v ? nameOf(v) : std::string());
    for (ir::Value* v : n->outputs()) {
      p->add_output(v ? nameOf(v) : std::string());
      if (!v) continue;
      if (v->info() && (v->isGraphOutput() || fullShape(v->info()->type()))) {
        *g.add_value_info() = *v->info();
        g.mutable_value_info(g.value_info_size() - 1)->set_name(nameOf(v));
      } else if (!v->isGraphOutput()) {
        outputs.push_back(v);
      }
    }
  }
  std::unordered_map<std::string, int> opsets;
  for (const auto& op : model.shell.opset_import())
    opsets[op.domain() == "ai.onnx" ? "" : op.domain()] = static_cast<int>(op.version());
  const WithContrib registry(schemas, opsets.count("") ? opsets[""] : 0);
  Inference known;
  inferGraph(&g, opsets, registry, known);
  size_t declared = 0;
  for (ir::Value* v : outputs) {
    auto it = known.inferred.find(names.at(v));
    if (it == known.inferred.end() || !fullShape(*it->second)) continue;
    const int32_t elem = it->second->tensor_type().elem_type();
    if (v->elemType() && elem != v->elemType()) continue;  // not what qconv knows: left undeclared
    auto info = std::make_unique<onnx::ValueInfoProto>();
    info->set_name(v->name());
    *info->mutable_type() = *it->second;
    model.graph.declareInfo(v, std::move(info));
    ++declared;
  }
  return declared;
}

}  // namespace qconv
