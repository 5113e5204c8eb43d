// The target profiles as data: each names itself once, says why for every limit it sets, and
// stores 8-bit tensors in types its own limits allow.
#include <catch2/catch.hpp>
#include <onnx/onnx_pb.h>

#include <set>
#include <string>

#include "qconv/targets/target.h"

TEST_CASE("every target has a unique name and a reason for each limit") {
  std::set<std::string> names;
  for (const qconv::TargetProfile& t : qconv::targetProfiles()) {
    CAPTURE(std::string(t.name));
    REQUIRE(names.insert(std::string(t.name)).second);
    REQUIRE(qconv::findTarget(t.name) == &t);
    REQUIRE(!t.runtime.empty());
    REQUIRE(!t.summary.empty());
    for (const qconv::Limit* l : {&t.qop, &t.qdq, &t.contrib, &t.per_axis, &t.conv_per_channel, &t.matmul_per_column,
                                  &t.nonzero_zero_point, &t.uint8, &t.int32_dequantize, &t.per_axis_activation,
                                  &t.blocked, &t.float_compute, &t.integer_ops})
      REQUIRE((l->allowed || !l->why.empty()));
    for (const qconv::FloatReader& r : t.float_readers) REQUIRE((!r.op.empty() && !r.why.empty()));
    // each op rule says why, and when it was measured
    for (const qconv::OpRule& r : t.op_rules) REQUIRE((!r.op.empty() && !r.why.empty()));
    REQUIRE((t.op_rules.empty() || !t.op_rules_measured.empty()));
    REQUIRE((t.move_on == (qconv::kUint8 | qconv::kInt8) || !t.move_why.empty()));
    // the default format is one it takes
    REQUIRE((t.default_qop ? t.qop.allowed : t.qdq.allowed));
    // the activation type it stores is one it moves data on, where it moves data on 8-bit tensors at all
    // (QNN moves none: data movement runs between DQ and Q)
    if (t.move_on && t.activation_type == onnx::TensorProto::UINT8) REQUIRE((t.move_on & qconv::kUint8));
    if (t.move_on && t.activation_type == onnx::TensorProto::INT8) REQUIRE((t.move_on & qconv::kInt8));
    if (!t.uint8.allowed) REQUIRE((t.activation_type == onnx::TensorProto::INT8 && t.weight_type == onnx::TensorProto::INT8));
  }
  REQUIRE(names ==
          std::set<std::string>{"onnxruntime", "tensorrt", "openvino", "openvino-f32", "iree", "tvm", "aidge", "qnn", "rknn"});
  REQUIRE(qconv::findTarget("nothing") == nullptr);
}

TEST_CASE("without a target every form is allowed and the saturation advice is onnxruntime's") {
  const qconv::TargetProfile& none = qconv::unrestricted();
  for (const qconv::Limit* l : {&none.qop, &none.qdq, &none.contrib, &none.per_axis, &none.conv_per_channel,
                                &none.matmul_per_column, &none.nonzero_zero_point, &none.uint8, &none.int32_dequantize,
                                &none.per_axis_activation, &none.blocked, &none.float_compute})
    REQUIRE(l->allowed);
  REQUIRE(none.float_readers.empty());
  REQUIRE(none.op_rules.empty());
  REQUIRE(none.matmul_as_conv.empty());
  REQUIRE(none.explicit_zero_points.empty());
  REQUIRE(none.saturating_kernels == "onnxruntime");
  REQUIRE(none.activation_type == 0);
  REQUIRE(none.weight_type == 0);
}
