// approximate-gelu (--approximate, for a target without Erf: qnn): the exact Gelu written with
// Erf, quantized between its steps, becomes one Gelu between the same DequantizeLinear and
// QuantizeLinear, so the target runs it.
//
// Before:  a -> Div(√2) -> Erf -> [Q/DQ] -> Add(1) -> [Q/DQ] -> Mul(a) -> [Q/DQ] -> Mul(0.5) -> v -> QuantizeLinear
//          (a = DequantizeLinear(a_q); ((1 + erf) * a) * 0.5, as torch.onnx exports F.gelu), or
//          ... -> Add(1) -> [Q/DQ] -> Mul(0.5) -> [Q/DQ] -> Mul(a) -> v       ((1 + erf) * 0.5) * a
//          ... -> Add(1) -> [Q/DQ] -> Mul(h) -> v, h = [Q/DQ] <- Mul(a, 0.5)  (1 + erf) * (a * 0.5),
//          as a Python x * 0.5 * (1 + erf(x / √2)) exports (BERT's own gelu)
// After:   a -> Gelu -> v -> QuantizeLinear        (opset 20: the profile's op_opset_min declares it)
// An approximation: the chain rounds at each QuantizeLinear inside it, Gelu does not. Each Gelu
// is listed with its worst error, in steps of v's QuantizeLinear, found by running both over
// every value a_q can hold (256 for 8 bits, 65536 for 16) in float32.
//
// A chain is rewritten when:
//   1. --approximate is given and the target's profile rules out Erf (gelu_for_erf);
//   2. Erf reads a Div of a by a constant within 1e-6 of √2 (or a Mul by one of 1/√2), and a is
//      the output of a per-tensor DequantizeLinear of a computed 8- or 16-bit tensor with
//      constant scale and zero point;
//   3. the ops after it are Add of a constant 1, then Mul by a and Mul by a constant 0.5 (in
//      either order), or one Mul by a * 0.5; each value between them read once (a Q/DQ pair of
//      constant per-tensor parameters may sit between any two), and v is read by one per-tensor
//      QuantizeLinear of constant parameters;
//   4. every constant there is a float scalar, or one dequantized from a constant.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/dequantized_constant.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

/// A float scalar constant, or one dequantized from a constant scalar (condition 4).
std::optional<float> scalar(const ir::Value* v) {
  std::string why;
  if (!v) return std::nullopt;
  if (v->isConstant()) {
    auto f = ir::readFloats(*v, &why);
    if (f && f->size() == 1) return (*f)[0];
    return std::nullopt;
  }
  const ir::Node* p = v->producer();
  if (!p || !isDequantize(*p) || !p->input(0) || !p->input(0)->isConstant()) return std::nullopt;
  auto k = readDequantizedConstant(*p, &why);
  if (!k || k->q.size() != 1) return std::nullopt;
  return static_cast<float>(k->q[0] - k->params.zero_point[0]) * k->params.scale[0];
}

/// Per-tensor constant parameters of a Q or DQ, or nullopt.
std::optional<ConstQuant> perTensor(const ir::Node& n) {
  std::string why;
  auto p = readConstQuant(n, &why);
  if (!p || p->per_axis || p->scale.size() != 1 || p->scale_type != onnx::TensorProto::FLOAT) return std::nullopt;
  const int32_t t = p->elem_type;
  if (t != onnx::TensorProto::UINT8 && t != onnx::TensorProto::INT8 && t != onnx::TensorProto::UINT16 &&
      t != onnx::TensorProto::INT16)
    return std::nullopt;
  return p;
}

/// One step of the chain: the node that reads `v` (its only reader), past a Q/DQ pair of
/// per-tensor constant parameters, which `rounds` collects (condition 3); *via: the value it reads.
ir::Node* next(const ir::Value* v, std::vector<ConstQuant>& rounds, const ir::Value** via) {
  *via = v;
  if (!v || v->uses().size() != 1 || v->isGraphOutput()) return nullptr;
  ir::Node* n = v->uses()[0].node;
  if (!isQuantize(*n)) return n;
  const ir::Value* q = n->output(0);
  if (!q || q->uses().size() != 1 || q->isGraphOutput() || !isDequantize(*q->uses()[0].node)) return nullptr;
  auto p = perTensor(*n);
  ir::Node* dq = q->uses()[0].node;
  auto pd = perTensor(*dq);
  if (!p || !pd || p->scale != pd->scale || p->zero_point != pd->zero_point) return nullptr;
  rounds.push_back(*p);
  const ir::Value* out = dq->output(0);
  *via = out;
  if (!out || out->uses().size() != 1 || out->isGraphOutput()) return nullptr;
  return out->uses()[0].node;
}

