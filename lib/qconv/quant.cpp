#include "qconv/quant.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <fmt/format.h>

#include "qconv/ir/tensor.h"

namespace qconv {

namespace {

/// scaleFlaws of values [at, n), one value at a time.
unsigned scaleFlawsScalar(const float* s, size_t at, size_t n) {
  uint32_t any = 0, not_finite = 0, zero = 0, subnormal = 0;  // `any`: the sign bits, or'ed
  for (size_t i = at; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, s + i, 4);
    const uint32_t magnitude = b & 0x7fffffffu;
    any |= b;
    not_finite |= static_cast<uint32_t>(magnitude >= 0x7f800000u);
    zero |= static_cast<uint32_t>(magnitude == 0);
    subnormal |= static_cast<uint32_t>(magnitude - 1 < 0x007fffffu);  // 1 .. 0x007fffff
  }
  return (not_finite ? kScaleNotFinite : 0u) | (zero ? kScaleZero : 0u) | (any >> 31 ? kScaleNegative : 0u) |
         (subnormal ? kScaleSubnormal : 0u);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/// The same tests on eight values at a time (signed compares: a magnitude is below 2^31).
__attribute__((target("avx2"))) unsigned scaleFlawsAvx2(const float* s, size_t n) {
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), largest = _mm256_set1_epi32(0x7f7fffff);
  const __m256i normal = _mm256_set1_epi32(0x00800000), zeros = _mm256_setzero_si256();
  __m256i any = zeros, not_finite = zeros, zero = zeros, subnormal = zeros;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    const __m256i magnitude = _mm256_and_si256(b, abs_mask);
    any = _mm256_or_si256(any, b);
    not_finite = _mm256_or_si256(not_finite, _mm256_cmpgt_epi32(magnitude, largest));
    const __m256i is_zero = _mm256_cmpeq_epi32(magnitude, zeros);
    zero = _mm256_or_si256(zero, is_zero);
    subnormal = _mm256_or_si256(subnormal, _mm256_andnot_si256(is_zero, _mm256_cmpgt_epi32(normal, magnitude)));
  }
  unsigned flaws = scaleFlawsScalar(s, i, n);
  if (!_mm256_testz_si256(not_finite, not_finite)) flaws |= kScaleNotFinite;
  if (!_mm256_testz_si256(zero, zero)) flaws |= kScaleZero;
  if (_mm256_movemask_ps(_mm256_castsi256_ps(any))) flaws |= kScaleNegative;
  if (!_mm256_testz_si256(subnormal, subnormal)) flaws |= kScaleSubnormal;
  return flaws;
}
#define QCONV_SCALE_FLAWS_AVX2 1
#endif

}  // namespace

unsigned scaleFlaws(const float* s, size_t n) {
#if defined(QCONV_SCALE_FLAWS_AVX2)
  if (__builtin_cpu_supports("avx2")) return scaleFlawsAvx2(s, n);
#endif
  return scaleFlawsScalar(s, 0, n);
}

using onnx::TensorProto;

const char* foreignQuantDialect(const std::string& domain) {
  static const std::pair<const char*, const char*> kDomains[] = {
      {"qonnx.custom_op.general", "QONNX"}, {"onnx.brevitas", "QONNX"},       {"finn.custom_op.general", "QONNX"},
      {"vai", "Vitis AI"},                  {"com.vai.quantize", "Vitis AI"}, {"com.amd.quark", "AMD Quark"},
      {"org.openvinotoolkit", "OpenVINO FakeQuantize"}};
  for (const auto& [d, dialect] : kDomains)
    if (domain == d) return dialect;
  return nullptr;
}

ir::Node* dequantizeFeeding(const ir::Value* v) {
  if (!v || !v->producer()) return nullptr;
  return isDequantize(*v->producer()) ? v->producer() : nullptr;
}

std::optional<float> constantScalar(const ir::Value* v) {
  if (!v || !v->isConstant()) return std::nullopt;
  std::string why;
  auto f = ir::readFloats(*v, &why);
  if (!f || f->size() != 1) return std::nullopt;
  return (*f)[0];
}

std::optional<std::pair<float, float>> clipBounds(const ir::Node& clip, std::string* why) {
  const float inf = std::numeric_limits<float>::infinity();
  std::pair<float, float> b{-inf, inf};
  if (const auto* a = clip.attribute("min")) b.first = a->f();
  if (const auto* a = clip.attribute("max")) b.second = a->f();
  for (size_t slot : {1, 2}) {
    if (!clip.input(slot)) continue;
    auto f = constantScalar(clip.input(slot));
    if (!f) {
      if (why) *why = fmt::format("{} bound is not a constant float scalar", slot == 1 ? "Clip min" : "Clip max");
      return std::nullopt;
    }
    (slot == 1 ? b.first : b.second) = *f;
  }
  return b;
}

int64_t knownRank(const ir::Value* v) {
  if (!v) return -1;  // an absent input (found by the fuzzer: a QOp node without its data input)
  if (v->initializer()) return v->initializer()->dims_size();
  if (v->info() && v->info()->type().has_tensor_type() && v->info()->type().tensor_type().has_shape())
    return v->info()->type().tensor_type().shape().dim_size();
  return -1;
}

namespace {

bool keepsShape(const ir::Node* n) {
  return n && (n->opIs("QuantizeLinear") || n->opIs("DequantizeLinear") || n->opIs("Identity"));
}

int64_t declaredRankFrom(const ir::Value* v, const ir::Value* from, int depth) {
  if (const int64_t r = knownRank(v); r >= 0 || !v || depth >= 8) return r;
  if (const ir::Node* p = v->producer(); keepsShape(p) && p->input(0) != from)
    if (int64_t r = declaredRankFrom(p->input(0), v, depth + 1); r >= 0) return r;
  for (const auto& use : v->uses())
    if (keepsShape(use.node) && use.index == 0 && use.node->output(0) != from)
      if (int64_t r = declaredRankFrom(use.node->output(0), v, depth + 1); r >= 0) return r;
  return -1;
}

}  // namespace

