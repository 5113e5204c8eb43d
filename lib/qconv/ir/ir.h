// The qconv graph IR: values, nodes and a graph with def-use links.
//
// Ownership and invariants
// - A Graph owns its Nodes (in topological order) and its Values.
// - Every Value has at most one producer (a Node output slot), or is a graph input, or holds
//   an initializer, or is opaque (a sparse initializer, which the IR never interprets).
// - Value::uses() lists every (node, input slot) that reads the value; subgraph references
//   from If/Loop/Scan bodies are uses with slot kImplicitUse, so such a value never looks dead.
// - Only the mutators of Graph change links; they keep producer and uses consistent.
// - Names matter at parse and emit only: passes follow pointers. A value created by a pass
//   carries a name hint, made unique when the model is emitted.
// - What the IR does not interpret stays in protobuf form: each Node keeps its NodeProto
//   (attributes, subgraphs, doc_string, unknown fields) minus its input/output names; each
//   Value keeps its ValueInfoProto; the Model keeps a shell ModelProto with everything else.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "qconv/ir/byte_source.h"

namespace qconv::ir {

class Node;
class Graph;

/// A use of a value: input slot `index` of `node`, or kImplicitUse for a subgraph reference.
struct Use {
  Node* node;
  int index;
};
constexpr int kImplicitUse = -1;

class Value {
 public:
  const std::string& name() const { return name_; }
  bool hasGeneratedName() const { return generated_name_; }

  Node* producer() const { return producer_; }
  /// The output slot of producer() that holds this value.
  int producerSlot() const { return producer_slot_; }
  const std::vector<Use>& uses() const { return uses_; }
  bool hasImplicitUses() const;

  /// Element type (onnx::TensorProto::DataType), 0 when unknown.
  int32_t elemType() const { return elem_type_; }
  void setElemType(int32_t t) { elem_type_ = t; }

  bool isGraphInput() const { return graph_input_; }
  bool isGraphOutput() const { return graph_output_; }
  /// An initializer that is not also a graph input: its value cannot change at run time.
  bool isConstant() const { return initializer_ != nullptr && !graph_input_; }
  const onnx::TensorProto* initializer() const { return initializer_.get(); }
  /// Where the initializer's bytes are when they stay in a file (its TensorProto then says
  /// EXTERNAL and holds none); empty otherwise. Read them with ir::readFloats / readInts /
  /// ByteStream on the value, never through the TensorProto alone.
  const FileBytes& fileBytes() const { return file_bytes_; }

  /// The ValueInfoProto the model gave for this value (graph input/output or value_info).
  const onnx::ValueInfoProto* info() const { return info_.get(); }

 private:
  friend class Graph;
  std::string name_;
  bool generated_name_ = false;
  Node* producer_ = nullptr;
  int producer_slot_ = -1;
  std::vector<Use> uses_;
  int32_t elem_type_ = 0;
  bool graph_input_ = false;
  bool graph_output_ = false;
  bool opaque_ = false;
  bool in_value_info_ = false;
  bool dropped_ = false;  // pruned: not emitted
  std::unique_ptr<onnx::TensorProto> initializer_;
  FileBytes file_bytes_;
  std::unique_ptr<onnx::ValueInfoProto> info_;
  const onnx::ValueInfoProto* listed_as_ = nullptr;  // emit: the first entry written for it
};

class Node {
 public:
  const std::string& opType() const { return *op_type_; }
  /// Domain with "ai.onnx" folded into "" (the same domain).
  const std::string& domain() const { return domain_; }
  const std::string& name() const { return proto_->name(); }
  /// This op type, in any domain. Lengths compare first (a string_view's ==), so most mismatches
  /// cost no memcmp: passes ask this of every node, several times each.
  bool opIs(std::string_view op_type) const { return std::string_view(*op_type_) == op_type; }
  /// This op type, in the standard domain.
  bool is(std::string_view op_type) const { return domain_.empty() && opIs(op_type); }

  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  /// Input slot i, or null when absent (past the end or an empty name).
  Value* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  Value* output(size_t i) const { return i < outputs_.size() ? outputs_[i] : nullptr; }

  /// Attributes, doc_string and everything else of the node but its input/output names.
  const onnx::NodeProto& proto() const { return *proto_; }
  onnx::NodeProto& mutableProto() { return *proto_; }

