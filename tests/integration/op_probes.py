"""Probe models: one op alone, in one form, as a runtime's per-op support table was measured
(issue 47: the profiles' op_rules in lib/qconv/targets/target.cpp). A form is "float" (the op on
float tensors, nothing quantized around it), or a quantized type ("uint8", "int8", "uint16"):
the op between DequantizeLinear and QuantizeLinear of that type, as quantize_static writes it.
test_op_tables.py runs each probe of a table in its runtime: a new runtime version that changes
what it runs fails there, loudly."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SHAPE = [1, 8, 6, 6]
ZP = {"uint8": (TensorProto.UINT8, 128), "int8": (TensorProto.INT8, 0), "uint16": (TensorProto.UINT16, 32768)}


def _c(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def _op(op: str, x: str, y: str, variant: str) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """The op's node(s) from `x` to `y`, with the constants it needs."""
    c = SHAPE[1]
    rng = np.random.default_rng(0)
    if op == "BatchNormalization":
        inits = [_c("bn_s", rng.uniform(0.5, 1.5, c).astype(np.float32)), _c("bn_b", rng.uniform(-1, 1, c).astype(np.float32)),
                 _c("bn_m", rng.uniform(-1, 1, c).astype(np.float32)), _c("bn_v", rng.uniform(0.5, 2, c).astype(np.float32))]
        return [helper.make_node(op, [x, "bn_s", "bn_b", "bn_m", "bn_v"], [y])], inits
    if op == "LayerNormalization":
        inits = [_c("ln_s", rng.uniform(0.5, 1.5, SHAPE[-1]).astype(np.float32)),
                 _c("ln_b", rng.uniform(-1, 1, SHAPE[-1]).astype(np.float32))]
        return [helper.make_node(op, [x, "ln_s", "ln_b"], [y], axis=-1)], inits
    if op == "Clip" and variant == "computed bounds":  # min and max computed from the data
        return [helper.make_node("ReduceMin", [x], ["lo_all"], keepdims=0),
                helper.make_node("Mul", ["lo_all", "half"], ["lo"]),
                helper.make_node("ReduceMax", [x], ["hi_all"], keepdims=0),
                helper.make_node("Mul", ["hi_all", "half"], ["hi"]),
                helper.make_node("Clip", [x, "lo", "hi"], [y])], [_c("half", np.float32(0.5))]
    if op == "Clip":
        return [helper.make_node("Clip", [x, "lo", "hi"], [y])], [_c("lo", np.float32(-1)), _c("hi", np.float32(1))]
    if op == "LeakyRelu":
        return [helper.make_node(op, [x], [y], alpha=0.1)], []
    if op == "HardSigmoid":
        return [helper.make_node(op, [x], [y], alpha=1 / 6, beta=0.5)], []
    return [helper.make_node(op, [x], [y])], []


def model(op: str, form: str, variant: str = "") -> onnx.ModelProto:
    nodes, inits = _op(op, "xf" if form != "float" else "x", "yf" if form != "float" else "y", variant)
    if form != "float":
        t, zp = ZP[form]
        inits += [_c("s_in", np.float32(4 / 255)), _c("s_out", np.float32(4 / 255)),
                  numpy_helper.from_array(np.array(zp, dtype=helper.tensor_dtype_to_np_dtype(t)), "zp")]
        nodes = ([helper.make_node("QuantizeLinear", ["x", "s_in", "zp"], ["xq"]),
                  helper.make_node("DequantizeLinear", ["xq", "s_in", "zp"], ["xf"])] + nodes +
                 [helper.make_node("QuantizeLinear", ["yf", "s_out", "zp"], ["yq"]),
                  helper.make_node("DequantizeLinear", ["yq", "s_out", "zp"], ["y"])])
    g = helper.make_graph(nodes, f"{op}_{form}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    onnx.checker.check_model(m, full_check=True)
    return m


def feed() -> np.ndarray:
    return np.random.default_rng(1).uniform(-2, 2, SHAPE).astype(np.float32)
