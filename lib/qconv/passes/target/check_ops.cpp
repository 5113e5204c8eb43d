// check-ops (--target NAME): each node its runtime's per-op table says it does not run, in the
// form the node has, is refused. An analysis: it changes nothing.
//
// Before/After: the same graph. A node is reported Unconvertible with the rule's words (the
// runtime's own), and refuse-foreign-ops, right after, refuses the model (exit 4), when a rule
// of the profile's op_rules (targets/target.h; measured, each rule's probe in
// tests/integration/test_op_tables.py) matches it:
//   1. the node is in the default domain and is the rule's op; op "*" (with form kFloat): any op
//      that computes on a float input 0 (float32, float16; not moving data, not a shape op, not
//      QuantizeLinear/DequantizeLinear), as the element types the model declares or its ops imply say;
//   2. its form is the rule's: quantized when input 0 comes from a DequantizeLinear of a tensor
//      that is not a constant (the rule's type, when it names one, is that tensor's), or the node
//      is an activation fused to the op before it (DQ -> Conv -> Relu -> Q), or a MatMul or Gemm
//      whose other input is such a tensor (a weight-first MatMul), else float;
//   3. when the rule names an input, that input is present and not a constant (an initializer
//      or a Constant node's output), and, when the rule names an op it goes `through`, a node of
//      that type is among the (at most 64) nodes that compute it; with `from_constants`, those
//      nodes read constants alone (a constant quantized at run time);
//   4. when the rule names an op the other input comes `other_from`, the node has two inputs and
//      the other is that op's output, through at most two QuantizeLinear/DequantizeLinear; and
//      when it names one the input itself comes `from`, so is that input;
//   5. when the rule names a `not_ones_input`, that input is a constant holding a value other
//      than 1 (a Slice's steps);
//   6. when the rule counts `siblings`, input 0 is, through at most two QuantizeLinear/
//      DequantizeLinear, an output of a Split or a Slice, and at least that many nodes of the op
//      (the node among them) each read so a different output of that Split, or a different Slice
//      of the same tensor;
//   7. when the rule names a `constant_input`, that input is a constant (an LSTM's R, float, where
//      its W is dequantized).
// The passes before chose the forms the target runs where an exact one exists (shift-types
// stores QNN's activations as uint8, where its int8 rules do not hold); what reaches this pass
// has none. Without --target, or for a profile without op rules, nothing is checked.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>
#include <vector>
#include <string_view>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/element_types.h"
#include "qconv/passes/common/node_eval.h"
#include "qconv/passes/common/quant_slots.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

bool constantValue(const ir::Value* v) {
  return v && (v->isConstant() || (v->producer() && v->producer()->is("Constant")));
}

/// The DequantizeLinear producing `x` from a tensor that is not a constant (an activation), or null.
const ir::Node* dequantizedFrom(const ir::Value* x) {
  const ir::Node* dq = dequantizeFeeding(x);
  return dq && dq->input(0) && !constantValue(dq->input(0)) ? dq : nullptr;
}

bool fuses(const ir::Node& p) {
  return p.is("Conv") || p.is("ConvTranspose") || p.is("MatMul") || p.is("Gemm") || p.is("Add") ||
         p.is("BatchNormalization") || p.is("Relu") || p.is("Clip") || p.is("Identity");
}

/// Condition 2: the quantized type input 0 is dequantized from, or 0 when the node computes in
/// float. A node after a chain of up to 3 Conv, MatMul, Gemm, Add, BatchNormalization, Relu, Clip or Identity,
/// each read by the next only, from a DequantizeLinear counts as that chain's (DQ -> Conv ->
/// BatchNormalization -> Relu -> Q, as quantize_static leaves a Conv it fuses with what follows).
int32_t quantizedFrom(const ir::Node& n) {
  const ir::Node* dq = dequantizedFrom(n.input(0));
  for (size_t k = 1; !dq && k < n.inputs().size() && (n.is("MatMul") || n.is("Gemm")); ++k)
    dq = dequantizedFrom(n.input(k));  // a weight-first MatMul: the activation is its input 1
  const ir::Value* x = n.input(0);
  for (int step = 0; !dq && step < 3 && x && x->uses().size() == 1; ++step) {
    const ir::Node* p = x->producer();
    if (!p || !fuses(*p)) break;
    x = p->input(0);
    dq = dequantizedFrom(x);
  }
  if (!dq) return 0;
  const int32_t type = quantizedTypeOf(*dq);
  return type ? type : -1;  // -1: quantized, its type unknown
}

