#include <fmt/format.h>

#include "qconv/ir/ir.h"

#include <algorithm>
#include <iterator>

#include "qconv/diag.h"

namespace qconv::ir {

bool Value::hasImplicitUses() const {
  return std::any_of(uses_.begin(), uses_.end(), [](const Use& u) { return u.index == kImplicitUse; });
}

const onnx::AttributeProto* Node::attribute(const std::string& name) const {
  for (const auto& a : proto_->attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t Node::attrInt(const std::string& name, int64_t fallback) const {
  const auto* a = attribute(name);
  return a ? a->i() : fallback;
}

std::vector<int64_t> Node::attrInts(const std::string& name) const {
  const auto* a = attribute(name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
}

float Node::attrFloat(const std::string& name, float fallback) const {
  const auto* a = attribute(name);
  return a ? a->f() : fallback;
}

std::string Node::label() const {
  if (!proto_->name().empty()) return proto_->name();
  return fmt::format("{} #{}", proto_->op_type(), ordinal_);
}

// ---------------------------------------------------------------------------------------------

std::vector<Node*> Graph::nodeSnapshot() const {
  if (!snapshot_valid_) {  // a pass that changes nothing leaves it for the next
    snapshot_.clear();
    snapshot_.reserve(nodes_.size());
    snapshot_.assign(nodes_.begin(), nodes_.end());
    snapshot_valid_ = true;
  }
  return snapshot_;
}

bool Graph::isAlive(const Node* n) const { return !n->dead_; }

Node* Graph::nextNode(const Node* n) const {
  auto it = std::next(n->position_);
  return it == nodes_.end() ? nullptr : *it;
}

std::vector<Value*> Graph::initializers() const {
  std::vector<Value*> out;
  for (Value* v : initializer_order_)
    if (!v->dropped_ && v->initializer_) out.push_back(v);
  return out;
}

Value* Graph::addValue(std::string name) {
  values_.push_back(std::make_unique<Value>());
  Value* v = values_.back().get();
  v->name_ = std::move(name);
  return v;
}

Value* Graph::addOpaqueValue(std::string name) {
  Value* v = addValue(std::move(name));
  v->opaque_ = true;
  return v;
}

void Graph::setInitializer(Value* v, std::unique_ptr<onnx::TensorProto> t, FileBytes bytes) {
  QCONV_ASSERT(!v->initializer_, "value '{}' already has an initializer", v->name_);
  QCONV_ASSERT(!bytes || t->data_location() == onnx::TensorProto::EXTERNAL,
               "value '{}': file-backed, but its tensor holds bytes", v->name_);
  v->elem_type_ = t->data_type();
  v->initializer_ = std::move(t);
  v->file_bytes_ = bytes;
  initializer_order_.push_back(v);
}

void Graph::setInfo(Value* v, std::unique_ptr<onnx::ValueInfoProto> info, bool from_value_info) {
  if (info->has_type() && info->type().has_tensor_type() && info->type().tensor_type().elem_type() != 0)
    v->elem_type_ = info->type().tensor_type().elem_type();
  if (from_value_info) {
    v->in_value_info_ = true;
    value_info_order_.push_back(v);
  }
  if (!v->info_) v->info_ = std::move(info);
}

void Graph::declareInfo(Value* v, std::unique_ptr<onnx::ValueInfoProto> info) {
  if (!v->in_value_info_ && !v->graph_input_ && !v->graph_output_) {
    v->in_value_info_ = true;
    value_info_order_.push_back(v);
  }
  v->info_ = std::move(info);
}

void Graph::markGraphInput(Value* v) {
  v->graph_input_ = true;
  inputs_.push_back(v);
}

void Graph::markGraphOutput(Value* v) {
  v->graph_output_ = true;
  outputs_.push_back(v);
}

Node* Graph::allocateNode() {
  if (chunk_used_ == kNodeChunk) {
    node_chunks_.push_back(std::make_unique<Node[]>(kNodeChunk));
    chunk_used_ = 0;
  }
  return &node_chunks_.back()[chunk_used_++];
}

Node* Graph::madeNode(size_t ordinal) const {
  QCONV_ASSERT(ordinal < next_ordinal_, "madeNode({}) of {} made", ordinal, next_ordinal_);
  return &node_chunks_[ordinal / kNodeChunk][ordinal % kNodeChunk];  // allocateNode's order
}

Node* Graph::appendNode(std::unique_ptr<onnx::NodeProto> proto, const std::vector<Value*>& inputs,
                        const std::vector<Value*>& outputs, const std::vector<Value*>& implicit_inputs) {
  Node* n = allocateNode();
  QCONV_ASSERT(proto, "appendNode without a proto");
  n->proto_ = std::move(proto);
  n->proto_->clear_input();
  n->proto_->clear_output();
  n->domain_ = n->proto_->domain() == "ai.onnx" ? std::string() : n->proto_->domain();
  n->op_type_ = &*op_types_.insert(n->proto_->op_type()).first;
  n->ordinal_ = next_ordinal_++;
  n->position_ = nodes_.insert(nodes_.end(), n);
  snapshot_valid_ = false;
  n->inputs_ = inputs;
  n->use_pos_.assign(inputs.size(), 0);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i]) addUse(inputs[i], n, static_cast<int>(i));
  n->implicit_inputs_ = implicit_inputs;
  for (Value* v : implicit_inputs) v->uses_.push_back({n, kImplicitUse});
  n->outputs_ = outputs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i]) continue;
    QCONV_ASSERT(!outputs[i]->producer_, "value '{}' produced twice", outputs[i]->name_);
    outputs[i]->producer_ = n;
    outputs[i]->producer_slot_ = static_cast<int>(i);
  }
  return n;
}

