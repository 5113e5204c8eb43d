"""Float test models and their quantization by onnxruntime.quantization.

Every model is built with pinned opset (13) and IR version (7), so Debian's ONNX 1.12
checker can judge qconv's output too. Weights and calibration data are generated from fixed
seeds: nothing is downloaded.
"""
from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13
IR_VERSION = 7


class _Builder:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def name(self, base: str) -> str:
        self.count += 1
        return f"{base}_{self.count}"

    def init(self, base: str, array: np.ndarray) -> str:
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(array.astype(np.float32), n))
        return n

    def conv(self, x: str, cin: int, cout: int, k: int = 3, stride: int = 1, group: int = 1,
             dilation: int = 1, relu: bool = True, bias: bool = True, pad: int | None = None) -> str:
        fan_in = cin // group * k * k
        w = self.init("w", self.rng.normal(0, np.sqrt(2.0 / fan_in), (cout, cin // group, k, k)))
        inputs = [x, w]
        if bias:
            inputs.append(self.init("b", self.rng.normal(0, 0.1, (cout,))))
        y = self.name("conv_out")
        p = (k // 2) * dilation if pad is None else pad
        self.nodes.append(helper.make_node(
            "Conv", inputs, [y], name=self.name("conv"), kernel_shape=[k, k], strides=[stride, stride],
            pads=[p, p, p, p], group=group, dilations=[dilation, dilation]))
        if relu:
            r = self.name("relu_out")
            self.nodes.append(helper.make_node("Relu", [y], [r], name=self.name("relu")))
            return r
        return y

    def op(self, op_type: str, inputs: list[str], **attrs) -> str:
        y = self.name(op_type.lower() + "_out")
        self.nodes.append(helper.make_node(op_type, inputs, [y], name=self.name(op_type.lower()), **attrs))
        return y

    def model(self, name: str, inp: str, in_shape: list[int], out: str,
              out_shape: list) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info(inp, TensorProto.FLOAT, in_shape)],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)],
            self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="qconv-tests")
        m.ir_version = IR_VERSION
        onnx.checker.check_model(m)
        return m


def wide_matmuls(k: int, n: int, branches: int, seed: int = 5, w_scale: float = 0.01,
                 io_dims: tuple[int, int] | None = None) -> onnx.ModelProto:
    """`branches` MatMuls of one uint8 input by int8 [k, n] weights, QDQ (per tensor, opset 13): u8
    activations x s8 weights, which the saturation check reads in place. `io_dims` declares the
    input and outputs as [1, K] and [1, N] other than [1, k] and [1, n]."""
    rng = np.random.default_rng(seed)
    in_k, out_n = io_dims or (k, n)
    scalar = lambda name, v, t: helper.make_tensor(name, t, [], [v])  # noqa: E731
    inits = [scalar("sx", 2 / 255, TensorProto.FLOAT), scalar("zx", 128, TensorProto.UINT8),
             scalar("sw", w_scale, TensorProto.FLOAT), scalar("zw", 0, TensorProto.INT8),
             scalar("sy", 40 / 255, TensorProto.FLOAT), scalar("zy", 128, TensorProto.UINT8)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"], name="qx"),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"], name="dqx")]
    outs = []
    for i in range(branches):
        inits.append(numpy_helper.from_array(rng.integers(-127, 128, (k, n), dtype=np.int8), f"w{i}"))
        nodes += [helper.make_node("DequantizeLinear", [f"w{i}", "sw", "zw"], [f"wd{i}"], name=f"dqw{i}"),
                  helper.make_node("MatMul", ["xd", f"wd{i}"], [f"acc{i}"], name=f"matmul{i}"),
                  helper.make_node("QuantizeLinear", [f"acc{i}", "sy", "zy"], [f"yq{i}"], name=f"qy{i}"),
                  helper.make_node("DequantizeLinear", [f"yq{i}", "sy", "zy"], [f"y{i}"], name=f"dqy{i}")]
        outs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [1, out_n]))
    g = helper.make_graph(nodes, "wide_matmul", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, in_k])],
                          outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    return m