/// The other input of the two-input `n` than `v`, or null.
const ir::Value* other(const ir::Node& n, const ir::Value* v) {
  if (n.inputs().size() != 2) return nullptr;
  return n.input(0) == v ? n.input(1) : n.input(1) == v ? n.input(0) : nullptr;
}

bool near(std::optional<float> x, double want) { return x && std::abs(*x - want) <= 1e-6 * std::abs(want); }

float roundTrip(float x, const ConstQuant& p) {
  return static_cast<float>(quantizeOne(x, p.scale[0], p.zero_point[0], p.elem_type) - p.zero_point[0]) * p.scale[0];
}

/// The order the chain multiplies in after Add(1) (the forms above).
enum class Order { kByAThenHalf, kByHalfThenA, kByHalfOfA };

struct Chain {
  Order order;
  ir::Node* erf;
  ir::Node* head;  // the Div (or Mul) that Erf reads
  bool head_divides;
  float head_constant;  // its constant, as the model has it (√2, or 1/√2 for a Mul)
  ir::Value* a;
  ir::Value* v;
  ConstQuant a_params;
  ConstQuant v_params;  // v's QuantizeLinear
  std::vector<ConstQuant> after_erf, after_add, after_first_mul;  // the Q/DQ pairs inside
  std::vector<ConstQuant> half_of_a;  // kByHalfOfA: the pair after Mul(a, 0.5), if any
};

/// kByHalfOfA: whether `h` is Mul(a, 0.5), past a Q/DQ pair of per-tensor constant parameters
/// (collected into `rounds`), read only on the way to the chain's last Mul.
bool halfOf(const ir::Value* h, const ir::Value* a, std::vector<ConstQuant>& rounds) {
  if (!h || h->uses().size() != 1 || h->isGraphOutput()) return false;
  const ir::Node* p = h->producer();
  if (p && isDequantize(*p) && p->input(0) && p->input(0)->producer() && isQuantize(*p->input(0)->producer())) {
    const ir::Node* q = p->input(0)->producer();
    auto pq = perTensor(*q), pd = perTensor(*p);
    if (!pq || !pd || pq->scale != pd->scale || pq->zero_point != pd->zero_point || p->input(0)->uses().size() != 1)
      return false;
    rounds.push_back(*pq);
    h = q->input(0);
    if (!h || h->uses().size() != 1 || h->isGraphOutput()) return false;
    p = h->producer();
  }
  return p && p->is("Mul") && other(*p, a) && near(scalar(other(*p, a)), 0.5);
}

struct ApproximateGelu {
  using Group = Chain;
  const TargetProfile& t;

  bool root(const ir::Node& n) const { return n.is("Erf"); }
  std::string declined(const ir::Node&) const { return "not written as one Gelu"; }

