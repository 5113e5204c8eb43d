// The selector of fuse-contrib (--contrib): which com.microsoft op a QDQ group becomes, read off
// the graph with qop_forms.h's table (the same rows unfuse-qop reads the other way), or the
// reason it stays in QDQ form.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "qconv/ir/ir.h"
#include "qconv/passes/common/qdq_select.h"
#include "qconv/passes/common/qop_forms.h"

namespace qconv {

/// One input of the float op, as the contrib op takes it.
struct ContribOperand {
  std::string name;                    // "A", "X", "X1": for names and messages
  QOperand::Kind kind = QOperand::kDequantized;
  std::optional<DequantizedInput> dq;  // kDequantized: the DequantizeLinear it comes through
  ir::Value* value = nullptr;          // kPlain: the input as it is; kBias: an int32 C kept as it is
};

/// QGemm's C, requantized: int32 at alpha * a_scale * b_scale[column].
struct QGemmBias {
  std::vector<int64_t> dims;     // [N] or [M, N]
  std::vector<int64_t> values;
  bool requantized = false;      // the values moved by at most half a step of that scale
};

struct ContribGroup {
  ir::Node* node = nullptr;
  const QOpForm* form = nullptr;
  std::vector<ContribOperand> operands;          // the float op's inputs, in order
  QuantizedOutput y;
  std::vector<onnx::AttributeProto> attributes;  // the contrib op's
  std::optional<QGemmBias> bias;                 // QGemm with a C that is not kept as it is
};

/// The group rooted at `n` (a float op with a contrib form, `form`) in a model of default
/// opset `opset`, or nullopt with the failed requirement in *why.
std::optional<ContribGroup> selectContrib(ir::Node& n, const QOpForm& form, int64_t opset, std::string* why);

/// QGemm's C (input 2 of the Gemm in `g`): kept (operand value set), requantized (g.bias), or
/// nullopt with the reason. select_contrib_gemm.cpp.
bool planQGemmBias(ContribGroup& g, std::string* why);

}  // namespace qconv