def small_cnn() -> onnx.ModelProto:
    b = _Builder(1)
    x = b.conv("input", 3, 8)
    x = b.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = b.conv(x, 8, 16, stride=2)
    x = b.conv(x, 16, 16, k=1, relu=False, bias=False)
    x = b.op("GlobalAveragePool", [x])
    return b.model("small_cnn", "input", [1, 3, 32, 32], x, [1, 16, 1, 1])


def resnet_style() -> onnx.ModelProto:
    b = _Builder(2)
    x = b.conv("input", 3, 16, stride=2)
    for _ in range(2):
        y = b.conv(x, 16, 16)
        y = b.conv(y, 16, 16, relu=False)
        x = b.op("Relu", [b.op("Add", [x, y])])
    y = b.conv(x, 16, 32, stride=2)
    y = b.conv(y, 32, 32, relu=False)
    short = b.conv(x, 16, 32, k=1, stride=2, relu=False)
    x = b.op("Relu", [b.op("Add", [short, y])])
    x = b.op("GlobalAveragePool", [x])
    return b.model("resnet_style", "input", [1, 3, 32, 32], x, [1, 32, 1, 1])


def mobilenet_style() -> onnx.ModelProto:
    b = _Builder(3)
    x = b.conv("input", 3, 16, stride=2)
    for cin, cout, stride in [(16, 24, 1), (24, 32, 2), (32, 32, 1)]:
        x = b.conv(x, cin, cin, group=cin, stride=stride)         # depthwise 3x3
        x = b.conv(x, cin, cout, k=1, relu=False)                 # pointwise linear
    x = b.conv(x, 32, 32, dilation=2)                             # dilated
    x = b.op("GlobalAveragePool", [x])
    return b.model("mobilenet_style", "input", [1, 3, 32, 32], x, [1, 32, 1, 1])


def mlp() -> onnx.ModelProto:
    b = _Builder(4)
    x = "input"
    for i, (k, n) in enumerate([(64, 128), (128, 64), (64, 10)]):
        w = b.init("w", b.rng.normal(0, np.sqrt(2.0 / k), (k, n)))
        bias = b.init("b", b.rng.normal(0, 0.1, (n,)))
        x = b.op("Add", [b.op("MatMul", [x, w]), bias])
        if i < 2:
            x = b.op("Relu", [x])
    return b.model("mlp", "input", [4, 64], x, [4, 10])


def cnn() -> onnx.ModelProto:
    """The CNN of the --target tests (issue 27): Conv, Relu, MaxPool, GlobalAveragePool, Gemm."""
    b = _Builder(21)
    x = b.conv("input", 3, 8)
    x = b.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = b.conv(x, 8, 16, stride=2)
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])])
    x = b.op("Gemm", [x, b.init("wg", b.rng.normal(0, 0.3, (10, 16))), b.init("bg", b.rng.normal(0, 0.1, (10,)))],
             transB=1)
    return b.model("cnn", "input", [1, 3, 16, 16], x, [1, 10])


FLOAT_MODELS = {
    "small_cnn": small_cnn,
    "resnet_style": resnet_style,
    "mobilenet_style": mobilenet_style,
    "mlp": mlp,
}

# How many Conv / MatMul each float model has: all of them must be fused.
TARGET_COUNTS = {
    "small_cnn": ("Conv", 3),
    "resnet_style": ("Conv", 8),
    "mobilenet_style": ("Conv", 8),
    "mlp": ("MatMul", 3),
}


def input_shape(model: onnx.ModelProto) -> list[int]:
    return [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]


