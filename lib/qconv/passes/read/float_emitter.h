// Building exact float-op emulations: a small helper that inserts standard float32 ops before a
// node. Used where a dialect's quantizer has no Q/DQ form (QONNX, Vitis AI, OpenVINO).
#pragma once

#include <string>
#include <vector>

#include "qconv/ir/ir.h"
#include "qconv/ir/tensor.h"

namespace qconv {

struct FloatEmitter {
  ir::Graph& graph;
  ir::Node* before;

  /// A new node `type(in...)` before `before`, whose one output is float32.
  ir::Value* op(const char* type, std::vector<ir::Value*> in) { return typed(type, std::move(in), onnx::TensorProto::FLOAT); }
  /// A comparison or logic op (bool output).
  ir::Value* test(const char* type, std::vector<ir::Value*> in) { return typed(type, std::move(in), onnx::TensorProto::BOOL); }
  ir::Value* constant(const char* hint, float v) { return graph.addInitializer(hint, ir::makeFloatTensor({}, {v})); }
  /// A float constant of the given dims (e.g. a per-channel parameter shaped to broadcast).
  ir::Value* constant(const char* hint, const std::vector<int64_t>& dims, const std::vector<float>& v) {
    return graph.addInitializer(hint, ir::makeFloatTensor(dims, v));
  }
  /// Where(v >= 0, 1, -1), as qonnx computes bipolar values.
  ir::Value* bipolar(ir::Value* v) {
    return op("Where", {test("GreaterOrEqual", {v, constant("zero", 0.0f)}), constant("one", 1.0f), constant("minus_one", -1.0f)});
  }

 private:
  ir::Value* typed(const char* type, std::vector<ir::Value*> in, int32_t elem) {
    ir::Node* n = graph.createNode(type, "", in, 1, before);
    n->output(0)->setElemType(elem);
    return n->output(0);
  }
};

/// Dims that make a per-axis parameter of `count` elements broadcast along `axis` of a tensor
/// of rank `rank`: [count, 1, ..., 1] (rank - axis - 1 ones).
inline std::vector<int64_t> broadcastDims(int64_t count, int64_t axis, int64_t rank) {
  std::vector<int64_t> dims{count};
  for (int64_t k = axis + 1; k < rank; ++k) dims.push_back(1);
  return dims;
}

}  // namespace qconv