  const onnx::AttributeProto* attribute(const std::string& name) const;
  int64_t attrInt(const std::string& name, int64_t fallback) const;
  /// An INTS attribute's values; empty when the node has no such attribute.
  std::vector<int64_t> attrInts(const std::string& name) const;
  float attrFloat(const std::string& name, float fallback) const;

  /// A readable label for messages: the node name, else "<op_type> #<position>".
  std::string label() const;
  /// Whether name() is a hint a pass gave (Graph::setNameHint), made unique at emit.
  bool hasGeneratedName() const { return generated_name_; }
  /// When the graph made it: Graph::madeNode(ordinal()) is this node.
  size_t ordinal() const { return ordinal_; }

 private:
  friend class Graph;
  std::unique_ptr<onnx::NodeProto> proto_;  // set by the graph at creation; null only after releaseProto
  const std::string* op_type_ = nullptr;  // proto_'s op_type, interned by the graph: read without touching the proto
  std::string domain_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::vector<Value*> implicit_inputs_;
  std::vector<size_t> use_pos_;  // per input slot: where its Use is in that value's uses_ (O(1) removal)
  std::list<Node*>::iterator position_;
  size_t ordinal_ = 0;  // position at creation, for labels of unnamed nodes
  bool dead_ = false;
  bool generated_name_ = false;
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&&) = default;  // std::list keeps node positions valid across a move
  Graph& operator=(Graph&&) = default;

  // ---- reading ----
  const std::list<Node*>& nodes() const { return nodes_; }
  /// Nodes in order, as a snapshot that stays valid while the graph is mutated
  /// (destroyed nodes are skipped with isAlive()).
  std::vector<Node*> nodeSnapshot() const;
  bool isAlive(const Node* n) const;
  /// The node after `n` in order (null: `n` is the last), in O(1).
  Node* nextNode(const Node* n) const;
  /// How many nodes the graph has made; the one made `ordinal`-th (0-based; perhaps destroyed
  /// since, see isAlive): nodes made since a count are madeNode(count) .. madeNode(nodesMade()-1).
  size_t nodesMade() const { return next_ordinal_; }
  Node* madeNode(size_t ordinal) const;
  /// How many nodes the graph has destroyed; the `i`-th of them (0-based): nodes destroyed since
  /// a count are destroyedNode(count) .. destroyedNode(nodesDestroyed()-1). A destroyed node keeps
  /// its proto, so its label, until emit.
  size_t nodesDestroyed() const { return destroyed_.size(); }
  Node* destroyedNode(size_t i) const { return destroyed_.at(i); }
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  /// Initializers in emit order (originals first, in file order; then the ones passes added).
  std::vector<Value*> initializers() const;

  // ---- building (parse) ----
  Value* addValue(std::string name);
  Value* addOpaqueValue(std::string name);
  /// `bytes`: where a file-backed tensor's bytes are (io resolves them); empty for an inline one.
  void setInitializer(Value* v, std::unique_ptr<onnx::TensorProto> t, FileBytes bytes = {});
  void setInfo(Value* v, std::unique_ptr<onnx::ValueInfoProto> info, bool from_value_info);
  /// A pass's declaration of `v` (declare-shapes): replaces what the model declared, listed in
  /// value_info unless it is a graph input or output.
  void declareInfo(Value* v, std::unique_ptr<onnx::ValueInfoProto> info);
  void markGraphInput(Value* v);
  void markGraphOutput(Value* v);
  /// Append a node parsed from the model; inputs/outputs given as values (null = absent).
  /// The proto is taken as it is (no copy): its input/output names are cleared.
  Node* appendNode(std::unique_ptr<onnx::NodeProto> proto, const std::vector<Value*>& inputs,
                   const std::vector<Value*>& outputs, const std::vector<Value*>& implicit_inputs);

  // ---- mutators (the only code that changes links) ----
  /// A new value with no producer; `hint` becomes its name, made unique at emit.
  Value* newValue(const std::string& hint, int32_t elem_type);
  /// A new constant initializer value.
  Value* addInitializer(const std::string& hint, std::unique_ptr<onnx::TensorProto> t);
  /// Create a node before `before` (null: at the end) with fresh output values.
  Node* createNode(const std::string& op_type, const std::string& domain,
                   const std::vector<Value*>& inputs, size_t num_outputs, Node* before);
  void setInput(Node* n, size_t slot, Value* v);
  /// Make `n` produce `v` at output slot `slot`; v's old producer gets a fresh dead value.
  void takeOutput(Node* n, size_t slot, Value* v);
  /// Redirect every explicit use of `from` to `to`. `from` must have no subgraph uses and
  /// must not be a graph output (its name would change).
  void replaceAllUsesWith(Value* from, Value* to);
  /// Remove a node whose outputs are all unused and not graph outputs.
  void destroyNode(Node* n);
  /// If `v` is dead (no uses, not a graph input/output): drop it; if it was the only live
  /// output of its producer, destroy the producer and recurse into that node's inputs.
  void pruneIfDead(Value* v);