/// Condition 3's `through`: a node of type `op` computes `v` (searching at most 64 producers).
bool computedThrough(const ir::Value* v, std::string_view op) {
  std::vector<const ir::Value*> todo{v};
  std::set<const ir::Node*> seen;
  while (!todo.empty() && seen.size() < 64) {
    const ir::Node* p = todo.back()->producer();
    todo.pop_back();
    if (!p || !seen.insert(p).second) continue;
    if (p->opIs(op)) return true;
    for (const ir::Value* in : p->inputs())
      if (in && !in->isConstant()) todo.push_back(in);
  }
  return false;
}

/// Condition 3's `from_constants`: `v` is computed, and from constants alone (at most 64 nodes).
bool computedFromConstants(const ir::Value* v) {
  std::string why;
  return v && v->producer() && !constantValue(v) && eval::constantCone(v, 64, &why);
}

/// Rule op "*": `n` computes on a float input 0 (condition 1).
bool computesInFloat(const ir::Node& n, const ElementTypes& types) {
  static constexpr std::string_view kNot[] = {"Shape", "Size", "Constant", "ConstantOfShape", "Cast", "CastLike"};
  if (movesData(n) || isQuantize(n) || isDequantize(n)) return false;
  if (std::any_of(std::begin(kNot), std::end(kNot), [&](std::string_view op) { return n.opIs(op); })) return false;
  const int32_t t = n.input(0) ? types.of(n.input(0)) : 0;
  return t == onnx::TensorProto::FLOAT || t == onnx::TensorProto::FLOAT16;
}

/// Condition 5: input k of `n` is a constant integer tensor holding a value other than 1.
bool notOnes(const ir::Node& n, int k) {
  const ir::Value* v = n.input(static_cast<size_t>(k));
  if (!v || !v->isConstant()) return false;
  std::string why;
  auto values = ir::readInts(*v, &why);
  return values && std::any_of(values->begin(), values->end(), [](int64_t x) { return x != 1; });
}

/// `v` back through at most two QuantizeLinear/DequantizeLinear: the node computing it otherwise.
const ir::Node* producerThroughQdq(const ir::Value* v) {
  for (int step = 0; step < 3 && v && v->producer(); ++step) {
    const ir::Node* p = v->producer();
    if (!isQuantize(*p) && !isDequantize(*p)) return p;
    v = p->input(0);
  }
  return nullptr;
}

/// Condition 4: the other input of the two-input `n` (not input k) is an `op` node's output, through
/// at most two QuantizeLinear/DequantizeLinear.
bool otherFrom(const ir::Node& n, size_t k, std::string_view op) {
  const ir::Node* p = n.inputs().size() == 2 ? producerThroughQdq(n.input(1 - k)) : nullptr;
  return p && p->opIs(op) && p->domain().empty();
}

/// Whether a node of type `op` reads `v`, directly or through at most two QuantizeLinear/DequantizeLinear.
bool readBy(const ir::Value* v, std::string_view op, int depth = 0) {
  for (const ir::Use& u : v->uses()) {
    if (u.index < 0 || !u.node->domain().empty()) continue;
    if (u.node->opIs(op) && u.index == 0) return true;
    if (depth < 2 && (isQuantize(*u.node) || isDequantize(*u.node)) && u.index == 0 && u.node->output(0) &&
        readBy(u.node->output(0), op, depth + 1))
      return true;
  }
  return false;
}

/// Condition 6: how many parts of the tensor `n`'s input 0 was cut from (a Split's outputs, or
/// Slices of one tensor) a node of `n`'s op reads, through Q/DQ; 0 when it was not cut so.
size_t siblingCount(const ir::Node& n) {
  const ir::Node* p = producerThroughQdq(n.input(0));
  if (!p || !p->domain().empty()) return 0;
  size_t count = 0;
  if (p->is("Split")) {
    for (const ir::Value* part : p->outputs()) count += part && readBy(part, n.opType());
  } else if (p->is("Slice") && p->input(0)) {
    for (const ir::Use& u : p->input(0)->uses())
      count += u.index == 0 && u.node->is("Slice") && u.node->domain().empty() && u.node->output(0) &&
               readBy(u.node->output(0), n.opType());
  }
  return count;
}

