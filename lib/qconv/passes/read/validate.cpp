// validate: the checks the ONNX checker does not make, before any pass reads the model.
//
// A model that fails them is bad input (exit 3) or beyond qconv (exit 4), named by file and
// node; nothing changes in the graph. Per node:
//   1. a default-domain op exists at the model's opset (and the opset is one qconv knows);
//   2. a standard or com.microsoft Q/DQ with constant parameters has positive finite scales
//      (float, float16 or bfloat16 initializers, or a Constant node's float value: what the passes
//      will see after fold-constants),
//      a zero point of a quantized type with as many values as the scale (0 for int32), and a
//      per-axis scale of rank 1 whose length and axis fit the input's shape where it is known.
//   3. (per model) each opset_import domain once ("" and "ai.onnx" being one): a second entry
//      for a domain leaves which version the model means unknown.
// A scale of a type the operators do not take (double) is bad input too (2).
// The ONNX checker runs on the output; on the input only when the output fails it (run.cpp).
#include <fmt/format.h>

#include <functional>
#include <map>
#include <unordered_map>

#include <cmath>

#include "qconv/diag.h"
#include "qconv/ir/tensor.h"
#include "qconv/passes/common/const_eval.h"
#include "qconv/passes/driver.h"
#include "qconv/passes/common/opset_history.h"
#include "qconv/quant.h"

namespace qconv {

namespace {


/// Dimension `axis` of `v` when its shape says it, else -1.
int64_t knownDim(const ir::Value* v, int64_t axis) {
  if (const auto* t = v->initializer()) return axis < t->dims_size() ? t->dims(static_cast<int>(axis)) : -1;
  if (!v->info() || !v->info()->type().tensor_type().has_shape()) return -1;
  const auto& shape = v->info()->type().tensor_type().shape();
  if (axis >= shape.dim_size() || !shape.dim(static_cast<int>(axis)).has_dim_value()) return -1;
  return shape.dim(static_cast<int>(axis)).dim_value();
}

/// `negative_ok`: a blocked DequantizeLinear's weight scale, negative in onnxruntime's symmetric
/// weight-only quantizer (the sign of each block's largest value): only ever multiplied.
void checkScaleValues(const float* s, size_t count, const std::function<Error(ExitCode, const std::string&)>& bad,
                      bool negative_ok = false) {
  // one branch-free pass first (an LLM has hundreds of millions of scales); -0 is a zero
  if (!(scaleFlaws(s, count) & (kScaleNotFinite | kScaleZero | (negative_ok ? 0u : kScaleNegative)))) return;
  for (size_t i = 0; i < count; ++i) {
    const float f = s[i];
    if (!std::isfinite(f) || f == 0.0f) throw bad(ExitCode::BadInput, fmt::format("scale {} is not positive and finite", f));
    if (f < 0.0f && !negative_ok)
      throw bad(ExitCode::Unsupported, fmt::format("scale {} is not positive and finite (qconv requires positive scales)", f));
  }
}

bool blockedDequantize(const ir::Node& n) { return n.opIs("DequantizeLinear") && n.attrInt("block_size", 0) != 0; }

/// The node as a message names it ("PATH: node 'label' (op)"): made only for a message.
std::string nodeWhere(const std::string& path, const ir::Node& n) {
  return fmt::format("{}: node '{}' ({})", path, n.label(), n.opType());
}

void checkQuantParams(const ir::Node& n, const std::string& path, const PassContext& ctx) {
  auto bad = [&](ExitCode code, const std::string& what) {
    return Error(code, fmt::format("{}: {}", nodeWhere(path, n), what), n.label());
  };
  const ir::Value* scale = n.inputs().size() > 1 ? n.input(1) : nullptr;
  const ir::Value* zp = n.inputs().size() > 2 ? n.input(2) : nullptr;
  if (scale && !scale->isConstant() && scale->producer() && scale->producer()->is("Constant")) {
    // a Constant node's scale: the value the passes will see once fold-constants has run
    std::string why;
    if (auto t = eval::constantNodeValue(*scale->producer(), &why); t && t->isFloat()) checkScaleValues(t->f.data(), t->f.size(), bad);
    return;
  }
  if (scale && scale->isConstant()) {  // the types the operators' definitions allow a scale (opsets 10 to 25)
    const int32_t st = scale->initializer()->data_type();
    if (st != onnx::TensorProto::FLOAT && st != onnx::TensorProto::FLOAT16 && st != onnx::TensorProto::BFLOAT16 &&
        st != 24 /* FLOAT8E8M0 */)
      throw bad(ExitCode::BadInput, fmt::format("scale of type {} is not one {} takes (float, float16, bfloat16, float8e8m0)",
                                                ir::typeName(st), n.opType()));
  }
  if (!scale || !scale->isConstant()) return;  // computed parameters: the runtime's business
  // an LLM's blocked scales, in pieces (unless verify found them valid just now: offerValidScales);
  // nothing after this reads them for a blocked one
  if (blockedDequantize(n) && (ctx.scaleKnownValid(scale, true) ||
                               ir::forFloatPieces(*scale, [&](uint64_t, const float* v, size_t count) {
                                 checkScaleValues(v, count, bad, true);
                                 return true;
                               })))
    return;
  std::string why;
  auto s = ir::readFloats(*scale, &why);
  if (!s) {
    const int32_t type = scale->initializer()->data_type();
    if (type == onnx::TensorProto::FLOAT) throw bad(ExitCode::BadInput, "scale: " + why);
    if (type == onnx::TensorProto::FLOAT16 || type == onnx::TensorProto::BFLOAT16) {
      auto h = ir::readHalfAsFloats(*scale, &why);  // widened exactly: a zero or NaN stays one
      if (!h) throw bad(ExitCode::BadInput, "scale: " + why);
      checkScaleValues(h->data(), h->size(), bad, blockedDequantize(n));
    }
    return;
  }
  checkScaleValues(s->data(), s->size(), bad, blockedDequantize(n));
  const auto sdims = ir::dimsOf(*scale->initializer());
  if (n.attrInt("block_size", 0) != 0) return;  // blocked quantization: shapes follow other rules
  if (zp && zp->isConstant()) {
    const int32_t zt = zp->initializer()->data_type();
    if (!ir::isQuantizedType(zt))
      throw bad(ExitCode::BadInput, fmt::format("zero point of type {} is not a quantized type", ir::typeName(zt)));
    const auto zn = ir::numElements(*zp->initializer()), sn = ir::numElements(*scale->initializer());
    if (zn != sn)  // (onnxruntime's quantizer writes shapes [] and [1] together: counts must agree)
      throw bad(ExitCode::BadInput, fmt::format("scale has {} values and zero point {}", sn.value_or(-1), zn.value_or(-1)));
    // its values matter for int32 alone; others are read for what their storage may hide (a typed
    // field's out-of-range entry, a file's bytes): inline raw data's size was checked by import
    const onnx::TensorProto& zp_tensor = *zp->initializer();
    const bool raw_inline = zp_tensor.data_location() != onnx::TensorProto::EXTERNAL && zp_tensor.has_raw_data();
    if ((ir::isIntegerType(zt) || ir::packedBits(zt)) && (zt == onnx::TensorProto::INT32 || !raw_inline)) {
      auto z = ir::readInts(*zp, &why);
      if (!z) throw bad(ExitCode::BadInput, "zero point: " + why);
      for (int64_t v : *z)
        if (zt == onnx::TensorProto::INT32 && v != 0)
          throw bad(ExitCode::BadInput, fmt::format("zero point {} must be 0 for int32", v));
    }
  }
  if (sdims.empty() || (sdims.size() == 1 && sdims[0] == 1)) return;  // per tensor
  if (sdims.size() != 1) throw bad(ExitCode::BadInput, fmt::format("scale of rank {} needs block_size", sdims.size()));
  const int64_t rank = knownRank(n.input(0));
  int64_t axis = n.attrInt("axis", 1);
  if (rank >= 0) {
    if (axis < -rank || axis >= rank)
      throw bad(ExitCode::BadInput, fmt::format("axis {} is outside the input's rank {}", axis, rank));
    if (axis < 0) axis += rank;
    const int64_t dim = knownDim(n.input(0), axis);
    if (dim >= 0 && dim != sdims[0])
      throw bad(ExitCode::BadInput,
                fmt::format("per-axis scale has {} values, axis {} of the input has {}", sdims[0], axis, dim));
  }
}

/// The rule: a selector that finds nothing to rewrite, and throws on bad input (the third
/// failure tier). Nodes without outputs are checked too.
struct Validate {
  static constexpr bool kNeedsOutput = false;
  struct Group {};
  const std::string& path;
  int64_t opset;
  const PassContext& ctx;

