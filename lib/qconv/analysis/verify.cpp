#include "qconv/analysis/verify.h"

#include <fmt/format.h>


#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "qconv/analysis/annotation.h"
#include "qconv/analysis/quant_sites.h"
#include "qconv/passes/common/contrib_defs.h"
#include "qconv/passes/common/computed_dims.h"
#include "qconv/passes/common/opset_history.h"
#include "qconv/passes/common/shared_bias.h"
#include "qconv/analysis/representation.h"
#include "qconv/diag.h"
#include "qconv/ir/tensor.h"
#include "qconv/passes/pass.h"
#include "qconv/passes/common/undeclared_shape.h"
#include "qconv/quant.h"

namespace qconv::analysis {

const std::vector<FindingKind>& findingKinds() {
  static const std::vector<FindingKind> kinds = {
      {"scale-invalid", Severity::Error},   {"zero-point-range", Severity::Error}, {"per-axis", Severity::Error},
      {"asymmetric", Severity::Error},      {"target", Severity::Error},           {"representation", Severity::Error},
      {"op-invalid", Severity::Error},      {"bias-scale", Severity::Warning},     {"bias-overflow", Severity::Warning},
      {"saturation", Severity::Warning},    {"annotation", Severity::Warning},     {"no-quantization", Severity::Warning},
  };
  return kinds;
}

const FindingKind* findKind(std::string_view name) {
  for (const FindingKind& k : findingKinds())
    if (name == k.name) return &k;
  return nullptr;
}

const char* severityName(Severity s) {
  switch (s) {
    case Severity::Note:
      return "note";
    case Severity::Warning:
      return "warning";
    case Severity::Error:
      return "error";
  }
  return "?";
}

namespace {

using onnx::TensorProto;

class Findings {
 public:
  void add(const std::string& kind, const ir::Node& n, const ir::Value* t, std::string message) {
    add(kind, n.label(), t ? t->name() : std::string(), std::move(message));
  }
  void add(const std::string& kind, const std::string& node, const std::string& tensor, std::string message,
           Severity severity) {
    if (seen_.insert(kind + '\n' + node + '\n' + tensor).second)
      all_.push_back({kind, node, tensor, std::move(message), severity});
  }
  void add(const std::string& kind, const std::string& node, const std::string& tensor, std::string message) {
    const FindingKind* k = findKind(kind);
    QCONV_ASSERT(k, "finding kind '{}' is not in findingKinds()", kind);
    add(kind, node, tensor, std::move(message), k->severity);
  }
  std::vector<Finding> take() { return std::move(all_); }

