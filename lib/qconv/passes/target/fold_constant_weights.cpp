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
//      evaluated here, with one output;
//   3. its value holds at most 2^24 elements (a 64 MiB float weight), and every node of the chain
//      evaluates (a scale that is not positive, a NaN quantized: declined, the reason said).
// A folded chain's nodes no one else reads are removed. A node folds all such inputs or none (the
// reason said); one not folded stays, and check-ops names it where the profile's op rules say the
// runtime fails on it.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/const_eval.h"
#include "qconv/passes/common/layout_eval.h"
#include "qconv/passes/driver.h"

namespace qconv {

namespace {

using onnx::TensorProto;

constexpr size_t kMaxNodes = 64;
constexpr size_t kMaxElements = size_t{1} << 24;

/// An integer input's values (Slice's starts, a Reshape's shape...), or nullopt.
std::optional<std::vector<int64_t>> intsOf(const std::optional<eval::Tensor>& t) {
  if (!t || t->isFloat()) return std::nullopt;
  return t->i;
}

/// `n`'s output for these inputs (one per slot; absent optional ones nullopt), or nullopt with *why.
std::optional<eval::Tensor> evalNode(const ir::Node& n, const std::vector<std::optional<eval::Tensor>>& in,
                                     int64_t opset, std::string* why) {
  auto at = [&](size_t k) -> const std::optional<eval::Tensor>& {
    static const std::optional<eval::Tensor> none;
    return k < in.size() ? in[k] : none;
  };
  if (n.is("Constant")) return eval::constantNodeValue(n, why);
  if (!at(0)) {
    *why = fmt::format("{} without input 0", n.opType());
    return std::nullopt;
  }
  const eval::Tensor& x = *at(0);
  if (n.is("Identity")) return x;
  if (n.is("Cast")) return eval::cast(x, static_cast<int32_t>(n.attrInt("to", 0)), why);
  if (n.is("Reshape") && at(1)) return eval::reshape(x, *at(1), n.attrInt("allowzero", 0) != 0, why);
  if (n.is("Transpose")) return eval::transpose(x, n.attrInts("perm"), why);
  if ((n.is("Mul") || n.is("Div") || n.is("Add") || n.is("Sub")) && at(1)) return eval::binary(n.opType(), x, *at(1), why);
  if (n.is("Slice") && opset >= 10) {
    const auto starts = intsOf(at(1)), ends = intsOf(at(2));
    if (starts && ends)
      return eval::slice(x, *starts, *ends, intsOf(at(3)).value_or(std::vector<int64_t>{}),
                         intsOf(at(4)).value_or(std::vector<int64_t>{}), why);
  }
  if (n.is("Unsqueeze") || n.is("Squeeze")) {
    const auto axes = opset >= 13 ? intsOf(at(1)).value_or(std::vector<int64_t>{}) : n.attrInts("axes");
    return eval::redim(x, axes, n.is("Unsqueeze"), why);
  }
  if (n.is("Concat")) {
    std::vector<eval::Tensor> xs;
    for (const auto& t : in) {
      if (!t) {
        *why = "a Concat with an absent input";
        return std::nullopt;
      }
      xs.push_back(*t);
    }
    return eval::concat(xs, n.attrInt("axis", 0), why);
  }
  if ((n.is("QuantizeLinear") || n.is("DequantizeLinear")) && at(1) && n.attrInt("block_size", 0) == 0) {
    const std::optional<eval::Tensor>& zp = at(2);
    if (n.is("DequantizeLinear")) return eval::dequantize(x, *at(1), zp, n.attrInt("axis", 1), why);
    const int32_t type = zp ? zp->type : static_cast<int32_t>(n.attrInt("output_dtype", TensorProto::UINT8));
    return eval::quantize(x, *at(1), zp, type, n.attrInt("axis", 1), why);
  }
  *why = fmt::format("{} is not an op fold-constant-weights evaluates", n.opType());
  return std::nullopt;
}

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
  std::optional<eval::Tensor> valueOf(const ir::Value* v, std::map<const ir::Value*, eval::Tensor>& memo,
                                      std::set<const ir::Node*>& seen, std::string* why) const {
    if (auto it = memo.find(v); it != memo.end()) return it->second;
    std::optional<eval::Tensor> out;
    if (v->isConstant()) {
      out = eval::fromValue(*v, why);
    } else {
      const ir::Node* p = v->producer();
      if (!p || v->isGraphInput() || !p->domain().empty() || p->outputs().size() != 1) {
        *why = "it is not computed from constants alone";
        return std::nullopt;
      }
      if (seen.insert(p).second && seen.size() > kMaxNodes) {
        *why = fmt::format("it is computed by more than {} nodes", kMaxNodes);
        return std::nullopt;
      }
      std::vector<std::optional<eval::Tensor>> in;
      for (const ir::Value* x : p->inputs()) {
        if (!x) {
          in.emplace_back();
          continue;
        }
        in.push_back(valueOf(x, memo, seen, why));
        if (!in.back()) return std::nullopt;
      }
      std::string inner;
      out = evalNode(*p, in, opset, &inner);
      if (!out) *why = fmt::format("{} ({}): {}", p->label(), p->opType(), inner);
    }
    if (out && out->size() > kMaxElements) {  // (3)
      *why = fmt::format("it holds {} values, more than {}", out->size(), kMaxElements);
      return std::nullopt;
    }
    if (out) memo.emplace(v, *out);
    return out;
  }

  Match<Group> select(ir::Node& n) {
    Group g{&n, {}};
    for (const ConstantInputs& c : target.constant_inputs) {
      if (n.opType() != c.op) continue;
      for (int k : c.inputs) {
        const ir::Value* v = n.input(static_cast<size_t>(k));
        if (!v || v->isConstant()) continue;
        std::map<const ir::Value*, eval::Tensor> memo;
        std::set<const ir::Node*> seen;
        std::string why;
        auto value = valueOf(v, memo, seen, &why);
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
