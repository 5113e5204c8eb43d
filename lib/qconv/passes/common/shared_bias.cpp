#include "qconv/passes/common/shared_bias.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/qop_forms.h"

namespace qconv {

namespace {

/// Positive finite float constants, or nullopt.
std::optional<std::vector<float>> positive(const ir::Value* v) {
  std::string why;
  auto f = v && v->isConstant() ? ir::readFloats(*v, &why) : std::nullopt;
  if (!f || f->empty()) return std::nullopt;
  for (float x : *f)
    if (!(std::isfinite(x) && x > 0)) return std::nullopt;
  return f;
}

/// Whether two scales (one value or one per channel) are the same for every channel.
bool sameScale(const std::vector<float>& a, const std::vector<float>& b) {
  const size_t n = std::max(a.size(), b.size());
  if (a.size() != n && a.size() != 1) return false;
  if (b.size() != n && b.size() != 1) return false;
  for (size_t c = 0; c < n; ++c)
    if (a[a.size() == 1 ? 0 : c] != b[b.size() == 1 ? 0 : c]) return false;
  return true;
}

}  // namespace

namespace {

/// The bias operand of QOp node `n` (qop_forms.h's kBias) whose input `n` has, or null.
const QOperand* biasOperand(const ir::Node& n) {
  const QOpForm* form = qopFormOf(n);
  if (!form) return nullptr;
  for (const QOperand& op : form->operands)
    if (op.kind == QOperand::kBias && static_cast<size_t>(op.x) < n.inputs().size() && n.input(op.x)) return &op;
  return nullptr;
}

/// The constant int32 bias QOp node `n` reads, or null.
ir::Value* constantBias(const ir::Node& n) {
  const QOperand* op = biasOperand(n);
  ir::Value* b = op ? n.input(static_cast<size_t>(op->x)) : nullptr;
  return b && b->isConstant() && b->elemType() == onnx::TensorProto::INT32 ? b : nullptr;
}

}  // namespace

std::optional<BiasRead> biasReadOf(ir::Node& n) {
  const QOperand* op = biasOperand(n);
  if (!op) return std::nullopt;
  const auto a = positive(n.input(static_cast<size_t>(op->s)));
  const auto b = positive(n.input(static_cast<size_t>(op->zp)));
  if (!a || a->size() != 1 || !b) return std::nullopt;
  BiasRead read{&n, static_cast<size_t>(op->x), {}};
  const float alpha = n.attrFloat("alpha", 1.0f);  // QGemm: C at alpha * a_s * b_s (as unfuse-qop computes it)
  for (float s : *b) read.scale.push_back(alpha * (*a)[0] * s);
  return read;
}

std::vector<SharedBias> sharedBiases(ir::Graph& graph) {
  // the biases more than one node reads, counted before any scale is read: most have one reader
  std::map<const ir::Value*, int> readers;
  for (const ir::Node* n : graph.nodes())
    if (const ir::Value* b = constantBias(*n)) ++readers[b];
  std::vector<SharedBias> found;
  std::map<const ir::Value*, size_t> at;  // bias -> its entry in `found`
  for (ir::Node* n : graph.nodes()) {
    ir::Value* b = constantBias(*n);
    if (!b || readers[b] < 2) continue;
    auto read = biasReadOf(*n);
    if (!read) continue;
    auto [it, fresh] = at.emplace(b, found.size());
    if (fresh) found.push_back({b, {}});
    SharedBias& s = found[it->second];
    if (s.reads.empty() || !sameScale(s.reads.front().scale, read->scale)) s.reads.push_back(std::move(*read));
  }
  found.erase(std::remove_if(found.begin(), found.end(), [](const SharedBias& s) { return s.reads.size() < 2; }),
              found.end());
  return found;
}

std::string biasScaleText(const std::vector<float>& scale) {
  if (scale.size() == 1) return fmt::format("{:.9g}", scale[0]);
  const auto [lo, hi] = std::minmax_element(scale.begin(), scale.end());
  return fmt::format("{} per channel, {:.9g} .. {:.9g}", scale.size(), *lo, *hi);
}

}  // namespace qconv
