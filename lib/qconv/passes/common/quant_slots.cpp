#include "qconv/passes/common/quant_slots.h"

#include <string>
#include <string_view>

namespace qconv {

std::vector<QuantSlot> quantSlots(const ir::Node& n) {
  if (!n.domain().empty()) return {};
  const std::string& op = n.opType();
  if (op == "QuantizeLinear") return {{true, 0, 2}};
  if (op == "DequantizeLinear") return {{false, 0, 2}};
  if (op == "QLinearConv" || op == "QLinearMatMul") return {{false, 0, 2}, {false, 3, 5}, {true, 0, 7}};
  if (op == "ConvInteger" || op == "MatMulInteger") return {{false, 0, 2}, {false, 1, 3}};
  return {};
}

bool isZeroPointInput(const ir::Node& n, int index) {
  for (const QuantSlot& s : quantSlots(n))
    if (s.zero_point == index) return true;
  return false;
}

bool movesData(const ir::Node& n) {
  if (!n.domain().empty()) return false;
  static constexpr std::string_view kOps[] = {"Reshape", "Flatten",   "Transpose", "Squeeze", "Unsqueeze",
                                     "Identity", "Slice",    "Gather",    "Split",   "Concat",
                                     "Tile",     "Expand",   "DepthToSpace", "SpaceToDepth", "MaxPool"};
  for (std::string_view op : kOps)
    if (n.opIs(op)) return true;
  if (n.opIs("Resize")) {  // nearest: every output is a copy of an input (issue 36: YOLOv8's upsampling)
    const auto* mode = n.attribute("mode");
    return !mode || mode->s() == "nearest";
  }
  return false;
}

bool computesOnData(const ir::Node& n) {
  return movesData(n) || (n.domain().empty() && (n.opIs("Resize") || n.opIs("Pad") || n.opIs("Upsample")));
}

std::vector<int> dataInputs(const ir::Node& n) {
  if (!n.opIs("Concat")) return {0};
  std::vector<int> all;
  for (size_t i = 0; i < n.inputs().size(); ++i) all.push_back(static_cast<int>(i));
  return all;
}

std::vector<int> dataOutputs(const ir::Node& n) {
  if (!n.opIs("Split")) return {0};
  std::vector<int> all;
  for (size_t i = 0; i < n.outputs().size(); ++i) all.push_back(static_cast<int>(i));
  return all;
}

}  // namespace qconv
