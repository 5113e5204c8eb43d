// fold-producers: constant subgraphs that make weights and biases become initializers.
//
// Before:
//   w_f (float initializer) -> QuantizeLinear(s_w, zp_w) -> w_q -> DequantizeLinear -> Conv
//   b_f -> Div(s_x * s_w) -> Round -> Cast(to=int32) -> b_i -> DequantizeLinear -> Conv
//   Constant(value=T) -> s
// After:
//   w_q, b_i, s are initializers; the folded nodes are gone, and so are the float
//   initializers no other node reads.
//
// A node is folded when all of these hold:
//   1. it is a default-domain Constant, Identity, Cast, Round, Mul, Div, Add, Sub, Clip,
//      QuantizeLinear or Reshape (Constant: a `value` tensor, value_float(s) or value_int(s);
//      Reshape: a constant shape, such as Paddle's [C] bias made [1, C, 1, 1]);
//   2. every input is a constant initializer (not also a graph input);
//   3. its single output is not a graph output and is not read by a subgraph;
//   4. the evaluator computes it exactly (node_eval.h): float32 IEEE ops, integer results
//      that fit their type, in-range casts, no NaN quantized;
//   5. the result takes no more bytes than the largest input (folding never grows the model,
//      so Cast(int8 -> float) of weights stays for lower-primitive-qdq to read as a dequantizer);
//      checked on the broadcast shape before anything is computed, so that a [16384, 1] x
//      [1, 16384] Mul of a small model costs nothing (the node stays, logged with -v).
// A chain folds in one forward sweep, since nodes come in topological order.
#include <algorithm>
#include <string_view>

#include <fmt/format.h>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/const_eval.h"
#include "qconv/passes/common/node_eval.h"
#include "qconv/passes/read/fold.h"
#include "qconv/passes/driver.h"

namespace qconv {

namespace {

/// The element count of a binary op's two inputs broadcast together (the evaluator's rule), or
/// nullopt when they do not broadcast or the count passes 2^62.
std::optional<uint64_t> broadcastCount(const std::vector<eval::Tensor>& in) {
  const auto dims = in.size() == 2 ? eval::broadcastDims(in[0].dims, in[1].dims) : std::nullopt;
  if (!dims) return std::nullopt;
  uint64_t count = 1;
  for (int64_t d : *dims) {
    if (d < 0 || (d > 0 && count > (uint64_t{1} << 62) / static_cast<uint64_t>(d))) return std::nullopt;
    count *= static_cast<uint64_t>(d);
  }
  return count;
}

bool isFoldable(const ir::Node& n) {
  static constexpr std::string_view kOps[] = {"Constant", "Identity", "Cast", "Round", "Mul",
                                     "Div",      "Add",      "Sub",  "Clip",  "QuantizeLinear", "Reshape"};
  if (!n.domain().empty() || n.outputs().size() != 1 || !n.output(0)) return false;
  return std::any_of(std::begin(kOps), std::end(kOps), [&](std::string_view op) { return n.opIs(op); });
}

}  // namespace

void foldProducers(ir::Model& model, PassContext& ctx) { foldNodes(model, ctx, isFoldable); }

namespace {

struct Fold {
  struct Group {
    ir::Node* node;
    eval::Tensor result;
  };
  bool (*accept)(const ir::Node&);
  int64_t opset;

  bool root(const ir::Node& n) const { return accept(n) && isFoldable(n); }  // (1)
  std::string declined(const ir::Node&) const { return "not folded"; }

  Match<Group> select(ir::Node& n) {
    const ir::Value* out = n.output(0);
    if (out->isGraphOutput() || out->hasImplicitUses() || out->uses().empty()) return Match<Group>::none();  // (3)
    std::vector<eval::Tensor> inputs;
    size_t largest = 0;  // bytes
    std::string why;
    for (size_t k = 0; k < n.inputs().size(); ++k) {
      const ir::Value* v = n.input(k);
      if (!v) {  // an absent optional input: only at the end (then the rest are absent too)
        for (size_t j = k; j < n.inputs().size(); ++j)
          if (n.input(j)) return Match<Group>::none();
        break;
      }
      auto t = v->isConstant() ? eval::fromValue(*v, &why) : std::nullopt;  // (2)
      if (!t) return Match<Group>::none();
      largest = std::max(largest, t->byteSize());
      inputs.push_back(std::move(*t));
    }
    const bool broadcasts = n.is("Mul") || n.is("Div") || n.is("Add") || n.is("Sub");  // the others keep input 0's shape
    if (broadcasts) {  // (5), before computing: a broadcast can be far larger than its inputs
      const auto count = broadcastCount(inputs);
      const size_t width = inputs.empty() ? 4 : std::max<size_t>(1, inputs[0].byteSize() / std::max<size_t>(1, inputs[0].size()));
      if (!count || *count > std::max<size_t>(largest, 8) / width)
        return Match<Group>::refuse(fmt::format("the result ({} values) would be larger than its inputs ({} bytes at most)",
                                                count ? std::to_string(*count) : std::string("too many"), largest),
                                    Report::Detail);
    }
    auto result = eval::evalNode(n, {inputs.begin(), inputs.end()}, opset, &why);  // (4)
    if (!result) return why.empty() ? Match<Group>::none() : Match<Group>::refuse(why, Report::Detail);
    if (!n.opIs("Constant") && result->byteSize() > std::max<size_t>(largest, 8))  // (5)
      return Match<Group>::refuse("the result would be larger than its inputs", Report::Detail);
    return Group{&n, std::move(*result)};
  }

  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Node* n = g.node;
    ir::Value* out = n->output(0);
    ir::Value* folded = graph.addInitializer(out->name(), eval::toProto(g.result));
    std::vector<ir::Value*> oldInputs = n->inputs();
    graph.replaceAllUsesWith(out, folded);
    ctx.count("folded " + n->opType());
    graph.destroyNode(n);
    for (ir::Value* v : oldInputs) graph.pruneIfDead(v);
  }
};

}  // namespace

void foldNodes(ir::Model& model, PassContext& ctx, bool (*accept)(const ir::Node&)) {
  Fold rule{accept, ir::defaultOpset(model)};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
