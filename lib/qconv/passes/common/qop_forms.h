// The QOperator ops qconv takes back to QDQ form, as data: for each, the float op it stands for
// and where each of that op's inputs comes from (one row per input), read from the ONNX
// operator specification (QLinearConv, QLinearMatMul) and onnxruntime's contrib operator
// schemas (com.microsoft). unfuse-qop (unfuse_qop.cpp) turns one into
//   DequantizeLinear per quantized input -> float op -> QuantizeLinear
// with the same parameters.
#pragma once

#include <string>
#include <vector>

#include "qconv/ir/ir.h"

namespace qconv {

/// The axis a per-axis scale of an operand is along (used only when the scale has more than
/// one element; a single scale is per tensor).
enum class ScaleAxis {
  kNone,         // must be per tensor
  kFirst,        // axis 0 (a conv weight's output channels, a conv bias)
  kSecond,       // axis 1 (a ConvTranspose weight's output channels, with one group)
  kRow,          // rank - 2 (QLinearMatMul's a, per row)
  kColumn,       // rank - 1 (QLinearMatMul's b, per column; a QGemm bias)
  kGemmB,        // QGemm's B: 0 with transB, else 1
};

/// One input of the float op.
struct QOperand {
  enum Kind {
    kDequantized,  // DequantizeLinear(input x, scale s, zero point zp)
    kPlain,        // input x as it is (QLinearWhere's condition)
    kBias,         // DequantizeLinear(int32 input x, scale = the product of the scales at slots
                   // s and zp (x_scale * w_scale), times QGemm's alpha; zero point 0)
  };
  const char* name;  // "x", "w", "B": for names and messages
  Kind kind;
  int x, s, zp;      // input slots of the QOp node (zp -1: none)
  ScaleAxis axis;
  bool optional;     // the input may be absent
};

/// How attributes carry over beyond a plain copy of the listed ones.
enum class QOpAttributes {
  kCopy,           // the listed attributes, as they are
  kChannelsLast,   // the listed ones but channels_last; channels_last = 1: transposes around the op
  kSoftmax,        // axis (explicit), opset: the softmax of that opset's semantics
  kReduceMean,     // axes: an attribute below opset 18, an input from 18; keepdims
};

struct QOpForm {
  const char* op_type;
  bool contrib;                   // com.microsoft (else the default domain)
  const char* float_op;
  std::vector<QOperand> operands; // the float op's inputs, in order
  int variadic_from;              // QLinearConcat: (X, scale, zero point) triples from this slot; -1: none
  int y_scale, y_zero_point;      // the output's quantization (slots); y_scale absent: a float output
  std::vector<const char*> attributes;  // the attributes it may carry
  QOpAttributes translate;
};

/// The form of `n`, or null when it is not a QOp op qconv knows.
const QOpForm* qopFormOf(const ir::Node& n);

/// The form of the op `op_type` of `domain` ("com.microsoft" or the default), or null.
const QOpForm* qopFormNamed(const std::string& op_type, const std::string& domain);

/// The com.microsoft op that stands for the float op `float_op` in onnxruntime's QOperator
/// format (QLinearAdd for Add, QGemm for Gemm, ...), or null. Conv and MatMul have standard
/// ones (QLinearConv, QLinearMatMul) and get none here.
const QOpForm* contribFormFor(const std::string& float_op);

/// Why `n`, a com.microsoft quantized op, has no QDQ form with the same math; empty when it is
/// not one of those.
std::string withoutQdqForm(const ir::Node& n);

}  // namespace qconv
