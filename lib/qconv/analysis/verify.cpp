#include "qconv/analysis/verify.h"

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "qconv/analysis/annotation.h"
#include "qconv/analysis/quant_sites.h"
#include "qconv/analysis/representation.h"
#include "qconv/ir/tensor.h"
#include "qconv/passes/pass.h"
#include "qconv/quant.h"

namespace qconv::analysis {

namespace {

using onnx::TensorProto;

class Findings {
 public:
  void add(const std::string& kind, const ir::Node& n, const ir::Value* t, std::string message) {
    add(kind, n.label(), t ? t->name() : std::string(), std::move(message));
  }
  void add(const std::string& kind, const std::string& node, const std::string& tensor, std::string message,
           bool advisory = false) {
    if (seen_.insert(kind + '\n' + node + '\n' + tensor).second)
      all_.push_back({kind, node, tensor, std::move(message), advisory});
  }
  std::vector<Finding> take() { return std::move(all_); }

 private:
  std::vector<Finding> all_;
  std::set<std::string> seen_;  // one finding per kind, node and tensor
};

/// (1) to (3) of a site: its scale, its zero point, its lengths and axis.
void checkParameters(const QuantSite& s, Findings& out) {
  const ir::Node& n = *s.node;
  std::optional<std::vector<float>> scale;
  if (s.scale->isConstant()) {
    std::string why;
    scale = ir::readWidenedFloats(*s.scale, &why);
    if (!scale) out.add("scale-invalid", n, s.tensor, fmt::format("scale '{}': {}", s.scale->name(), why));
  }
  if (scale) {
    for (size_t i = 0; i < scale->size(); ++i) {
      const float f = (*scale)[i];
      const char* what = !std::isfinite(f) ? "not finite" : f <= 0 ? "not positive"
                         : std::fpclassify(f) == FP_SUBNORMAL ? "subnormal (1 / scale overflows float)" : nullptr;
      if (what) {
        out.add("scale-invalid", n, s.tensor,
                fmt::format("{} scale '{}'[{}] is {}: {}", s.role, s.scale->name(), i, f, what));
        break;
      }
    }
  }
  std::optional<std::vector<int64_t>> zp;
  if (s.zero_point && s.zero_point->isConstant()) {
    const int32_t zt = s.zero_point->initializer()->data_type();
    std::string why;
    if (!ir::isIntegerType(zt) || zt == TensorProto::INT64 || zt == TensorProto::UINT64) {
      out.add("zero-point-range", n, s.tensor,
              fmt::format("{} zero point '{}' is {}, not a quantized integer type", s.role, s.zero_point->name(),
                          ir::typeName(zt)));
    } else if (!(zp = ir::readInts(*s.zero_point, &why))) {
      out.add("zero-point-range", n, s.tensor, fmt::format("{} zero point '{}': {}", s.role, s.zero_point->name(), why));
    } else {
      const auto [lo, hi] = ir::intRange(zt);
      for (size_t i = 0; i < zp->size(); ++i)
        if ((*zp)[i] < lo || (*zp)[i] > hi) {
          out.add("zero-point-range", n, s.tensor,
                  fmt::format("{} zero point '{}'[{}] is {}, outside {}'s [{}, {}]", s.role, s.zero_point->name(), i,
                              (*zp)[i], ir::typeName(zt), lo, hi));
          break;
        }
    }
  }
  if (!scale) return;
  if (zp && zp->size() != scale->size())
    out.add("per-axis", n, s.tensor,
            fmt::format("{} scale has {} values, its zero point {}", s.role, scale->size(), zp->size()));
  if (scale->size() <= 1 || s.axis == kUnknownAxis) return;
  if (s.axis < 0) {
    out.add("per-axis", n, s.tensor,
            fmt::format("{} has {} scales where {} takes one", s.role, scale->size(), n.opType()));
    return;
  }
  const int64_t rank = knownRank(s.tensor);
  if (rank >= 0 && s.axis >= rank) {
    out.add("per-axis", n, s.tensor, fmt::format("{} axis {} is outside its rank {}", s.role, s.axis, rank));
    return;
  }
  int64_t dim = -1;
  if (const auto* t = s.tensor->initializer()) dim = t->dims(static_cast<int>(s.axis));
  else if (s.tensor->info() && s.tensor->info()->type().tensor_type().has_shape()) {
    const auto& shape = s.tensor->info()->type().tensor_type().shape();
    if (s.axis < shape.dim_size() && shape.dim(static_cast<int>(s.axis)).has_dim_value())
      dim = shape.dim(static_cast<int>(s.axis)).dim_value();
  }
  if (dim >= 0 && dim != static_cast<int64_t>(scale->size()))
    out.add("per-axis", n, s.tensor,
            fmt::format("{} has {} scales along axis {}, whose dimension is {}", s.role, scale->size(), s.axis, dim));
}

/// The scales and zero point of the DequantizeLinear feeding input `slot` of `n`, when constant.
std::optional<ConstQuant> dequantized(const ir::Node& n, size_t slot) {
  const ir::Node* dq = dequantizeFeeding(n.input(slot));
  std::string why;
  return dq ? readConstQuant(*dq, &why, true) : std::nullopt;
}

/// A Conv or Gemm between DequantizeLinears: its bias at x_scale * w_scale, within int32.
void checkBias(const ir::Node& n, Findings& out) {
  if (!n.domain().empty() || !(n.is("Conv") || n.is("Gemm")) || !n.input(2)) return;
  const auto x = dequantized(n, 0), w = dequantized(n, 1);
  if (!x || !w || x->size() != 1) return;
  const ir::Value* b = n.input(2);
  auto expected = [&](size_t c) { return x->scale[0] * w->scale[w->size() == 1 ? 0 : c]; };  // float32, as fusions do
  if (const auto bq = dequantized(n, 2)) {
    for (size_t c = 0; c < bq->size(); ++c) {
      const float want = expected(c);
      if (bq->scale[c] != want) {
        out.add("bias-scale", n, dequantizeFeeding(b)->input(0),
                fmt::format("bias scale[{}] is {:.9g}, x_scale * w_scale is {:.9g}", c, bq->scale[c], want));
        break;
      }
      if (bq->zero_point[c] != 0) {
        out.add("bias-scale", n, dequantizeFeeding(b)->input(0),
                fmt::format("bias zero point[{}] is {}, not 0", c, bq->zero_point[c]));
        break;
      }
    }
    return;
  }
  if (!b->isConstant() || b->initializer()->data_type() != TensorProto::FLOAT) return;
  std::string why;
  const auto values = ir::readFloats(*b, &why);
  if (!values) return;
  for (size_t c = 0; c < values->size(); ++c) {
    const double q = std::nearbyint(static_cast<double>((*values)[c]) / static_cast<double>(expected(c)));
    if (!(std::fabs(q) <= 2147483647.0)) {
      out.add("bias-overflow", n, b,
              fmt::format("bias[{}] = {} is {:.6g} steps of x_scale * w_scale, outside int32", c, (*values)[c], q));
      break;
    }
  }
}

/// With `symmetric`: an int8 zero point other than 0, or a uint8 tensor (once per tensor).
void checkSymmetric(const QuantSite& s, std::set<const ir::Value*>& named, Findings& out) {
  if (!s.zero_point || !s.zero_point->isConstant() || !named.insert(s.tensor).second) return;
  const int32_t zt = s.zero_point->initializer()->data_type();
  std::string why;
  const auto zp = ir::readInts(*s.zero_point, &why);
  if (!zp) return;
  if (zt == TensorProto::UINT8) {
    out.add("asymmetric", *s.node, s.tensor,
            fmt::format("{} is uint8 (zero point {}): a runtime that takes int8 at zero point 0 only refuses it{}",
                        s.role, zp->empty() ? 0 : (*zp)[0],
                        !zp->empty() && (*zp)[0] == 128 ? "; --activation-type int8 --weight-type int8 stores it as "
                                                          "int8 at 0, exactly"
                                                        : ""));
    return;
  }
  if (zt != TensorProto::INT8) return;
  for (int64_t v : *zp)
    if (v != 0) {
      out.add("asymmetric", *s.node, s.tensor,
              fmt::format("{} zero point is {}: a runtime that takes int8 at zero point 0 only refuses it", s.role, v));
      return;
    }
}

}  // namespace

std::vector<Finding> verifyModel(ir::Model& model, const VerifyOptions& options) {
  Findings out;
  std::vector<QuantSite> sites;
  std::set<const ir::Value*> asymmetric;
  for (const ir::Node* n : model.graph.nodes()) {
    for (QuantSite& s : quantSites(*n)) {
      checkParameters(s, out);
      if (options.symmetric) checkSymmetric(s, asymmetric, out);
      sites.push_back(std::move(s));
    }
    checkBias(*n, out);
  }
  for (const Disagreement& d : disagreements(model.graph, sites))
    out.add("representation", *d.second.node, d.second.tensor, d.message);

  PassOptions passes;
  passes.check_saturation = true;
  passes.target = options.target;
  spdlog::logger quiet("verify");  // no sink: the passes' words become findings, not stderr lines
  PassContext ctx(quiet, passes, model.path);
  ctx.setPass("check-saturation");
  checkSaturation(model, ctx);  // says nothing for a target without onnxruntime's kernels
  for (const Said& s : ctx.said())
    if (s.kind == Report::Warning && s.subject != model.path)
      out.add("saturation", s.subject, "", s.text, /*advisory=*/options.target == nullptr);
  ctx.setPass("check-target");
  checkTarget(model, ctx);  // nothing without a target
  for (const Said& s : ctx.said())
    if (s.kind == Report::Unconvertible) out.add("target", s.subject, "", s.text);

  for (const AnnotationProblem& p : annotationProblems(model, sites)) out.add("annotation", p.node, p.tensor, p.message);
  return out.take();
}

}  // namespace qconv::analysis
