// fold-constant-weights (--target whose runtime takes some inputs only as constants: openvino, an
// LSTM's W, R and B): such an input that the model computes from constants alone becomes a float
// initializer holding the values it computes.
//
// Before (Silero VAD after quantize_static: torch's export reorders the LSTM's gates):
//   W0 -> Slice x3 -> QuantizeLinear -> DequantizeLinear -> Concat -> QuantizeLinear
//      -> Unsqueeze -> DequantizeLinear -> LSTM.W
// After:
//   W (float initializer: the values that last DequantizeLinear computes) -> LSTM.W
// Exact: every op of the chain is evaluated as the specification defines it: Slice, Concat,
// Unsqueeze, Squeeze, Reshape, Transpose and Identity copy elements (layout_eval.h);
// QuantizeLinear and DequantizeLinear are the specification's formulas in float32, Cast, Mul,
// Div, Add and Sub single IEEE operations (const_eval.h). The LSTM reads the same floats. (OpenVINO
// 2026.4 fails to compile an LSTM whose weight the model quantizes at run time: "LSTMSequence ...
// expects Constant for port 4"; given the floats it runs.)
//
// An input is folded when:
//   1. the target's profile lists it (constant_inputs: the op and the input's index);
//   2. it is computed (not a constant) from constants alone, by at most 64 nodes, each of an op
//      evaluated on constants (node_eval.h), with one output;
//   3. its value holds at most 2^24 elements (a 64 MiB float weight), and every node of the chain
//      evaluates (a scale that is not positive, a NaN quantized: declined, the reason said).
// A folded chain's nodes no one else reads are removed. A node folds all such inputs or none (the
// reason said); one not folded stays, and check-ops names it where the profile's op rules say the
// runtime fails on it.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/const_eval.h"
#include "qconv/passes/common/node_eval.h"
#include "qconv/passes/driver.h"

namespace qconv {

namespace {

constexpr size_t kMaxNodes = 64;
constexpr size_t kMaxElements = size_t{1} << 24;

struct FoldConstantWeights {
  struct Group {
    ir::Node* reader;
    std::vector<std::pair<size_t, eval::Tensor>> folds;  // (input slot, its value)
  };
  static constexpr bool kNeedsOutput = false;  // an LSTM may leave its output Y unnamed: its inputs change only
  const TargetProfile& target;
  int64_t opset;

  bool root(const ir::Node& n) const {
    return n.domain().empty() && std::any_of(target.constant_inputs.begin(), target.constant_inputs.end(),
                                             [&](const ConstantInputs& c) { return n.opType() == c.op; });  // (1)
  }
  std::string declined(const ir::Node&) const { return "input computed at run time kept"; }

  /// The value `v` computes from constants (condition 2), or nullopt with *why.
  std::optional<eval::Tensor> valueOf(const ir::Value* v, std::string* why) const {
    const auto cone = eval::constantCone(v, kMaxNodes, why);
    if (!cone) return std::nullopt;
    std::map<const ir::Value*, eval::Tensor> values;
    for (const ir::Node* p : *cone) {
      std::vector<std::optional<eval::Tensor>> in;
      for (const ir::Value* x : p->inputs()) {
        if (x && x->isConstant()) in.push_back(eval::fromValue(*x, why));
        else if (x) in.push_back(values.at(x));  // the cone computes it first
        else in.emplace_back();
        if (x && !in.back()) return std::nullopt;
      }
      std::string inner;
      auto out = eval::evalNode(*p, in, opset, &inner);
      if (!out) *why = fmt::format("{} ({}): {}", p->label(), p->opType(), inner);
      else if (out->size() > kMaxElements)  // (3)
        *why = fmt::format("it holds {} values, more than {}", out->size(), kMaxElements);
      if (!out || out->size() > kMaxElements) return std::nullopt;
      values.emplace(p->output(0), std::move(*out));
    }
    return values.at(v);
  }

  Match<Group> select(ir::Node& n) {
    Group g{&n, {}};
    for (const ConstantInputs& c : target.constant_inputs) {
      if (n.opType() != c.op) continue;
      for (int k : c.inputs) {
        const ir::Value* v = n.input(static_cast<size_t>(k));
        if (!v || v->isConstant()) continue;
        std::string why;
        auto value = valueOf(v, &why);
        if (value && !value->isFloat()) why = "it is not float";
        if (!value || !value->isFloat()) return Match<Group>::refuse(fmt::format("input {}: {}", k, why));  // all or none
        g.folds.emplace_back(static_cast<size_t>(k), std::move(*value));
      }
    }
    if (g.folds.empty()) return Match<Group>::none();
    return g;
  }

  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    for (auto& [slot, value] : g.folds) {
      ir::Value* old = g.reader->input(slot);
      graph.setInput(g.reader, slot, graph.addInitializer("folded_weight", eval::toProto(value)));
      graph.pruneIfDead(old);
    }
    ctx.count(fmt::format("{} inputs computed from constants folded", g.reader->opType()), static_cast<int>(g.folds.size()));
  }
};

}  // namespace

void foldConstantWeights(ir::Model& model, PassContext& ctx) {
  if (ctx.target().constant_inputs.empty()) return;  // (1)
  FoldConstantWeights rule{ctx.target(), ir::defaultOpset(model)};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