def sample_inputs(model: onnx.ModelProto, count: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    shape = input_shape(model)
    return [rng.normal(0, 1, shape).astype(np.float32) for _ in range(count)]


def calibration_reader(inputs: list[np.ndarray], name: str = "input"):
    """An onnxruntime CalibrationDataReader over `inputs` for the graph input `name`."""
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.data = iter([{name: x} for x in inputs])

        def get_next(self):
            return next(self.data, None)

    return Reader()


def quantize_static(float_model: onnx.ModelProto, path: str, *, fmt: str, per_channel: bool, activation: str,
                    work_dir: str, symmetric: bool = False) -> None:
    """onnxruntime's quantize_static in `fmt` ("qdq" or "qop"), calibrated on generated data; int8
    weights; with `symmetric`, activations symmetric (uint8 at zero point 128, int8 at 0)."""
    from onnxruntime.quantization import QuantFormat, QuantType
    from onnxruntime.quantization import quantize_static as ort_quantize_static

    src = os.path.join(work_dir, f"float_{float_model.graph.name}.onnx")
    onnx.save(float_model, src)
    ort_quantize_static(
        src, path, calibration_reader(sample_inputs(float_model, 16, seed=123), float_model.graph.input[0].name),
        quant_format=QuantFormat.QDQ if fmt == "qdq" else QuantFormat.QOperator, per_channel=per_channel,
        activation_type=QuantType.QUInt8 if activation == "uint8" else QuantType.QInt8,
        weight_type=QuantType.QInt8, extra_options={"ActivationSymmetric": symmetric})


def quantize_qdq(float_model: onnx.ModelProto, path: str, *, per_channel: bool, activation: str,
                 work_dir: str) -> None:
    """quantize_static in QDQ format."""
    quantize_static(float_model, path, fmt="qdq", per_channel=per_channel, activation=activation, work_dir=work_dir)


# ---- QOperator inputs (issue 14): what onnxruntime's quantize_static writes in QOperator form ----

def contrib_zoo() -> onnx.ModelProto:
    """A model whose QOperator form brings each contrib op onnxruntime writes: Conv, a residual
    Add, SiLU (Sigmoid * Mul), Concat, GlobalAveragePool, Flatten (data movement on uint8), Add,
    Gemm (QGemm) and Softmax."""
    b = _Builder(11)
    c1 = b.conv("input", 3, 8)
    c2 = b.conv(c1, 8, 8, relu=False)
    res = b.op("Add", [c2, c1])
    silu = b.op("Mul", [res, b.op("Sigmoid", [res])])
    c3 = b.conv(silu, 8, 8, k=1, relu=False, bias=False)
    cat = b.op("Concat", [silu, c3], axis=1)
    flat = b.op("Flatten", [b.op("GlobalAveragePool", [cat])])
    shifted = b.op("Add", [flat, b.init("shift", b.rng.normal(0, 0.1, (1, 16)))])
    logits = b.op("Gemm", [shifted, b.init("wg", b.rng.normal(0, 0.3, (10, 16))), b.init("bg", b.rng.normal(0, 0.1, (10,)))],
                  transB=1)
    return b.model("contrib_zoo", "input", [1, 3, 8, 8], b.op("Softmax", [logits], axis=-1), [1, 10])


def contrib_zoo2() -> onnx.ModelProto:
    """LeakyRelu, AveragePool and MaxPool (on uint8) between QLinearConvs, and a QLinearMatMul."""
    b = _Builder(12)
    c1 = b.conv("input", 3, 8, relu=False)
    x = b.op("LeakyRelu", [c1], alpha=0.1)
    x = b.op("AveragePool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = b.conv(x, 8, 8)
    x = b.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = b.op("MatMul", [x, b.init("wm", b.rng.normal(0, 0.3, (2, 5)))])
    return b.model("contrib_zoo2", "input", [1, 3, 8, 8], x, [1, 8, 2, 5])


QOP_MODELS = {"contrib_zoo": contrib_zoo, "contrib_zoo2": contrib_zoo2, **FLOAT_MODELS}


def quantize_qop(float_model: onnx.ModelProto, path: str, *, per_channel: bool, activation: str,
                 work_dir: str, symmetric: bool = False) -> None:
    """quantize_static in QOperator format."""
    quantize_static(float_model, path, fmt="qop", per_channel=per_channel, activation=activation, work_dir=work_dir,
                    symmetric=symmetric)


def quantize_dyn(float_model: onnx.ModelProto, path: str, work_dir: str, per_channel: bool = False) -> None:
    """quantize_dynamic: DynamicQuantizeLinear, ConvInteger / MatMulInteger and their scale chains."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    src = os.path.join(work_dir, f"float_{float_model.graph.name}.onnx")
    onnx.save(float_model, src)
    quantize_dynamic(src, path, weight_type=QuantType.QUInt8, per_channel=per_channel)