int64_t declaredRank(const ir::Value* v) { return declaredRankFrom(v, nullptr, 0); }

std::optional<ConstQuant> readConstQuant(const ir::Node& n, std::string* why, bool widen_half) {
  const ir::Value* scale = n.input(1);
  const ir::Value* zp = n.input(2);
  if (!scale || !scale->isConstant()) {
    *why = "scale is not constant";
    return std::nullopt;
  }
  if (zp && !zp->isConstant()) {
    *why = "zero point is not constant";
    return std::nullopt;
  }
  if (n.attrInt("block_size", 0) != 0) {
    *why = "blocked quantization (block_size) has no QLinear form";
    return std::nullopt;
  }
  ConstQuant q;
  std::string inner;
  const int32_t st = scale->initializer()->data_type();
  // QuantizeLinear-23's precision: the type x / scale is computed in (unset: the scale's type).
  // A QLinear op and every rewrite here divide in float: a narrower one is not reproduced.
  if (const int64_t precision = isQuantize(n) ? n.attrInt("precision", 0) : 0;
      precision && precision != TensorProto::FLOAT && precision != st) {
    *why = fmt::format("divides in {} (its precision attribute) where its scale is {}: rewrites here divide in float, "
                       "which rounds apart from it near ties",
                       ir::typeName(static_cast<int32_t>(precision)), ir::typeName(st));
    return std::nullopt;
  }
  if (widen_half && st == TensorProto::BFLOAT16) {
    *why = "scale is bfloat16: the QDQ form rounds every dequantized value to 8 significant bits, which a "
           "QLinear op's float arithmetic does not reproduce (off near ties too)";
    return std::nullopt;
  }
  const bool half = widen_half && st == TensorProto::FLOAT16;
  auto s = half ? ir::readHalfAsFloats(*scale, &inner) : ir::readFloats(*scale, &inner);
  if (half) q.scale_type = st;
  if (!s) {
    *why = "scale: " + inner;
    return std::nullopt;
  }
  q.scale = std::move(*s);
  if (q.scale.empty()) {
    *why = "scale is empty";
    return std::nullopt;
  }
  if (scaleFlaws(q.scale.data(), q.scale.size()) & (kScaleNotFinite | kScaleZero | kScaleNegative))
    for (float f : q.scale)  // the first one, to name it
      if (!(std::isfinite(f) && f > 0.0f)) {
        *why = fmt::format("scale {} is not positive and finite", f);
        return std::nullopt;
      }
  const auto& sdims = scale->initializer()->dims();
  if (sdims.size() > 1) {
    *why = "scale has rank > 1 (blocked quantization)";
    return std::nullopt;
  }
  q.per_axis = q.scale.size() > 1;
  q.axis = n.attrInt("axis", 1);
  if (zp) {
    auto z = ir::readInts(*zp, &inner);
    if (!z) {
      *why = "zero point: " + inner;
      return std::nullopt;
    }
    if (z->size() != q.scale.size()) {
      *why = fmt::format("zero point has {} values, scale has {}", z->size(), q.scale.size());
      return std::nullopt;
    }
    q.zero_point = std::move(*z);
    q.elem_type = zp->initializer()->data_type();
  } else {
    q.zero_point.assign(q.scale.size(), 0);
    if (isQuantize(n)) {
      const int64_t output_dtype = n.attrInt("output_dtype", 0);  // 0: unset
      q.elem_type = output_dtype ? static_cast<int32_t>(output_dtype) : TensorProto::UINT8;
    } else {
      q.elem_type = n.input(0) ? n.input(0)->elemType() : 0;
    }
  }
  return q;
}

int32_t quantizedTypeOf(const ir::Node& n) {
  if (const ir::Value* zp = n.input(2)) {
    if (zp->initializer()) return zp->initializer()->data_type();
    if (zp->elemType()) return zp->elemType();
  }
  if (n.opIs("QuantizeLinear")) {
    if (n.output(0) && n.output(0)->elemType()) return n.output(0)->elemType();
    if (n.input(2)) return 0;
    const int64_t output_dtype = n.attrInt("output_dtype", 0);  // 0: unset
    return output_dtype ? static_cast<int32_t>(output_dtype) : TensorProto::UINT8;
  }
  return n.input(0) ? n.input(0)->elemType() : 0;
}

bool sameQuant(const ConstQuant& a, const ConstQuant& b) {
  if (a.elem_type != b.elem_type || a.per_axis != b.per_axis || a.scale.size() != b.scale.size()) return false;
  if (a.per_axis && a.axis != b.axis) return false;
  return std::memcmp(a.scale.data(), b.scale.data(), a.scale.size() * sizeof(float)) == 0 &&
         a.zero_point == b.zero_point;
}

int64_t quantizeOne(float x, float scale, int64_t zero_point, int32_t elem_type) {
  auto [lo, hi] = ir::intRange(elem_type);
  const float r = std::nearbyint(x / scale);  // ties to even in the default rounding mode
  if (std::isnan(r)) return zero_point < lo ? lo : (zero_point > hi ? hi : zero_point);
  const double v = static_cast<double>(r) + static_cast<double>(zero_point);
  if (v <= static_cast<double>(lo)) return lo;
  if (v >= static_cast<double>(hi)) return hi;
  return static_cast<int64_t>(v);
}

}  // namespace qconv
