// fuse-contrib's selector (select_contrib.h). The numbers refer to fuse_contrib.cpp's conditions.
#include "qconv/passes/qop/select_contrib.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "qconv/ir/tensor.h"

namespace qconv {

namespace {

struct NoKernel {
  const char* op_type;
  const char* why;
};

// (1) Ops of the table onnxruntime's CPU provider cannot run: qconv writes none of them.
const NoKernel kNoKernel[] = {
    {"QLinearConvTranspose", "onnxruntime's CPU provider has no com.microsoft QLinearConvTranspose kernel (only its "
                             "XNNPACK provider runs one), and qconv writes only ops onnxruntime's CPU provider runs"},
    {"QLinearReduceMean", "onnxruntime has no com.microsoft QLinearReduceMean kernel, and qconv writes only ops "
                          "onnxruntime's CPU provider runs"},
};

bool takes(const QOpForm& form, const std::string& attribute) {
  return attribute != "channels_last" &&
         std::any_of(form.attributes.begin(), form.attributes.end(), [&](const char* a) { return attribute == a; });
}

/// (3) A quantized operand: through a DequantizeLinear with constant int8/uint8 parameters, per
/// tensor unless the form lets it run along an axis (QGemm's B, per column).
bool quantizedOperand(ContribGroup& g, size_t slot, const std::string& name, ScaleAxis axis, std::string* why) {
  auto dq = dequantizedInput(*g.node, slot, name, why, true);
  if (!dq) return false;
  if (dq->params.per_axis && dq->params.size() > 1) {
    const int64_t rank = knownRank(dq->quantized());
    const bool trans_b = g.node->attrInt("transB", 0) != 0;
    const bool per_column = axis == ScaleAxis::kGemmB && rank == 2 &&
                            (dq->params.axis == (trans_b ? 0 : 1) || dq->params.axis == (trans_b ? -2 : -1));
    if (!per_column) {
      *why = fmt::format("{} is quantized per axis; com.microsoft {} takes {}", name, g.form->op_type,
                         axis == ScaleAxis::kGemmB ? "one scale per column of B at most" : "one scale per tensor");
      return false;
    }
  }
  ContribOperand op;
  op.name = name;
  op.dq = std::move(*dq);
  g.operands.push_back(std::move(op));
  return true;
}

/// (2) The contrib op's attributes: the float op's, each one it takes; Softmax's axis written
/// out and `opset` set to the model's, which gives the axis the meaning the model gives it.
bool translateAttributes(ContribGroup& g, int64_t opset, std::string* why) {
  const ir::Node& n = *g.node;
  for (const auto& a : n.proto().attribute()) {
    if (n.is("Gemm") && a.name() == "beta") continue;  // folded into C (planQGemmBias)
    if (!takes(*g.form, a.name())) {
      *why = fmt::format("it has attribute '{}', which com.microsoft {} does not take", a.name(), g.form->op_type);
      return false;
    }
    if (g.form->translate != QOpAttributes::kSoftmax) g.attributes.push_back(a);
  }
  if (g.form->translate == QOpAttributes::kSoftmax) {
    for (const auto& [name, value] : {std::pair<const char*, int64_t>{"axis", n.attrInt("axis", opset < 13 ? 1 : -1)},
                                      std::pair<const char*, int64_t>{"opset", opset}}) {
      onnx::AttributeProto a;
      a.set_name(name);
      a.set_type(onnx::AttributeProto::INT);
      a.set_i(value);
      g.attributes.push_back(a);
    }
  }
  return true;
}

/// (4) onnxruntime's kernels: one 8-bit type T for every quantized operand and the output;
/// QGemm's B may be int8 when T is uint8.
bool typesMatch(const ContribGroup& g, std::string* why) {
  const int32_t t = g.y.params.elem_type;
  for (const ContribOperand& op : g.operands) {
    if (!op.dq) continue;
    const int32_t ot = op.dq->params.elem_type;
    if (ot == t || (g.node->is("Gemm") && op.name == "B" && ot == onnx::TensorProto::INT8)) continue;
    *why = fmt::format("{} is {} but the output is {} (com.microsoft {} takes one 8-bit type{})", op.name,
                       ir::typeName(ot), ir::typeName(t), g.form->op_type,
                       g.node->is("Gemm") ? ", B int8 with a uint8 A" : "");
    return false;
  }
  return true;
}

/// (7) onnxruntime's int8 QLinearSoftmax writes nearbyint(p * floor(1 / y_scale)) + y_zero_point
/// and casts it to int8 unclamped: a probability near 1 wraps around when that can pass 127.
bool softmaxFits(const ContribGroup& g, std::string* why) {
  if (!g.node->is("Softmax") || g.y.params.elem_type != onnx::TensorProto::INT8) return true;
  const float top = std::floor(1.0f / g.y.params.scale[0]) + static_cast<float>(g.y.params.zero_point[0]);
  if (top <= 127.0f) return true;
  *why = fmt::format("onnxruntime's int8 QLinearSoftmax would wrap a probability of 1 around to -128: it writes "
                     "floor(1 / y_scale) + y_zero_point = {} unclamped", top);
  return false;
}

}  // namespace

std::optional<ContribGroup> selectContrib(ir::Node& n, const QOpForm& form, int64_t opset, std::string* why) {
  for (const NoKernel& k : kNoKernel)  // (1)
    if (std::string(form.op_type) == k.op_type) {
      *why = k.why;
      return std::nullopt;
    }
  ContribGroup g;
  g.node = &n;
  g.form = &form;
  if (!translateAttributes(g, opset, why)) return std::nullopt;  // (2)
  const size_t inputs = n.inputs().size();
  if (form.variadic_from >= 0) {  // (3) QLinearConcat: every input
    for (size_t i = 0; i < inputs; ++i)
      if (!quantizedOperand(g, i, fmt::format("input {}", i), ScaleAxis::kNone, why)) return std::nullopt;
  } else {
    if (inputs > form.operands.size()) {
      *why = fmt::format("it has {} inputs; com.microsoft {} takes {}", inputs, form.op_type, form.operands.size());
      return std::nullopt;
    }
    for (size_t i = 0; i < form.operands.size(); ++i) {
      const QOperand& row = form.operands[i];
      ir::Value* v = i < inputs ? n.input(i) : nullptr;
      if (!v && !row.optional) {
        *why = fmt::format("input {} ({}) is absent", i, row.name);
        return std::nullopt;
      }
      if (row.kind == QOperand::kDequantized) {
        if (!quantizedOperand(g, i, row.name, row.axis, why)) return std::nullopt;
        continue;
      }
      ContribOperand op;  // kPlain (Where's condition) or kBias (QGemm's C, planned below)
      op.name = row.name;
      op.kind = row.kind;
      op.value = v;
      g.operands.push_back(op);
    }
  }
  auto y = quantizedOutput(n, true, why, true);  // (5)
  if (!y) return std::nullopt;
  g.y = std::move(*y);
  if (!typesMatch(g, why) || !softmaxFits(g, why)) return std::nullopt;  // (4), (7)
  if (n.is("Gemm") && !planQGemmBias(g, why)) return std::nullopt;  // (6)
  return g;
}

}  // namespace qconv