  bool root(const ir::Node&) const { return true; }
  std::string declined(const ir::Node&) const { return ""; }
  Match<Group> select(ir::Node& n) {
    if (n.domain().empty() && !knownOperator(n.opType()))  // (1)
      throw Error(ExitCode::BadInput, fmt::format("{}: not an ai.onnx operator at opset {}", nodeWhere(path, n), opset),
                  n.label());
    if ((n.opIs("QuantizeLinear") || n.opIs("DequantizeLinear")) && (n.domain().empty() || n.domain() == "com.microsoft"))
      checkQuantParams(n, path, ctx);  // (2)
    return Match<Group>::none();
  }
  void rewrite(ir::Graph&, Group&, PassContext&) {}

  /// isKnownOperator, asked once per op type: the graph keeps one string per op type, so its
  /// address names it.
  std::unordered_map<const std::string*, bool> known;
  bool knownOperator(const std::string& op) {
    auto [it, fresh] = known.emplace(&op, false);
    if (fresh) it->second = isKnownOperator(op, opset);
    return it->second;
  }
};

}  // namespace

void validate(ir::Model& model, PassContext& ctx) {
  if (model.shell.ir_version() > onnx::IR_VERSION)
    throw Error(ExitCode::Unsupported, fmt::format("{}: the model's IR version is {}; the ONNX {} qconv is built on knows IR "
                                                   "versions up to {}", ctx.path(), model.shell.ir_version(),
                                                   QCONV_ONNX_VERSION, static_cast<int>(onnx::IR_VERSION)));
  std::map<std::string, int64_t> imported;  // (3) each domain once: which version would a reader take?
  for (const auto& op : model.shell.opset_import()) {
    const std::string domain = op.domain() == "ai.onnx" ? "" : op.domain();
    auto [it, fresh] = imported.emplace(domain, op.version());
    if (!fresh)
      throw Error(ExitCode::BadInput, fmt::format("{}: opset_import declares domain '{}' twice (versions {} and {})", ctx.path(),
                                                  domain.empty() ? "ai.onnx" : domain, it->second, op.version()));
  }
  const int64_t opset = ir::defaultOpset(model);
  if (opset > newestKnownOpset())
    throw Error(ExitCode::Unsupported, fmt::format("{}: the model declares ai.onnx opset {}; qconv knows operators up to opset {}",
                                                   ctx.path(), opset, newestKnownOpset()));
  Validate rule{ctx.path(), opset, ctx, {}};
  applyRule(model.graph, ctx, rule);
}

}  // namespace qconv
