#include "qconv/passes/read/integer_conv.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "qconv/ir/tensor.h"

namespace qconv {

bool padsWithZero(const ir::Node& n) {
  if (!n.is("Pad")) return true;
  if (const auto* mode = n.attribute("mode"); mode && mode->s() != "constant") return false;
  const ir::Value* v = n.inputs().size() > 2 ? n.input(2) : nullptr;
  if (!v) return true;
  if (!v->isConstant()) return false;
  std::string why;
  if (auto f = ir::readFloats(*v, &why)) return f->size() == 1 && (*f)[0] == 0.0f;
  auto i = ir::readInts(*v, &why);
  return i && i->size() == 1 && (*i)[0] == 0;
}

std::optional<double> accumulatorBound(const ir::Node& n, double xmax) {
  std::string why;
  const onnx::TensorProto& wt = *n.input(1)->initializer();
  auto w = ir::readInts(*n.input(1), &why);
  if (!w) return std::nullopt;
  const std::vector<int64_t> dims = ir::dimsOf(wt);
  // the output-channel axis of w: Conv 0; Gemm N (0 with transB, else 1); MatMul the last
  size_t axis = dims.empty() ? 0 : dims.size() - 1;
  if (n.is("Conv")) axis = 0;
  if (n.is("Gemm")) axis = n.attrInt("transB", 0) ? 0 : 1;
  const int64_t channels = dims.size() > axis ? dims[axis] : 1;
  int64_t inner = 1;
  for (size_t k = axis + 1; k < dims.size(); ++k) inner *= dims[k];
  if (channels <= 0 || inner <= 0) return 0.0;
  std::vector<double> sum(static_cast<size_t>(channels), 0.0);
  for (size_t i = 0; i < w->size(); ++i)
    sum[static_cast<size_t>((static_cast<int64_t>(i) / inner) % channels)] += std::abs(static_cast<double>((*w)[i]));
  std::optional<std::vector<int64_t>> b;
  if (n.inputs().size() > 2 && n.input(2)) b = ir::readInts(*n.input(2), &why);
  double bound = 0;
  for (size_t c = 0; c < sum.size(); ++c) {
    const double bias = b && b->size() == sum.size() ? std::abs(static_cast<double>((*b)[c])) : b && b->size() == 1 ? std::abs(static_cast<double>((*b)[0])) : 0.0;
    bound = std::max(bound, sum[c] * xmax + bias);
  }
  return bound;
}

std::optional<PadFold> padFold(const ir::Node& conv) {
  ir::Node* pad = conv.input(0) ? conv.input(0)->producer() : nullptr;
  if (!conv.is("Conv") || !pad || !pad->is("Pad") || !padsWithZero(*pad) || conv.input(0)->uses().size() != 1 ||
      conv.input(0)->isGraphOutput() || (conv.attribute("auto_pad") && conv.attribute("auto_pad")->s() != "NOTSET"))
    return std::nullopt;
  std::string why;
  const size_t rank = ir::dimsOf(*conv.input(1)->initializer()).size();
  auto pads = pad->input(1) && pad->input(1)->isConstant() ? ir::readInts(*pad->input(1), &why) : std::nullopt;
  std::vector<int64_t> axes;
  if (pad->input(3)) {
    auto a = pad->input(3)->isConstant() ? ir::readInts(*pad->input(3), &why) : std::nullopt;
    if (!a) return std::nullopt;
    axes = *a;
  } else {
    for (size_t k = 0; k < rank; ++k) axes.push_back(static_cast<int64_t>(k));
  }
  if (rank < 3 || !pads || pads->size() != 2 * axes.size()) return std::nullopt;
  std::vector<int64_t> full(2 * rank, 0);  // begins then ends, over all axes
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t a = axes[k] < 0 ? axes[k] + static_cast<int64_t>(rank) : axes[k];
    if (a < 0 || a >= static_cast<int64_t>(rank) || (*pads)[k] < 0 || (*pads)[k + axes.size()] < 0) return std::nullopt;
    full[static_cast<size_t>(a)] += (*pads)[k];
    full[static_cast<size_t>(a) + rank] += (*pads)[k + axes.size()];
  }
  if (full[0] || full[1] || full[rank] || full[rank + 1]) return std::nullopt;
  const size_t sp = rank - 2;
  std::vector<int64_t> conv_pads(2 * sp, 0);
  if (const auto* a = conv.attribute("pads")) {
    if (static_cast<size_t>(a->ints_size()) != 2 * sp) return std::nullopt;
    for (size_t k = 0; k < 2 * sp; ++k) conv_pads[k] = a->ints(static_cast<int>(k));
  }
  for (size_t k = 0; k < sp; ++k) {
    conv_pads[k] += full[k + 2];
    conv_pads[k + sp] += full[k + 2 + rank];
  }
  return PadFold{pad->input(0), conv_pads};
}

void applyPadFold(ir::Graph& g, ir::Node& conv, const PadFold& fold) {
  auto* attrs = conv.mutableProto().mutable_attribute();
  attrs->erase(std::remove_if(attrs->begin(), attrs->end(), [](const auto& a) { return a.name() == "pads"; }), attrs->end());
  auto* a = conv.mutableProto().add_attribute();
  a->set_name("pads");
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : fold.pads) a->add_ints(v);
  ir::Value* padded = conv.input(0);
  g.setInput(&conv, 0, fold.input);
  g.pruneIfDead(padded);
}

}  // namespace qconv
