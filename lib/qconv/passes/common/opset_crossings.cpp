// Operator versions whose signature changed, crossed where the node keeps its meaning: the
// conditions and rewrites are in opset_crossings.h.
#include "qconv/passes/common/opset_crossings.h"

#include <fmt/format.h>

#include <vector>

#include "qconv/diag.h"
#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/quant.h"

namespace qconv {

namespace {

bool isAxisCoercing(std::string_view op) { return op == "Softmax" || op == "LogSoftmax" || op == "Hardmax"; }

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

/// Condition 3: the attribute version `v` moved to input 1 (axes; Split's split) when the opset
/// rises across it, else null.
const char* movedAttribute(const Crossing& v, int64_t declared) {
  const std::string_view changed = v.changed;
  if (declared >= v.since) return nullptr;
  if (changed == "attribute axes removed" || changed == "input axes added, not optional; attribute axes removed")
    return "axes";
  if (v.op == "Split" && changed == "attribute split removed") return "split";
  return nullptr;
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


}  // namespace

std::optional<std::string> crossingBlocker(const ir::Node& n, const Crossing& c, int64_t declared) {
  if (isAxisCoercing(c.op) && c.since == 13) {  // condition 1
    if (lastAxis(n, declared) >= 0) return "";
    return fmt::format("{} (the versions agree on the last axis of an input of known rank only)", c.changed);
  }
  if (c.op == "BatchNormalization" && c.since == 14)  // condition 2
    return inferenceOnly(n) ? "" : std::string(c.changed);
  if (movedAttribute(c, declared)) return "";      // condition 3
  if (c.op == "Resize" && c.since == 13) return resizeAcross13(n);  // condition 4
  return std::nullopt;
}

void rewriteCrossing(ir::Graph& graph, ir::Node& n, const Crossing& c, int64_t from) {
  if (isAxisCoercing(c.op) && c.since == 13) {  // condition 1: the axis written out (checked to be the last)
    const int64_t axis = lastAxis(n, from);
    QCONV_ASSERT(axis >= 0, "{}: crossing opset 13 unchecked", n.label());
    removeAttribute(n, "axis");
    setIntAttribute(n, "axis", axis);
  } else if (const char* name = movedAttribute(c, from)) {  // condition 3: the attribute to a constant input
    if (!n.attribute(name)) return;
    const std::vector<int64_t> values = n.attrInts(name);
    removeAttribute(n, name);
    if (!n.input(1))
      graph.setInput(&n, 1, graph.addInitializer(n.label() + "_" + name, ir::makeIntTensor(onnx::TensorProto::INT64,
                                                                                         {static_cast<int64_t>(values.size())}, values)));
  } else if (c.op == "Resize" && c.since == 13) {  // condition 4: scales and roi as the new side wants them
    if (from < c.since) {
      if (ir::Value* scales = n.input(2); n.input(3) && isEmptyConstant(scales)) {
        graph.setInput(&n, 2, nullptr);
        graph.pruneIfDead(scales);
      }
      return;
    }
    for (size_t slot : {size_t{1}, size_t{2}})
      if (!n.input(slot))
        graph.setInput(&n, slot, graph.addInitializer(n.label() + (slot == 1 ? "_roi" : "_scales"), ir::makeFloatTensor({0}, {})));
  }
}

}  // namespace qconv