 private:
  std::vector<Finding> all_;
  std::set<std::string> seen_;  // one finding per kind, node and tensor
};

/// A value's dims when its shape says all of them, else empty.
std::vector<int64_t> knownDims(const ir::Value* v) { return ir::knownDims(*v).value_or(std::vector<int64_t>{}); }

/// (1) a site's scale values.
/// Whether every scale is finite, nonzero, of a sign allowed and (unless `subnormal_ok`) normal:
/// one pass without a branch (scaleFlaws); the loop after it finds which one is not, when one is not.
unsigned forbiddenFlaws(bool negative_ok, bool subnormal_ok) {
  return kScaleNotFinite | kScaleZero | (negative_ok ? 0u : kScaleNegative) | (subnormal_ok ? 0u : kScaleSubnormal);
}

bool allValidScales(const float* scale, size_t size, bool negative_ok, bool subnormal_ok) {
  return (scaleFlaws(scale, size) & forbiddenFlaws(negative_ok, subnormal_ok)) == 0;
}

std::optional<std::vector<float>> checkScale(const QuantSite& s, Findings& out, ValidScales* valid) {
  const ir::Node& n = *s.node;
  if (!s.scale->isConstant()) return std::nullopt;
  // an e8m0 scale (a power of two) only multiplies: 2^-127, a float subnormal, is a valid one
  const bool e8m0 = s.scale->initializer()->data_type() == TensorProto::FLOAT8E8M0;
  // a blocked weight's scale may be negative (onnxruntime's symmetric weight-only quantizer
  // writes each block's sign into it): a DequantizeLinear only multiplies by it
  const bool negative_ok = s.block_size != 0 && n.opIs("DequantizeLinear");
  // the first invalid one of `count` scales from index `base`, said; false when there is one
  bool all_valid = true;  // so far
  auto judge = [&](const float* scale, size_t count, uint64_t base) {
    if (allValidScales(scale, count, negative_ok, e8m0)) return true;  // the usual case, branch-free
    all_valid = false;
    for (size_t i = 0; i < count; ++i) {
      const float f = scale[i];
      const char* what = !std::isfinite(f) ? "not finite" : f == 0 || (f < 0 && !negative_ok) ? "not positive"
                         : !e8m0 && std::fpclassify(f) == FP_SUBNORMAL ? "subnormal (1 / scale overflows float)" : nullptr;
      if (what) {
        out.add("scale-invalid", n, s.tensor,
                fmt::format("{} scale '{}'[{}] is {}: {}", s.role, s.scale->name(), base + i, f, what));
        return false;
      }
    }
    return true;
  };
  // a blocked or packed site's scales (an lm_head's at block 32 are hundreds of MiB): in pieces
  // verify's rules forbid all validate's do (and subnormal ones): a scale valid here is one
  // validate need not read again (PassContext::offerValidScales)
  auto record = [&] {
    if (valid && all_valid) valid->insert({s.scale, negative_ok});
  };
  if (s.block_size != 0 || s.packed) {
    // a repack's scales were checked as they were written (ir::writtenFloatFlaws): read back
    // only to say which value is wrong; others in pieces. Such a site's later checks read no values.
    const auto flaws = ir::writtenFloatFlaws(*s.scale);
    if ((flaws && (*flaws & forbiddenFlaws(negative_ok, e8m0)) == 0) ||
        ir::forFloatPieces(*s.scale, [&](uint64_t first, const float* v, size_t count) { return judge(v, count, first); })) {
      record();
      return std::nullopt;
    }
  }
  std::string why;
  auto scale = ir::readWidenedFloats(*s.scale, &why);
  if (!scale) {
    out.add("scale-invalid", n, s.tensor, fmt::format("scale '{}': {}", s.scale->name(), why));
    return std::nullopt;
  }
  judge(scale->data(), scale->size(), 0);
  record();
  return scale;
}

/// (2) a site's zero point: of a type Q/DQ take, and within its range. Returns how many values
/// it has (-1 when not read).
int64_t checkZeroPoint(const QuantSite& s, Findings& out) {
  const ir::Node& n = *s.node;
  if (!s.zero_point || !s.zero_point->isConstant()) return -1;
  const int32_t zt = s.zero_point->initializer()->data_type();
  if (!ir::isQuantizedType(zt)) {
    out.add("zero-point-range", n, s.tensor,
            fmt::format("{} zero point '{}' is {}, which no QuantizeLinear or DequantizeLinear takes", s.role,
                        s.zero_point->name(), ir::typeName(zt)));
    return -1;
  }
  if (const int64_t od = n.opIs("QuantizeLinear") ? n.attrInt("output_dtype", 0) : 0; od && od != zt) {
    out.add("zero-point-range", n, s.tensor,
            fmt::format("{} zero point '{}' is {}, its output_dtype {}: the two must agree", s.role, s.zero_point->name(),
                        ir::typeName(zt), ir::typeName(static_cast<int32_t>(od))));
    return -1;
  }
  if (ir::isFloatQuantType(zt)) {  // float8 / float4: any value of the type is one
    auto count = ir::numElements(*s.zero_point->initializer());
    return count ? *count : -1;
  }
  // Stored as bytes (raw_data or a file, whose length the reader checked), every value is one
  // of its type's: only a typed field (int32_data) can hold one outside. An LLM's are not read.
  if (const auto& t = *s.zero_point->initializer(); t.has_raw_data() || t.data_location() == TensorProto::EXTERNAL) {
    auto count = ir::numElements(t);
    return count ? *count : -1;
  }
  std::string why;
  const auto zp = ir::readInts(*s.zero_point, &why);
  if (!zp) {
    out.add("zero-point-range", n, s.tensor, fmt::format("{} zero point '{}': {}", s.role, s.zero_point->name(), why));
    return -1;
  }
  const auto [lo, hi] = ir::intRange(zt);
  for (size_t i = 0; i < zp->size(); ++i)
    if ((*zp)[i] < lo || (*zp)[i] > hi) {
      out.add("zero-point-range", n, s.tensor,
              fmt::format("{} zero point '{}'[{}] is {}, outside {}'s [{}, {}]", s.role, s.zero_point->name(), i,
                          (*zp)[i], ir::typeName(zt), lo, hi));
      break;
    }
  return static_cast<int64_t>(zp->size());
}

/// (3) a blocked site: the scale has the tensor's rank, ceil(D / block_size) along the axis
/// and the tensor's dimension elsewhere; the zero point the scale's shape.
void checkBlocked(const QuantSite& s, Findings& out) {
  const ir::Node& n = *s.node;
  const std::vector<int64_t> x = knownDims(s.tensor), sc = knownDims(s.scale);
  if (s.block_size < 0) {
    out.add("per-axis", n, s.tensor, fmt::format("{} block_size {} is negative", s.role, s.block_size));
    return;
  }
  if (x.empty() || sc.empty() || s.axis < 0 || s.axis >= static_cast<int64_t>(x.size())) return;
  if (sc.size() != x.size()) {
    out.add("per-axis", n, s.tensor,
            fmt::format("{} is blocked (block_size {}): its scale has rank {}, the tensor {}", s.role, s.block_size,
                        sc.size(), x.size()));
    return;
  }
  for (size_t d = 0; d < x.size(); ++d) {
    const int64_t want = static_cast<int64_t>(d) == s.axis ? (x[d] + s.block_size - 1) / s.block_size : x[d];
    if (sc[d] != want) {
      out.add("per-axis", n, s.tensor,
              fmt::format("{} is blocked (block_size {}) along axis {}: its scale has {} along axis {}, where {} is "
                          "wanted",
                          s.role, s.block_size, s.axis, sc[d], d, want));
      return;
    }
  }
  if (s.zero_point && knownDims(s.zero_point) != sc)
    out.add("per-axis", n, s.tensor, fmt::format("{}: its zero point's shape is not its scale's", s.role));
}

/// (1) to (3) of a site: its scale, its zero point, its lengths and axis.
void checkParameters(const QuantSite& s, Findings& out, ValidScales* valid) {
  const ir::Node& n = *s.node;
  const auto scale = checkScale(s, out, valid);
  if (s.packed) return;  // onnxruntime's own layout (MatMulNBits, GatherBlockQuantized): its kernel checks it
  const int64_t zp = checkZeroPoint(s, out);
  if (s.block_size != 0) {
    checkBlocked(s, out);
    return;
  }
  if (!scale) return;
  if (zp >= 0 && zp != static_cast<int64_t>(scale->size()))
    out.add("per-axis", n, s.tensor, fmt::format("{} scale has {} values, its zero point {}", s.role, scale->size(), zp));
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
  // One bias per weight scale, or one weight scale for all: other counts are per-axis's finding.
  auto matches = [&](size_t biases) { return w->size() == 1 || w->size() == biases; };
  auto expected = [&](size_t c) { return x->scale[0] * w->scale[w->size() == 1 ? 0 : c]; };  // float32, as fusions do
  if (const auto bq = dequantized(n, 2)) {
    if (!matches(bq->size())) return;
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
  if (!values || !matches(values->size())) return;
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
      checkParameters(s, out, options.valid_scales);
      if (options.symmetric) checkSymmetric(s, asymmetric, out);
      sites.push_back(std::move(s));
    }
    checkBias(*n, out);
    if (std::string why = contribDefinitionProblem(*n); !why.empty()) out.add("op-invalid", n->label(), "", why);
  }
  for (const Disagreement& d : disagreements(model.graph, sites))
    out.add("representation", *d.second.node, d.second.tensor, d.message);
  for (const SharedBias& b : sharedBiases(model.graph))  // QOp nodes reading one int32 bias at two scales
    for (size_t k = 1; k < b.reads.size(); ++k)
      out.add("representation", *b.reads[k].node, b.bias,
              fmt::format("'{}' is also the int32 bias of {}, at x_scale * w_scale {}; here it is at {}: one bias "
                          "read at two scales, so this node adds another bias than the model's (onnxruntime's "
                          "quantize_static quantizes a bias several nodes share once, for the first); convert "
                          "--approximate gives it the first one's bias at its own scale",
                          b.bias->name(), b.reads[0].node->label(), biasScaleText(b.reads[0].scale),
                          biasScaleText(b.reads[k].scale)));

