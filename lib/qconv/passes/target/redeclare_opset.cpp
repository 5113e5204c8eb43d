// redeclare-opset: with --opset N, declare the output's default-domain opset as N; with --target
// and no --opset, the nearest opset that target reads when the model's is outside its range.
// With a --target whose runtime refuses com.microsoft ops (rknn, qnn), an import of that domain
// no node uses (in the graph, a subgraph or a local function) is dropped.
//
// Before:  opset_import { "": 11 }   After:  opset_import { "": 13 }
//           Softmax(x) axis=1 (x: rank 2)           Softmax(x) axis=1 (explicit)
// The conditions each node must meet are in opset_history.h; besides them:
//   1. Softmax, LogSoftmax and Hardmax crossing version 13 (which changed what axis means: the
//      input coerced to 2-D there before, one axis after) keep their meaning only on the last
//      axis of an input of known rank; the node then gets its axis written out (the two
//      versions' defaults differ: 1 before, -1 after), which changes nothing else.
//   2. BatchNormalization crossing version 14 (which removed the training outputs saved_mean and
//      saved_var) keeps its meaning when the node uses its output Y only (inference);
//   3. raising across a version that moved attribute axes to input 1 (Squeeze, Unsqueeze and
//      ReduceSum at 13, the other Reduce ops at 18): the node keeps its meaning with its axes
//      given as a constant int64 input (none given: none, the default of both);
//   4. Resize crossing version 13 (which made roi and scales optional, one of scales and sizes
//      given, and removed coordinate_transformation_mode tf_half_pixel_for_nn) keeps its meaning
//      unless it uses that mode, or gives sizes with a scales input that is not a constant empty
//      tensor; raising, such an empty scales input is dropped; lowering, an absent roi or scales
//      becomes an empty float tensor, as version 11 requires.
// A node that fails them is
// unconvertible (its text names the version in the way), so refuse-foreign-ops, right after,
// refuses the model with it (exit 4) and the opset stays as declared.
#include "qconv/passes/common/opset_history.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <cctype>
#include <sstream>
#include <vector>

#include "qconv/diag.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/common/element_types.h"
#include "qconv/ir/tensor.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

struct OpVersion {
  std::string_view op;  // compared by length first: validate asks for every node
  int64_t since;
  const char* changed;   // non-empty: the signature changed beyond additions
  int inputs_before;     // >= 0: this version added inputs after these
  int outputs_before;    // >= 0: this version added outputs after these
  const char* attributes;  // comma-separated optional attributes this version added
  const char* types;       // comma-separated element types only one of the two versions takes
};

const OpVersion kHistory[] = {
#define QCONV_OP_VERSION(OP, SINCE, CHANGED, IN, OUT, ATTRS, TYPES) {OP, SINCE, CHANGED, IN, OUT, ATTRS, TYPES},
#include "qconv/passes/common/opset_history.inc"
#undef QCONV_OP_VERSION
};

