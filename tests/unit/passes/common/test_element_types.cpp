// ElementTypes: what no value_info declares, inferred from the operators' schemas.
#include <catch2/catch.hpp>

#include "model_builder.h"
#include "qconv/passes/common/element_types.h"

using onnx::TensorProto;
using qtest::ModelBuilder;

TEST_CASE("element types follow the schemas' type variables, fixed types and type attributes") {
  ModelBuilder b;
  b.input("x", TensorProto::FLOAT, {1, 3, 4, 4});
  b.floats("s", {}, {0.5f});
  b.ints("z", TensorProto::INT8, {}, {0});
  b.node("QuantizeLinear", {"x", "s", "z"}, {"q"}, "quant");        // T3: its zero point's type
  b.node("QuantizeLinear", {"x", "s"}, {"q_default"}, "quant_u8");   // no zero point: uint8
  onnx::AttributeProto* kernel = b.node("MaxPool", {"q"}, {"pooled"}, "pool").add_attribute();  // T: its input's
  kernel->set_name("kernel_shape");
  kernel->set_type(onnx::AttributeProto::INTS);
  kernel->add_ints(2);
  kernel->add_ints(2);
  b.node("DequantizeLinear", {"pooled", "s", "z"}, {"d"}, "dequant");  // T2: its scale's
  b.node("Shape", {"d"}, {"shape"}, "shape");                         // tensor(int64), fixed
  onnx::AttributeProto* to = b.node("Cast", {"shape"}, {"cast"}, "cast").add_attribute();  // its attribute 'to'
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(TensorProto::INT32);
  b.node("Relu", {"d"}, {"y"}, "relu");
  b.output("y", TensorProto::FLOAT);
  auto model = b.build();
  const qconv::ElementTypes types(model.graph, 13);
  auto typeOf = [&](const char* name) {
    for (const qconv::ir::Node* n : model.graph.nodes())
      for (const qconv::ir::Value* v : n->outputs())
        if (v && v->name() == name) return types.of(v);
    FAIL("no value " << name);
    return 0;
  };
  CHECK(typeOf("q") == TensorProto::INT8);
  CHECK(typeOf("q_default") == TensorProto::UINT8);
  CHECK(typeOf("pooled") == TensorProto::INT8);
  CHECK(typeOf("d") == TensorProto::FLOAT);
  CHECK(typeOf("shape") == TensorProto::INT64);
  CHECK(typeOf("cast") == TensorProto::INT32);
  CHECK(typeOf("y") == TensorProto::FLOAT);
}
