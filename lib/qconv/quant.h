// Reading quantization parameters off QuantizeLinear / DequantizeLinear nodes.
#pragma once

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "qconv/ir/ir.h"

namespace qconv {

/// Standard-domain QuantizeLinear / DequantizeLinear.
inline bool isQuantize(const ir::Node& n) { return n.is("QuantizeLinear"); }
inline bool isDequantize(const ir::Node& n) { return n.is("DequantizeLinear"); }

/// The quantization dialect of a domain no standard runtime runs ("QONNX", "Vitis AI", "AMD
/// Quark", "OpenVINO FakeQuantize"), or null. com.microsoft is not one: onnxruntime runs it.
const char* foreignQuantDialect(const std::string& domain);
inline bool isForeignQuantDomain(const std::string& domain) { return foreignQuantDialect(domain) != nullptr; }

/// The producer of `v` when it is a standard DequantizeLinear, else null.
ir::Node* dequantizeFeeding(const ir::Value* v);

/// What a run of scale values holds that a scale may not be, as bits: not finite, zero (either
/// sign), negative (the sign bit set), subnormal. validate and verify each ask for the flaws their
/// rules forbid. One pass without a branch, eight values at a time where the CPU has AVX2 (an
/// LLM's blocked scales are hundreds of MiB, checked on the way in and out).
enum ScaleFlaw : unsigned { kScaleNotFinite = 1, kScaleZero = 2, kScaleNegative = 4, kScaleSubnormal = 8 };
unsigned scaleFlaws(const float* s, size_t n);

/// Quantization parameters whose scale and zero point are constant initializers.
struct ConstQuant {
  std::vector<float> scale;
  std::vector<int64_t> zero_point;  // same length as scale (zeros when absent)
  int32_t elem_type = 0;            // the quantized tensor's type; 0 when it cannot be told
  int32_t scale_type = onnx::TensorProto::FLOAT;  // FLOAT16 / BFLOAT16: `scale` holds them widened
  bool per_axis = false;
  int64_t axis = 0;  // as written (may be negative); meaningful when per_axis
  size_t size() const { return scale.size(); }
};

/// Read the parameters of a Q or DQ node. nullopt with a reason ("scale is not constant", ...)
/// when they are not constant, not float/int, blocked, or a scale is not positive and finite.
/// With `widen_half`, a float16 scale is read too, widened to float (scale_type says so): for a
/// fusion that writes it back as float. A bfloat16 scale is then refused with its reason.
std::optional<ConstQuant> readConstQuant(const ir::Node& qdq, std::string* why, bool widen_half = false);

/// The quantized side's element type of a Q or DQ, from its zero point's type, else (Q) its
/// output_dtype or uint8, else (DQ) its input's type; 0 when none of them says.
int32_t quantizedTypeOf(const ir::Node& qdq);

/// Same scale bits, zero points, type and granularity.
bool sameQuant(const ConstQuant& a, const ConstQuant& b);

/// The value of a constant float scalar (one element), else nullopt.
std::optional<float> constantScalar(const ir::Value* v);

/// A Clip's [min, max]: Clip-6 attributes or Clip-11+ inputs, absent = -inf / +inf; nullopt
/// when a bound input is not a constant float scalar (*why names which, when given).
std::optional<std::pair<float, float>> clipBounds(const ir::Node& clip, std::string* why = nullptr);

/// Rank of a value when known (initializer dims or value_info shape), else -1 (also for null).
int64_t knownRank(const ir::Value* v);

/// The rank of `v` where its shape is declared (symbolic dims count), or that of a value a chain
/// of QuantizeLinear/DequantizeLinear/Identity joins it to, either way (a quantizer adds values it
/// declares no shape for); else -1.
int64_t declaredRank(const ir::Value* v);

/// QuantizeLinear's formula for one element: saturate(round_half_even(x / scale) + zp).
int64_t quantizeOne(float x, float scale, int64_t zero_point, int32_t elem_type);

}  // namespace qconv