bool matches(const OpRule& r, const ir::Node& n, int32_t from, const ElementTypes* types) {
  if (r.op == "*" ? !(types && computesInFloat(n, *types)) : n.opType() != r.op) return false;  // (1)
  if (r.form == OpForm::kFloat && from) return false;  // (2)
  if (r.form == OpForm::kQuantized && (!from || (r.type && from != r.type))) return false;
  if (r.non_constant_input >= 0) {  // (3)
    const ir::Value* v = n.input(static_cast<size_t>(r.non_constant_input));
    if (!v || constantValue(v)) return false;
    if (!r.through.empty() && !computedThrough(v, r.through)) return false;
    if (r.from_constants && !computedFromConstants(v)) return false;
    if (!r.other_from.empty() && !otherFrom(n, static_cast<size_t>(r.non_constant_input), r.other_from)) return false;  // (4)
    if (!r.from.empty() && (r.non_constant_input > 1 || !otherFrom(n, static_cast<size_t>(1 - r.non_constant_input), r.from)))
      return false;
  }
  if (r.not_ones_input >= 0 && !notOnes(n, r.not_ones_input)) return false;  // (5)
  if (r.siblings >= 2 && siblingCount(n) < static_cast<size_t>(r.siblings)) return false;  // (6)
  if (r.constant_input >= 0 && !constantValue(n.input(static_cast<size_t>(r.constant_input)))) return false;  // (7)
  return true;
}

/// What about the node the rule matched: "HardSigmoid on int8", "Clip in float, its input 1 computed".
std::string formText(const OpRule& r, const ir::Node& n, int32_t from) {
  const std::string& op = n.opType();
  std::string text = from > 0 ? fmt::format("{} on {}", op, ir::typeName(from)) : from ? fmt::format("quantized {}", op)
                                                                                       : fmt::format("{} in float", op);
  if (r.non_constant_input >= 0 && !r.from.empty())
    text += fmt::format(", its input {} a {}'s output", r.non_constant_input, r.from);
  else if (r.non_constant_input >= 0)
    text += r.through.empty() ? fmt::format(", its input {} not a constant", r.non_constant_input)
                              : fmt::format(", its input {} computed {}through a {}", r.non_constant_input,
                                            r.from_constants ? "from constants " : "", r.through);
  if (!r.other_from.empty()) text += fmt::format(", the other a {}'s output", r.other_from);
  if (r.not_ones_input >= 0) text += fmt::format(", its input {} not all ones", r.not_ones_input);
  if (r.siblings >= 2) text += fmt::format(", one of {} on the parts of one tensor", siblingCount(n));
  if (r.constant_input >= 0) text += fmt::format(", its input {} a constant", r.constant_input);
  return text;
}

struct CheckOps {
  struct Group {};
  const TargetProfile& t;
  const ElementTypes* types;  // for op "*" rules

  bool root(const ir::Node& n) const { return n.domain().empty(); }
  std::string declined(const ir::Node&) const { return fmt::format("not run by --target {}", t.name); }
  Match<Group> select(ir::Node& n) {
    const int32_t from = quantizedFrom(n);
    for (const OpRule& r : t.op_rules)
      if (matches(r, n, from, types)) return Match<Group>::unconvertible(fmt::format("{}: {}", formText(r, n, from), r.why));
    return Match<Group>::none();
  }
  void rewrite(ir::Graph&, Group&, PassContext&) {}
};

}  // namespace

void checkOps(ir::Model& model, PassContext& ctx) {
  if (!ctx.options().target || ctx.options().target->op_rules.empty()) return;
  const TargetProfile& t = *ctx.options().target;
  std::optional<ElementTypes> types;
  if (std::any_of(t.op_rules.begin(), t.op_rules.end(), [](const OpRule& r) { return r.op == "*"; }))
    types.emplace(model.graph, ir::defaultOpset(model));
  CheckOps rule{t, types ? &*types : nullptr};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