std::vector<std::string> split(const char* list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

/// "float", "int8", "float8e4m3fn"...: the schema spelling; empty when unknown.
std::string typeSpelling(int32_t elem_type) {
  if (!elem_type) return "";
  if (!onnx::TensorProto_DataType_IsValid(elem_type)) {  // newer than ONNX 1.12's enum: int4, float4e2m1, int2...
    const std::string name = ir::typeName(elem_type);
    return name == "other type" ? "" : name;
  }
  std::string s = onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(elem_type));
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool common(const std::string& type) {
  static const char* const kCommon[] = {"float", "double", "float16", "int8", "uint8", "int16", "uint16",
                                        "int32", "uint32", "int64", "uint64", "bool", "string"};
  return std::any_of(std::begin(kCommon), std::end(kCommon), [&](const char* c) { return type == c; });
}

bool isAxisCoercing(std::string_view op) { return op == "Softmax" || op == "LogSoftmax" || op == "Hardmax"; }

bool keepsShape(const ir::Node* n) {
  return n && (n->opType() == "QuantizeLinear" || n->opType() == "DequantizeLinear" || n->opType() == "Identity");
}

/// The rank of `v` where its shape is declared (symbolic dims count), or that of a value a chain
/// of QuantizeLinear/DequantizeLinear/Identity joins it to, either way (a quantizer adds values it
/// declares no shape for); else -1.
int64_t declaredRank(const ir::Value* v, const ir::Value* from = nullptr, int depth = 0) {
  if (const int64_t r = knownRank(v); r >= 0 || !v || depth >= 8) return r;
  if (const ir::Node* p = v->producer(); keepsShape(p) && p->input(0) != from)
    if (int64_t r = declaredRank(p->input(0), v, depth + 1); r >= 0) return r;
  for (const auto& use : v->uses())
    if (keepsShape(use.node) && use.index == 0 && use.node->output(0) != from)
      if (int64_t r = declaredRank(use.node->output(0), v, depth + 1); r >= 0) return r;
  return -1;
}

/// Condition 1: for a Softmax-like node declared at `declared`, its axis as a non-negative
/// number when it is the last of an input of known rank (the output's rank serves too); or -1.
int64_t lastAxis(const ir::Node& n, int64_t declared) {
  int64_t rank = declaredRank(n.input(0));
  if (rank < 0) rank = declaredRank(n.output(0));
  if (rank < 1) return -1;
  int64_t axis = n.attrInt("axis", declared < 13 ? 1 : -1);
  if (axis < 0) axis += rank;
  return axis == rank - 1 ? axis : -1;
}

/// Condition 2: a BatchNormalization that uses output Y only.
bool inferenceOnly(const ir::Node& n) {
  for (size_t k = 1; k < n.outputs().size(); ++k)
    if (n.output(k) && (!n.output(k)->uses().empty() || n.output(k)->isGraphOutput())) return false;
  return true;
}

/// Condition 3: version `v` moved attribute axes to an input, and the opset rises across it.
bool movesAxes(const OpVersion& v, int64_t declared) {
  const std::string_view changed = v.changed;
  return declared < v.since &&
         (changed == "attribute axes removed" || changed == "input axes added, not optional; attribute axes removed");
}

bool isEmptyConstant(const ir::Value* v) {
  return v && v->isConstant() && ir::numElements(*v->initializer()).value_or(1) == 0;
}

/// Condition 4: why a Resize cannot cross version 13, or empty.
std::string resizeAcross13(const ir::Node& n) {
  if (const onnx::AttributeProto* mode = n.attribute("coordinate_transformation_mode");
      mode && mode->s() == "tf_half_pixel_for_nn")
    return "the node's coordinate_transformation_mode is tf_half_pixel_for_nn, which version 13 removed";
  if (n.input(3) && n.input(2) && !isEmptyConstant(n.input(2)))
    return "the node gives sizes with a scales input that is not a constant empty tensor (version 13 takes only "
           "one of the two)";
  return "";
}

/// Why `n` (declared at `declared`) cannot move across version `v` of its operator, or empty.
std::string blocker(const ir::Node& n, const OpVersion& v, const ElementTypes& known, int64_t declared) {
  const bool resize13 = v.op == "Resize" && v.since == 13;
  const bool exempt = (isAxisCoercing(v.op) && v.since == 13 && lastAxis(n, declared) >= 0) ||
                      (v.op == "BatchNormalization" && v.since == 14 && inferenceOnly(n)) || movesAxes(v, declared) ||
                      (resize13 && resizeAcross13(n).empty());
  if (*v.changed && !exempt) {
    if (resize13) return resizeAcross13(n);
    if (isAxisCoercing(v.op))
      return fmt::format("{} (the versions agree on the last axis of an input of known rank only)", v.changed);
    return v.changed;
  }
  auto used = [](const std::vector<ir::Value*>& vals) {
    size_t k = vals.size();
    while (k && !vals[k - 1]) --k;
    return k;
  };
  if (v.inputs_before >= 0 && used(n.inputs()) > static_cast<size_t>(v.inputs_before))
    return fmt::format("the node uses input {}, which it added", v.inputs_before);
  if (v.outputs_before >= 0 && used(n.outputs()) > static_cast<size_t>(v.outputs_before))
    return fmt::format("the node uses output {}, which it added", v.outputs_before);
  for (const auto& a : split(v.attributes))
    if (n.attribute(a)) return fmt::format("the node sets attribute {}, which it added", a);
  const std::vector<std::string> types = split(v.types);
  if (types.empty()) return "";
  std::vector<const ir::Value*> values(n.inputs().begin(), n.inputs().end());
  values.insert(values.end(), n.outputs().begin(), n.outputs().end());
  for (const ir::Value* val : values) {
    if (!val) continue;
    const std::string t = typeSpelling(known.of(val));
    if (t.empty()) {
      if (std::any_of(types.begin(), types.end(), common))
        return fmt::format("the element type of '{}' is neither declared nor inferable from what produces it, and "
                           "this version changed the accepted types ({})",
                           val->name(), v.types);
    } else if (std::find(types.begin(), types.end(), t) != types.end()) {
      return fmt::format("'{}' is {}, accepted on one side only", val->name(), t);
    }
  }
  return "";
}

std::string checkNode(const ir::Node& n, int64_t lo, int64_t hi, const ElementTypes& types, int64_t declared) {
  for (const auto& a : n.proto().attribute())
    if (a.has_g() || a.graphs_size()) return "its subgraph's nodes are not checked (qconv moves no subgraph to another opset)";
  // raising the opset (hi above the declared one), an op younger than the declared opset is one a
  // pass wrote at its first version for the new opset (approximate-gelu's Gelu): only versions
  // after that one are in its way
  int64_t first = std::numeric_limits<int64_t>::max();
  for (const auto& v : kHistory)
    if (n.opType() == v.op) first = std::min<int64_t>(first, v.since);
  if (hi > declared && first > lo && first <= hi) lo = first;
  bool exists_at_lo = false, known = false;
  for (const auto& v : kHistory) {
    if (n.opType() != v.op) continue;
    known = true;
    if (v.since <= lo) exists_at_lo = true;
    if (v.since > lo && v.since <= hi)
      if (std::string why = blocker(n, v, types, declared); !why.empty()) return fmt::format("{} version {} is in the way: {}", v.op, v.since, why);
  }
  if (!known) return fmt::format("{} is not an ai.onnx operator qconv knows the history of", n.opType());
  if (!exists_at_lo) return fmt::format("{} does not exist at opset {}", n.opType(), lo);
  return "";
}

}  // namespace

