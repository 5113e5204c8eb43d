// lower-contrib-qdq: contrib-domain QuantizeLinear / DequantizeLinear become standard ones.
//
// Before:
//   x -> <domain>::<Q>(s, z[, axis]) -> q -> <domain>::<DQ>(s, z[, axis]) -> y
// After:
//   x -> QuantizeLinear(s, z[, axis]) -> q -> DequantizeLinear(s, z[, axis]) -> y
//
// The dialects (kContribQdq), each computing saturate(nearbyint(x / s) + z) and (q - z) * s:
//   com.microsoft   QuantizeLinear / DequantizeLinear: an absent axis means per tensor
//                   (onnxruntime ContribOperators.md);
//   com.amd.quark   ExtendedQuantizeLinear / ExtendedDequantizeLinear: an absent axis means
//                   axis 0 (Quark's custom_op_qdq.cc reads a missing attribute as 0);
//   com.vai.quantize VitisQuantizeLinear / VitisDequantizeLinear: Quark's deprecated names for
//                   the same kernels (quark/onnx/tools/convert_custom_ops.py maps one to the other).
// Same formula, same inputs; only the axis rule differs from the standard op's default of 1, so
// the standard node always gets an explicit axis when per axis. A node is lowered when:
//   0. the model's default opset is 10 or more (the standard ops' first version);
//   1. its quantized type (the zero point's, else the DQ input's, else uint8 for a Q) is int8 or
//      uint8; or int16/uint16 in a model whose default opset is >= 21 (where the standard op
//      takes them); or int32 into a DequantizeLinear whose zero point is absent or 0 (a bias);
//   2. its scale is per tensor, or 1-D per axis with an axis (explicit, or the dialect's rule),
//      and per axis needs a default opset >= 13 (the first standard op with `axis`);
//   3. it has no attribute but `axis`.
// A node that fails stays as it is and the reason is noted: com.microsoft runs in onnxruntime;
// the others run nowhere standard, so qconv then refuses the model with that reason.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/common/opset_history.h"
#include "qconv/passes/driver.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

struct ContribQdq {
  const char* domain;
  const char* quantize;
  const char* dequantize;
  std::optional<int64_t> absent_axis;  // what a missing axis means for a per-axis scale
};

constexpr int64_t kAxis0 = 0;
const ContribQdq kContribQdq[] = {
    {"com.microsoft", "QuantizeLinear", "DequantizeLinear", std::nullopt},
    {"com.amd.quark", "ExtendedQuantizeLinear", "ExtendedDequantizeLinear", kAxis0},
    {"com.vai.quantize", "VitisQuantizeLinear", "VitisDequantizeLinear", kAxis0},
};

/// The dialect of `n` and whether it quantizes, or null.
const ContribQdq* dialectOf(const ir::Node& n, bool* quantize) {
  for (const auto& d : kContribQdq)
    if (n.domain() == d.domain && (n.opType() == d.quantize || n.opType() == d.dequantize)) {
      *quantize = n.opType() == d.quantize;
      return &d;
    }
  return nullptr;
}

int32_t quantizedType(const ir::Node& n, bool quantize) {
  if (const ir::Value* zp = n.input(2); zp && zp->elemType()) return zp->elemType();
  if (quantize) return onnx::TensorProto::UINT8;
  return n.input(0) ? n.input(0)->elemType() : 0;
}

bool isPerTensor(const ir::Node& n) {
  const ir::Value* s = n.input(1);
  return s && s->isConstant() && ir::numElements(*s->initializer()).value_or(-1) == 1;
}

