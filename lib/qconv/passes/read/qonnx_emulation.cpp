// Emulation of QONNX Quant with standard float ops (see lower_qonnx_quant.cpp for when).
//
// Before:  x -> Quant(scale, zeropt, bitwidth; signed, narrow, rounding_mode) -> y
// After:   x -> Div(scale) -> Add(zeropt) -> Clip(min, max) -> <rounding> -> Sub(zeropt) -> Mul(scale) -> y
//   <rounding>: ROUND, HALF_EVEN -> Round; CEIL -> Ceil; FLOOR -> Floor;
//               UP -> Sign(v) * Ceil(Abs(v)); DOWN -> Sign(v) * Floor(Abs(v));
//               HALF_UP -> Sign(v) * Floor(Abs(v) + 0.5); HALF_DOWN -> Sign(v) * Ceil(Abs(v) - 0.5)
//   1-bit signed (bipolar): Where(v >= 0, 1, -1) in place of clamp and rounding.
// BipolarQuant(x, scale): Where(x >= 0, 1, -1) * scale (no division first, as qonnx).
// Each step is one float32 operation of QONNX's own definition (qonnx int_quant), in its order,
// so the result is the same number; clamping before rounding as QONNX does.
#include "qconv/passes/read/qonnx_emulation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "qconv/ir/tensor.h"
#include "qconv/passes/common/action_util.h"
#include "qconv/passes/read/float_emitter.h"

namespace qconv {


int64_t QonnxQuantAttrs::lo() const { return is_signed ? -(int64_t{1} << (*bits - 1)) + (narrow ? 1 : 0) : 0; }

int64_t QonnxQuantAttrs::hi() const {
  return is_signed ? (int64_t{1} << (*bits - 1)) - 1 : (int64_t{1} << *bits) - 1 - (narrow ? 1 : 0);
}

QonnxQuantAttrs readQonnxQuant(const ir::Node& n) {
  QonnxQuantAttrs q;
  const ir::Value* v = n.input(3);
  std::string why;
  auto bits = v && v->isConstant() ? ir::readFloats(*v, &why) : std::nullopt;
  if (bits && bits->size() == 1 && std::nearbyint((*bits)[0]) == (*bits)[0] && (*bits)[0] >= 1 && (*bits)[0] <= 62)
    q.bits = static_cast<int>((*bits)[0]);
  q.is_signed = n.attrInt("signed", 1) != 0;
  q.narrow = n.attrInt("narrow", 0) != 0;
  if (const auto* a = n.attribute("rounding_mode")) q.mode = a->s();
  std::transform(q.mode.begin(), q.mode.end(), q.mode.begin(), [](unsigned char c) { return std::toupper(c); });
  return q;
}

bool canEmulateQonnxQuant(const QonnxQuantAttrs& q, int64_t opset, std::string* why) {
  if (opset < 12) {
    *why = fmt::format("emulation needs opset 12, the model has {}", opset);
    return false;
  }
  if (!q.bits || *q.bits > 24) {
    *why = "bit width is not a constant integer from 1 to 24";
    return false;
  }
  const std::string& mode = q.mode;
  static const char* const kModes[] = {"ROUND", "HALF_EVEN", "CEIL", "FLOOR", "UP", "DOWN", "HALF_UP", "HALF_DOWN"};
  if (std::none_of(std::begin(kModes), std::end(kModes), [&](const char* m) { return mode == m; })) {
    *why = fmt::format("rounding mode {} is not one QONNX defines", mode);
    return false;
  }
  return true;
}

void emulateQonnxQuant(ir::Graph& graph, ir::Node& n, const QonnxQuantAttrs& q) {
  const std::string& mode = q.mode;
  FloatEmitter e{graph, &n};
  ir::Value* x = n.input(0);
  ir::Value* scale = n.input(1);
  ir::Value* zp = n.input(2);
  ir::Value* v = e.op("Add", {e.op("Div", {x, scale}), zp});
  if (*q.bits == 1 && q.is_signed) {  // qonnx: bipolar values
    v = e.bipolar(v);
  } else {
    // exact in float32: |bounds| <= 2^24
    v = e.op("Clip", {v, e.constant("clip_min", static_cast<float>(q.lo())), e.constant("clip_max", static_cast<float>(q.hi()))});
    if (mode == "ROUND" || mode == "HALF_EVEN") v = e.op("Round", {v});
    else if (mode == "CEIL") v = e.op("Ceil", {v});
    else if (mode == "FLOOR") v = e.op("Floor", {v});
    else {
      ir::Value* sign = e.op("Sign", {v});
      ir::Value* mag = e.op("Abs", {v});
      if (mode == "UP") mag = e.op("Ceil", {mag});
      else if (mode == "DOWN") mag = e.op("Floor", {mag});
      else if (mode == "HALF_UP") mag = e.op("Floor", {e.op("Add", {mag, e.constant("half", 0.5f)})});
      else mag = e.op("Ceil", {e.op("Sub", {mag, e.constant("half", 0.5f)})});
      v = e.op("Mul", {sign, mag});
    }
  }
  replaceNode(graph, n, graph.createNode("Mul", "", {e.op("Sub", {v, zp}), scale}, 1, &n));
}

bool canEmulateBipolarQuant(const ir::Node& n, int64_t opset, std::string* why) {
  if (opset < 12) {
    *why = fmt::format("emulation needs opset 12, the model has {}", opset);
    return false;
  }
  if (!n.input(0) || !n.input(1)) {
    *why = "BipolarQuant needs an input and a scale";
    return false;
  }
  return true;
}

void emulateBipolarQuant(ir::Graph& graph, ir::Node& n) {
  FloatEmitter e{graph, &n};
  replaceNode(graph, n, graph.createNode("Mul", "", {e.bipolar(n.input(0)), n.input(1)}, 1, &n));
}

}  // namespace qconv