  Match<Group> select(ir::Node& erf) {
    using M = Match<Group>;
    Chain c{};
    c.erf = &erf;
    c.head = erf.input(0) ? erf.input(0)->producer() : nullptr;  // (2)
    if (!c.head || erf.input(0)->uses().size() != 1) return M::none();
    const bool div = c.head->is("Div") && near(scalar(c.head->input(1)), std::sqrt(2.0));
    const bool mul = c.head->is("Mul") && near(scalar(c.head->input(1)), 1 / std::sqrt(2.0));
    if (!div && !mul) return M::none();
    c.head_divides = div;
    c.head_constant = *scalar(c.head->input(1));
    c.a = c.head->input(0);
    const ir::Node* dq = c.a ? c.a->producer() : nullptr;
    if (!dq || !isDequantize(*dq) || !dq->input(0) || dq->input(0)->isConstant()) return M::refuse("Erf's input is not dequantized");
    auto ap = perTensor(*dq);
    if (!ap) return M::refuse("Erf's input is not dequantized per tensor from 8 or 16 bits");
    c.a_params = *ap;
    // (3): Add(1), Mul(a), Mul(0.5)
    const ir::Value* via = nullptr;
    ir::Node* add = next(erf.output(0), c.after_erf, &via);
    if (!add || !add->is("Add") || !near(scalar(other(*add, via)), 1.0)) return M::refuse("Erf is not followed by an Add of 1");
    ir::Node* m1 = next(add->output(0), c.after_add, &via);
    if (!m1 || !m1->is("Mul")) return M::refuse("the Add of 1 is not followed by a Mul");
    const ir::Value* by = other(*m1, via);
    ir::Node* last = m1;
    if (by == c.a || near(scalar(by), 0.5)) {
      c.order = by == c.a ? Order::kByAThenHalf : Order::kByHalfThenA;
      ir::Node* m2 = next(m1->output(0), c.after_first_mul, &via);
      const bool second = m2 && m2->is("Mul") &&
                          (c.order == Order::kByAThenHalf ? near(scalar(other(*m2, via)), 0.5) : other(*m2, via) == c.a);
      if (!second)
        return M::refuse(c.order == Order::kByAThenHalf ? "the Mul by Erf's input is not followed by a Mul by 0.5"
                                                        : "the Mul by 0.5 is not followed by a Mul by Erf's input");
      last = m2;
    } else if (halfOf(by, c.a, c.half_of_a)) {
      c.order = Order::kByHalfOfA;
    } else {
      return M::refuse("the Add of 1 is not followed by a Mul by Erf's input, by 0.5, or by half of Erf's input");
    }
    c.v = last->output(0);
    if (!c.v || c.v->uses().size() != 1 || c.v->isGraphOutput() || !isQuantize(*c.v->uses()[0].node))
      return M::refuse("the Gelu's output is not quantized");
    auto vp = perTensor(*c.v->uses()[0].node);
    if (!vp) return M::refuse("the Gelu's output is not quantized per tensor to 8 or 16 bits");
    c.v_params = *vp;
    return c;
  }

  /// The chain as the model computes it, and Gelu, for one value of a (float32).
  float chained(const Chain& c, float a) const {
    float e = std::erf(c.head_divides ? a / c.head_constant : a * c.head_constant);
    for (const ConstQuant& p : c.after_erf) e = roundTrip(e, p);
    float s = e + 1.0f;
    for (const ConstQuant& p : c.after_add) s = roundTrip(s, p);
    if (c.order == Order::kByHalfOfA) {
      float h = a * 0.5f;
      for (const ConstQuant& p : c.half_of_a) h = roundTrip(h, p);
      return s * h;
    }
    float m = c.order == Order::kByAThenHalf ? a * s : s * 0.5f;
    for (const ConstQuant& p : c.after_first_mul) m = roundTrip(m, p);
    return c.order == Order::kByAThenHalf ? m * 0.5f : m * a;
  }

  void rewrite(ir::Graph& graph, Group& c, PassContext& ctx) {
    // the worst error over every value a can hold, in steps of v's QuantizeLinear
    const auto [lo, hi] = ir::intRange(c.a_params.elem_type);
    const ConstQuant& out = c.v_params;
    int64_t worst = 0;
    for (int64_t q = lo; q <= hi; ++q) {
      const float a = static_cast<float>(q - c.a_params.zero_point[0]) * c.a_params.scale[0];
      const float g = a * 0.5f * (1.0f + std::erf(a / static_cast<float>(std::sqrt(2.0))));
      const int64_t want = quantizeOne(chained(c, a), out.scale[0], out.zero_point[0], out.elem_type);
      const int64_t got = quantizeOne(g, out.scale[0], out.zero_point[0], out.elem_type);
      worst = std::max(worst, std::abs(want - got));
    }
    ir::Node* last = c.v->producer();
    ir::Node* gelu = graph.createNode("Gelu", "", {c.a}, 1, last);
    graph.setNameHint(gelu, c.erf->name().empty() ? std::string("Gelu") : "Gelu_" + c.erf->name());
    const size_t rounds = c.after_erf.size() + c.after_add.size() + c.after_first_mul.size() + c.half_of_a.size();
    graph.takeOutput(gelu, 0, c.v);
    graph.pruneIfDead(last->output(0));
    ctx.report(Report::Approximation, *gelu,
               fmt::format("the Gelu written with Erf (and {} quantizations inside it) as one Gelu, for --target {}: worst "
                           "error {} steps of its output",
                           rounds, t.name, worst));
    ctx.count("Gelu chains written as one Gelu");
  }
};

}  // namespace

void approximateGelu(ir::Model& model, PassContext& ctx) {
  if (!ctx.options().approximate || !ctx.options().target || ctx.target().gelu_for_erf.empty()) return;  // (1)
  ApproximateGelu rule{ctx.target()};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