  // ---- emit support ----
  const std::vector<Value*>& valueInfoOrder() const { return value_info_order_; }
  std::unique_ptr<onnx::TensorProto> releaseInitializer(Value* v) { return std::move(v->initializer_); }
  std::unique_ptr<onnx::ValueInfoProto> releaseInfo(Value* v) { return std::move(v->info_); }
  /// emit: the ValueInfoProto written for `v`'s first listing (null before), for the next ones.
  const onnx::ValueInfoProto* listedAs(const Value* v) const { return v->listed_as_; }
  void setListedAs(Value* v, const onnx::ValueInfoProto* info) { v->listed_as_ = info; }
  /// The node's proto, handed over as it is (emit puts it in the output graph: no copy); the
  /// node is then done with.
  std::unique_ptr<onnx::NodeProto> releaseProto(Node* n) { return std::move(n->proto_); }
  void setName(Value* v, std::string name) { v->name_ = std::move(name); v->generated_name_ = false; }
  /// Give a value a pass created the name hint `hint` (made unique at emit).
  void setNameHint(Value* v, std::string hint) {
    v->name_ = std::move(hint);
    v->generated_name_ = true;
  }
  /// Name a node a pass created: `hint`, made unique among the node names at emit.
  void setNameHint(Node* n, const std::string& hint) {
    n->proto_->set_name(hint);
    n->generated_name_ = true;
  }
  void setName(Node* n, std::string name) {
    n->proto_->set_name(std::move(name));
    n->generated_name_ = false;
  }
  /// All values ever created (including dead ones), in creation order.
  const std::vector<std::unique_ptr<Value>>& allValues() const { return values_; }
  bool isDropped(const Value* v) const { return v->dropped_; }

 private:
  void addUse(Value* v, Node* n, int slot);
  void removeUse(Value* v, Node* n, int slot);
  void erase(Node* n);

  std::list<Node*> nodes_;  // the live nodes in order
  std::vector<std::unique_ptr<Value>> values_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::vector<Value*> initializer_order_;
  std::vector<Value*> value_info_order_;
  // Every node ever created, destroyed ones too (so snapshots stay valid), in chunks of
  // kNodeChunk allocated whole: nodes made together sit together, and a pass over the graph
  // walks memory in order instead of jumping between scattered allocations.
  static constexpr size_t kNodeChunk = 1024;
  std::vector<std::unique_ptr<Node[]>> node_chunks_;
  size_t chunk_used_ = kNodeChunk;
  Node* allocateNode();
  std::unordered_set<std::string> op_types_;       // every op type once (Node::op_type_ points here)
  mutable std::vector<Node*> snapshot_;            // nodeSnapshot() until a node comes or goes
  mutable bool snapshot_valid_ = false;
  size_t next_ordinal_ = 0;
  std::vector<Node*> destroyed_;  // in the order they went (nodesDestroyed)
};

/// A model: the graph plus a shell ModelProto holding everything the IR does not interpret
/// (metadata, opset imports, functions, training info, unknown fields, and the graph's own
/// name, doc_string, sparse initializers and quantization annotations).
struct Model {
  onnx::ModelProto shell;
  Graph graph;
  std::string path;  // the file it was read from, for diagnostics
  /// What the file-backed initializers read from (io::ExternalFiles, which holds the files
  /// open): kept alive with the model, and with the protos emitted from it while they are used.
  std::shared_ptr<const ByteSource> byte_source;
  /// Where passes put the large tensors they make (the same io::ExternalFiles), or null: then
  /// those tensors stay in memory.
  std::shared_ptr<ByteKeeper> byte_keeper;
};

/// The model's default-domain ("" or "ai.onnx") opset version, 0 when it imports none.
int64_t defaultOpset(const Model& model);

}  // namespace qconv::ir