namespace {

struct RedeclareOpset {
  struct Group {};
  int64_t target, declared, lo, hi;
  const ElementTypes& known;
  std::string_view for_target;  // the --target whose range asked for it, or empty (--opset)
  bool blocked = false;  // the first node in the way is the one named

  bool root(const ir::Node& n) const { return n.domain().empty(); }
  std::string declined(const ir::Node&) const {
    if (!for_target.empty())
      return fmt::format("cannot declare opset {}, the {} --target {} reads (the model declares {})", target,
                         target < declared ? "highest" : "lowest", for_target, declared);
    return fmt::format("cannot declare opset {} (the model declares {})", target, declared);
  }
  Match<Group> select(ir::Node& n) {
    if (blocked) return Match<Group>::none();
    std::string why = checkNode(n, lo, hi, known, declared);
    if (why.empty()) return Match<Group>::none();
    blocked = true;
    return Match<Group>::unconvertible(why);
  }
  void rewrite(ir::Graph&, Group&, PassContext&) {}
};

}  // namespace


std::string opsetRaiseBlocker(const ir::Model& model, int64_t from, int64_t to) {
  if (from >= to) return "";
  const ElementTypes known(model.graph, from);
  for (const ir::Node* n : model.graph.nodes())
    if (n->domain().empty())
      if (std::string why = checkNode(*n, from, to, known, from); !why.empty())
        return fmt::format("node '{}' ({}) does not keep its meaning from opset {} to {}: {}", n->label(), n->opType(), from,
                           to, why);
  return "";
}