  PassOptions passes;
  passes.check_saturation = true;
  passes.target = options.target;
  const Diagnostics quiet(nullptr, 0);  // no sink: the passes' words become findings, not stderr lines
  PassContext ctx(quiet, passes, model.path);
  ctx.setPass("check-saturation");
  if (options.saturation) checkSaturation(model, ctx);  // says nothing for a target without onnxruntime's kernels
  for (const Said& s : ctx.said())
    if (s.kind == Report::Advisory)
      out.add("saturation", s.subject, "", s.text, options.target ? Severity::Warning : Severity::Note);

  ctx.setPass("check-target");
  checkTarget(model, ctx);  // what the runtime cannot run in the model as it is (nothing without a target)
  ctx.setPass("check-ops");
  checkOps(model, ctx);  // what its measured per-op table says it does not run
  if (const TargetProfile* t = options.target; t && !t->activation_why.empty()) {
    // 8-bit activations of the type the target does not run as they are, where a DequantizeLinear of
    // them feeds a Conv, MatMul or Gemm (what was measured): named once, counted
    const ir::Node* first = nullptr;
    size_t count = 0;
    auto feedsCompute = [](const ir::Node& q) {
      for (const ir::Use& u : q.output(0)->uses())
        if (isDequantize(*u.node) && u.node->output(0))
          for (const ir::Use& w : u.node->output(0)->uses())
            if (w.node->is("Conv") || w.node->is("ConvTranspose") || w.node->is("MatMul") || w.node->is("Gemm")) return true;
      return false;
    };
    for (const ir::Node* n : model.graph.nodes()) {
      if (!isQuantize(*n) || !n->input(0) || n->input(0)->isConstant() || !n->output(0) || !feedsCompute(*n)) continue;
      const int32_t type = quantizedTypeOf(*n);
      if ((type == onnx::TensorProto::INT8 || type == onnx::TensorProto::UINT8) && type != t->activation_type) {
        if (!first) first = n;
        ++count;
      }
    }
    if (first)
      out.add("target", first->label(), "",
              fmt::format("{} activations quantized to {} (this one and {} more): {}", count,
                          ir::typeName(quantizedTypeOf(*first)), count - 1, t->activation_why));
  }
  for (const Said& s : ctx.said())
    if (s.kind == Report::Unconvertible) out.add("target", s.subject, "", s.text);
  if (const TargetProfile* t = options.target; t && !t->computed_dims_concat.empty())
    for (const ComputedDimsJoin& j : computedDimsJoins(model.graph)) out.add("target", j.concat->label(), "", computedDimsWhy(j, *t));
  if (const TargetProfile* t = options.target; t && !t->declare_shapes.empty())
    for (const ir::Node* n : model.graph.nodes())
      if (shapeToDeclare(*n))
        out.add("target", n->label(), "",
                fmt::format("its output, of a computed shape, is not declared: {}; convert --target {} declares "
                            "its quantized form's shape",
                            t->declare_shapes, t->name));
  if (const TargetProfile* t = options.target) {  // an opset its runtime does not load: the model as it is fails there
    const int64_t declared = ir::defaultOpset(model);
    const int64_t floor = targetOpsetMin(*t, model);
    const int64_t nearest = declared < floor ? floor : t->opset_max && declared > t->opset_max ? t->opset_max : 0;
    if (declared && nearest)
      out.add("target", "opset_import", "",
              fmt::format("the model declares ai.onnx opset {}, which {} does not load (it reads {} to {}); convert "
                          "--target {} declares {} where every node keeps its meaning",
                          declared, t->runtime, floor, t->opset_max ? fmt::format("{}", t->opset_max) : "any newer",
                          t->name, nearest));
  }

  for (const AnnotationProblem& p : annotationProblems(model, sites)) out.add("annotation", p.node, p.tensor, p.message);
  return out.take();
}

}  // namespace qconv::analysis
