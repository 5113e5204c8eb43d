// The element types of a graph's values where the model declares none (no value_info: a model
// shape inference never ran on), inferred node by node in graph order from ONNX's operator
// schemas: an output whose type variable an input shares has that input's type (Relu's T, a
// QuantizeLinear's T3 from its zero point, a DequantizeLinear's from its scale); a variable
// allowed one type only is that type (Shape's int64); Cast, Constant, ConstantOfShape and
// QuantizeLinear/DequantizeLinear's output_dtype read their attribute. What none of these settles stays unknown (0).
#pragma once

#include <cstdint>
#include <unordered_map>

#include "qconv/ir/ir.h"

namespace qconv {

class ElementTypes {
 public:
  /// Infers over `graph`'s nodes for ai.onnx opset `opset`.
  ElementTypes(const ir::Graph& graph, int64_t opset);
  /// The value's declared element type, else the inferred one, else 0.
  int32_t of(const ir::Value* v) const;

 private:
  std::unordered_map<const ir::Value*, int32_t> inferred_;
};

}  // namespace qconv