void declareOpset(ir::Model& model, int64_t to) {
  const int64_t from = ir::defaultOpset(model);
  if ((from < 13) != (to < 13))  // condition 1: the axis written out (checked to be the last)
    for (ir::Node* n : model.graph.nodes())
      if (n->domain().empty() && isAxisCoercing(n->opType())) {
        const int64_t axis = lastAxis(*n, from);
        if (axis < 0) continue;  // not reached: checkNode refused it
        removeAttribute(*n, "axis");
        setIntAttribute(*n, "axis", axis);
      }
  if (from < to)  // condition 3: axes from the attribute to a constant input
    for (ir::Node* n : model.graph.nodes()) {
      if (!n->domain().empty() || !n->attribute("axes")) continue;
      const bool moved = std::any_of(std::begin(kHistory), std::end(kHistory), [&](const OpVersion& v) {
        return v.op == n->opType() && v.since > from && v.since <= to && movesAxes(v, from);
      });
      if (!moved) continue;
      const auto& ints = n->attribute("axes")->ints();
      std::vector<int64_t> axes(ints.begin(), ints.end());
      ir::Value* input = model.graph.addInitializer(
          n->label() + "_axes", ir::makeIntTensor(onnx::TensorProto::INT64, {static_cast<int64_t>(axes.size())}, axes));
      removeAttribute(*n, "axes");
      if (n->inputs().size() < 2 || !n->inputs()[1]) model.graph.setInput(n, 1, input);
    }
  if ((from < 13) != (to < 13))  // condition 4: Resize's scales and roi as the new side wants them
    for (ir::Node* n : model.graph.nodes()) {
      if (!n->domain().empty() || n->opType() != "Resize") continue;
      if (to >= 13) {
        if (ir::Value* scales = n->input(2); n->input(3) && isEmptyConstant(scales)) {
          model.graph.setInput(n, 2, nullptr);
          model.graph.pruneIfDead(scales);
        }
        continue;
      }
      for (size_t slot : {size_t{1}, size_t{2}})
        if (!n->input(slot))
          model.graph.setInput(n, slot, model.graph.addInitializer(n->label() + (slot == 1 ? "_roi" : "_scales"),
                                                                   ir::makeFloatTensor({0}, {})));
    }
  for (auto& op : *model.shell.mutable_opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") op.set_version(to);
}

void checkOpsetFlag(int64_t target) {
  const int64_t newest = newestKnownOpset();
  if (target < 1 || target > newest)
    throw Error(ExitCode::Usage, fmt::format("--opset {}: qconv knows the ai.onnx operators of opsets 1 to {}", target, newest));
}

namespace {

bool usesDomain(const onnx::GraphProto& g, const std::string& domain);

bool usesDomain(const onnx::NodeProto& n, const std::string& domain) {
  if (n.domain() == domain) return true;
  for (const auto& a : n.attribute()) {
    if (a.has_g() && usesDomain(a.g(), domain)) return true;
    for (const auto& g : a.graphs())
      if (usesDomain(g, domain)) return true;
  }
  return false;
}

bool usesDomain(const onnx::GraphProto& g, const std::string& domain) {
  return std::any_of(g.node().begin(), g.node().end(), [&](const onnx::NodeProto& n) { return usesDomain(n, domain); });
}

/// Drop the import of `domain` when no node of `model` uses it.
void dropUnusedImport(ir::Model& model, const std::string& domain, PassContext& ctx) {
  for (const ir::Node* n : model.graph.nodes())
    if (usesDomain(n->proto(), domain)) return;
  for (const auto& f : model.shell.functions())
    if (f.domain() == domain ||
        std::any_of(f.node().begin(), f.node().end(), [&](const onnx::NodeProto& n) { return usesDomain(n, domain); }))
      return;
  auto* imports = model.shell.mutable_opset_import();
  for (int i = 0; i < imports->size(); ++i)
    if (imports->Get(i).domain() == domain) {
      imports->DeleteSubrange(i, 1);
      ctx.report(Report::Done, model.path, fmt::format("the unused import of domain {} dropped: --target {} refuses it",
                                                       domain, ctx.target().name));
      return;
    }
}

}  // namespace

void redeclareOpset(ir::Model& model, PassContext& ctx) {
  if (ctx.options().target && !ctx.target().contrib.allowed) dropUnusedImport(model, "com.microsoft", ctx);
  const int64_t declared = ir::defaultOpset(model);
  int64_t target = ctx.options().opset;
  std::string_view for_target;
  if (!target) {  // --target: the nearest opset its runtime reads
    const TargetProfile& t = ctx.target();
    if (const int64_t floor = targetOpsetMin(t, model); declared < floor) target = floor;
    else if (t.opset_max && declared > t.opset_max) target = t.opset_max;
    for_target = t.name;
  }
  if (!target || declared == target || declared == 0) return;
  checkOpsetFlag(target);
  const size_t before = ctx.reports(Report::Unconvertible).size();
  const ElementTypes known(model.graph, declared);  // what no value_info declares, inferred
  RedeclareOpset rule{target, declared, std::min(declared, target), std::max(declared, target), known, for_target, false};
  applyRule(model.graph, ctx, rule);
  if (ctx.reports(Report::Unconvertible).size() != before) return;  // refuse-foreign-ops refuses the model
  declareOpset(model, target);
}

int64_t opsetFloor(const ir::Model& model) {
  for (const ir::Node* n : model.graph.nodes()) {
    if (!isQuantize(*n) && !isDequantize(*n)) continue;
    const ir::Value* scale = n->input(1);
    if (n->attribute("axis") || (scale && scale->isConstant() && ir::numElements(*scale->initializer()).value_or(1) > 1))
      return 13;
  }
  return 1;
}

int64_t targetOpsetMin(const TargetProfile& t, const ir::Model& model) {
  int64_t floor = std::max(t.opset_min, opsetFloor(model));
  if (!t.op_opset_min.empty())
    for (const ir::Node* n : model.graph.nodes())
      if (n->domain().empty())
        for (const auto& [op, opset] : t.op_opset_min)
          if (n->opType() == op) floor = std::max(floor, opset);
  return floor;
}

int64_t newestKnownOpset() {
  int64_t newest = 0;
  for (const auto& v : kHistory) newest = std::max(newest, v.since);
  return newest;
}

bool isKnownOperator(const std::string& op, int64_t opset) {
  return std::any_of(std::begin(kHistory), std::end(kHistory),
                     [&](const OpVersion& v) { return op == v.op && v.since <= opset; });
}

}  // namespace qconv