Value* Graph::newValue(const std::string& hint, int32_t elem_type) {
  Value* v = addValue(hint);
  v->generated_name_ = true;
  v->elem_type_ = elem_type;
  return v;
}

Value* Graph::addInitializer(const std::string& hint, std::unique_ptr<onnx::TensorProto> t) {
  Value* v = newValue(hint, t->data_type());
  setInitializer(v, std::move(t));
  return v;
}

Node* Graph::createNode(const std::string& op_type, const std::string& domain,
                        const std::vector<Value*>& inputs, size_t num_outputs, Node* before) {
  Node* n = allocateNode();
  n->proto_ = std::make_unique<onnx::NodeProto>();
  n->proto_->set_op_type(op_type);
  if (!domain.empty()) n->proto_->set_domain(domain);
  n->domain_ = domain == "ai.onnx" ? std::string() : domain;
  n->op_type_ = &*op_types_.insert(op_type).first;
  n->ordinal_ = next_ordinal_++;
  auto where = before ? before->position_ : nodes_.end();
  snapshot_valid_ = false;
  QCONV_ASSERT(!before || !before->dead_, "createNode before a destroyed node");
  n->position_ = nodes_.insert(where, n);
  n->inputs_.assign(inputs.size(), nullptr);
  n->use_pos_.assign(inputs.size(), 0);
  for (size_t i = 0; i < inputs.size(); ++i) setInput(n, i, inputs[i]);
  for (size_t i = 0; i < num_outputs; ++i) {
    Value* v = newValue(op_type + "_out", 0);
    v->producer_ = n;
    v->producer_slot_ = static_cast<int>(i);
    n->outputs_.push_back(v);
  }
  return n;
}

void Graph::addUse(Value* v, Node* n, int slot) {
  if (slot != kImplicitUse) n->use_pos_[static_cast<size_t>(slot)] = v->uses_.size();
  v->uses_.push_back({n, slot});
}

// O(1) for an explicit use: its position is kept on the node, and the last use moves into its
// place (so a value read by 100k nodes loses them in linear time; the order of uses() is not
// the order they were added). An implicit use (a subgraph's) is searched for: they are few.
void Graph::removeUse(Value* v, Node* n, int slot) {
  size_t pos = v->uses_.size();
  if (slot != kImplicitUse) {
    pos = n->use_pos_[static_cast<size_t>(slot)];
  } else {
    for (size_t k = 0; k < v->uses_.size() && pos == v->uses_.size(); ++k)
      if (v->uses_[k].node == n && v->uses_[k].index == kImplicitUse) pos = k;
  }
  QCONV_ASSERT(pos < v->uses_.size() && v->uses_[pos].node == n && v->uses_[pos].index == slot,
               "use of '{}' by {} slot {} not recorded", v->name_, n->label(), slot);
  const Use last = v->uses_.back();
  v->uses_[pos] = last;
  if (last.index != kImplicitUse) last.node->use_pos_[static_cast<size_t>(last.index)] = pos;
  v->uses_.pop_back();
}