bool lowerable(const ir::Node& n, const ContribQdq& d, bool quantize, int64_t opset, std::string* why) {
  if (opset < 10) {  // (0) the first standard QuantizeLinear / DequantizeLinear
    *why = fmt::format("the standard {} needs opset 10, the model has {}", quantize ? "QuantizeLinear" : "DequantizeLinear",
                       opset);
    return false;
  }
  const int32_t t = quantizedType(n, quantize);
  const bool wide = t == onnx::TensorProto::INT16 || t == onnx::TensorProto::UINT16;
  if (t == onnx::TensorProto::INT32 && !quantize) {  // (1) a bias
    const ir::Value* zp = n.input(2);
    std::string inner;
    auto z = zp && zp->isConstant() ? ir::readInts(*zp, &inner) : std::nullopt;
    if (zp && (!z || std::any_of(z->begin(), z->end(), [](int64_t v) { return v != 0; }))) {
      *why = "an int32 DequantizeLinear needs zero point 0";
      return false;
    }
  } else if (!ir::isInt8Like(t) && !(wide && opset >= 21)) {  // (1)
    *why = fmt::format("{} has no standard form at opset {}", ir::typeName(t), opset);
    return false;
  }
  for (const auto& a : n.proto().attribute())  // (3)
    if (a.name() != "axis") {
      *why = fmt::format("attribute '{}' has no standard meaning", a.name());
      return false;
    }
  if (isPerTensor(n)) return true;  // (2) per tensor, whatever the axis says
  if (!n.attribute("axis") && !d.absent_axis) {
    *why = fmt::format("scale is not a constant scalar and there is no axis ({} has no default axis)", d.domain);
    return false;
  }
  if (opset < 13) {
    *why = fmt::format("per-axis quantization needs opset 13, the model has {}", opset);
    return false;
  }
  return true;
}

struct LowerContribQdq {
  struct Group {
    ir::Node* node;
    const ContribQdq* dialect;
    bool quantize;
  };
  int64_t opset;

  bool root(const ir::Node& n) const {
    bool quantize = false;
    return dialectOf(n, &quantize) != nullptr;
  }
  std::string declined(const ir::Node& n) const {
    return isForeignQuantDomain(n.domain()) ? fmt::format("{}::{} not converted", n.domain(), n.opType())
                                            : fmt::format("stays {}", n.domain());
  }
  Match<Group> select(ir::Node& n) {
    Group g{&n, nullptr, false};
    g.dialect = dialectOf(n, &g.quantize);
    std::string why;
    if (lowerable(n, *g.dialect, g.quantize, opset, &why)) return g;
    return isForeignQuantDomain(n.domain()) ? Match<Group>::unconvertible(why) : Match<Group>::refuse(why);
  }
  /// The standard node takes the contrib node's inputs, in order, and its output; an axis
  /// attribute when per axis (the dialect's rule for an absent one made explicit).
  void rewrite(ir::Graph& graph, Group& g, PassContext& ctx) {
    ir::Node& n = *g.node;
    const char* op = g.quantize ? "QuantizeLinear" : "DequantizeLinear";
    ir::Node* standard = graph.createNode(op, "", n.inputs(), 1, &n);
    if (!isPerTensor(n)) setIntAttribute(*standard, "axis", n.attribute("axis") ? n.attribute("axis")->i() : *g.dialect->absent_axis);
    ir::Value* out = n.output(0);
    if (out->elemType() == 0 && g.quantize) out->setElemType(quantizedType(n, true));
    ctx.count(fmt::format("{} {} lowered", g.dialect->domain, op));
    replaceNode(graph, n, standard);
  }
};

}  // namespace

/// A com.microsoft 16-bit Q/DQ in a model below opset 21, for a target that runs no com.microsoft
/// op but takes that type (qnn): the opset is raised to 21, where the standard op takes it, when
/// every node keeps its meaning (opsetRaiseBlocker); else the node stays and check-target names it.
bool raiseForWideQdq(ir::Model& model, const PassContext& ctx, int64_t opset) {
  const TargetProfile& t = ctx.target();
  if (!ctx.options().target || t.contrib.allowed || opset < 10 || opset >= 21 || (t.opset_max && t.opset_max < 21)) return false;
  bool wide = false;
  for (const ir::Node* n : model.graph.nodes()) {
    bool quantize = false;
    if (!dialectOf(*n, &quantize)) continue;
    const int32_t type = quantizedType(*n, quantize);
    wide = wide || ((type == onnx::TensorProto::UINT16 || type == onnx::TensorProto::INT16) && takesType(t, type));
  }
  return wide && opsetRaiseBlocker(model, opset, 21).empty();
}

void lowerContribQdq(ir::Model& model, PassContext& ctx) {
  int64_t opset = ir::defaultOpset(model);
  if (raiseForWideQdq(model, ctx, opset)) {
    declareOpset(model, 21);
    ctx.count("opset raised to 21 for 16-bit QuantizeLinear/DequantizeLinear");
    opset = 21;
  }
  LowerContribQdq rule{opset};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