void Graph::setInput(Node* n, size_t slot, Value* v) {
  QCONV_ASSERT(!n->dead_, "setInput on a destroyed node");
  if (slot >= n->inputs_.size()) {
    n->inputs_.resize(slot + 1, nullptr);
    n->use_pos_.resize(slot + 1, 0);
  }
  if (Value* old = n->inputs_[slot]) removeUse(old, n, static_cast<int>(slot));
  n->inputs_[slot] = v;
  if (v) {
    QCONV_ASSERT(!v->dropped_, "using a pruned value '{}'", v->name_);
    addUse(v, n, static_cast<int>(slot));
  }
}

void Graph::takeOutput(Node* n, size_t slot, Value* v) {
  QCONV_ASSERT(slot < n->outputs_.size(), "takeOutput: slot {} out of range", slot);
  Node* old = v->producer_;
  QCONV_ASSERT(old && old != n, "takeOutput: '{}' must be produced by another node", v->name_);
  Value* placeholder = newValue(v->name_ + "_unused", v->elem_type_);
  placeholder->producer_ = old;
  placeholder->producer_slot_ = v->producer_slot_;
  old->outputs_[v->producer_slot_] = placeholder;

  Value* replaced = n->outputs_[slot];
  QCONV_ASSERT(replaced && replaced->uses_.empty() && !replaced->graph_output_,
               "takeOutput: slot {} of {} is in use", slot, n->label());
  replaced->producer_ = nullptr;
  replaced->dropped_ = true;
  n->outputs_[slot] = v;
  v->producer_ = n;
  v->producer_slot_ = static_cast<int>(slot);
}

void Graph::replaceAllUsesWith(Value* from, Value* to) {
  QCONV_ASSERT(from != to, "replaceAllUsesWith: same value");
  QCONV_ASSERT(!from->hasImplicitUses(), "replaceAllUsesWith: '{}' is used by a subgraph", from->name_);
  QCONV_ASSERT(!from->graph_output_, "replaceAllUsesWith: '{}' is a graph output", from->name_);
  std::vector<Use> uses = from->uses_;
  for (const Use& u : uses) setInput(u.node, static_cast<size_t>(u.index), to);
}

void Graph::erase(Node* n) {
  n->dead_ = true;
  destroyed_.push_back(n);
  snapshot_valid_ = false;
  nodes_.erase(n->position_);
}

void Graph::destroyNode(Node* n) {
  QCONV_ASSERT(!n->dead_, "destroyNode twice");
  for (Value* out : n->outputs_) {
    if (!out) continue;
    QCONV_ASSERT(out->uses_.empty() && !out->graph_output_, "destroyNode {}: output '{}' still used",
                 n->label(), out->name_);
    out->producer_ = nullptr;
    out->dropped_ = true;
  }
  for (size_t i = 0; i < n->inputs_.size(); ++i)
    if (n->inputs_[i]) removeUse(n->inputs_[i], n, static_cast<int>(i));
  for (Value* v : n->implicit_inputs_) removeUse(v, n, kImplicitUse);
  n->inputs_.clear();
  n->implicit_inputs_.clear();
  erase(n);
}

void Graph::pruneIfDead(Value* v) {
  if (!v || v->dropped_ || !v->uses_.empty() || v->graph_output_ || v->graph_input_ || v->opaque_) return;
  Node* p = v->producer_;
  if (!p) {
    v->dropped_ = true;  // an initializer nobody reads any more
    return;
  }
  for (Value* out : p->outputs_)
    if (out && (!out->uses_.empty() || out->graph_output_)) return;
  std::vector<Value*> inputs = p->inputs_;
  destroyNode(p);
  for (Value* in : inputs) pruneIfDead(in);
}

int64_t defaultOpset(const Model& model) {
  for (const auto& op : model.shell.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") return op.version();
  // before IR 3 there was no opset_import: such a model is at opset 1 (as the ONNX checker reads it)
  return model.shell.ir_version() < 3 && model.shell.opset_import_size() == 0 ? 1 : 0;
}

}  // namespace qconv::ir
