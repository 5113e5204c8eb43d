"""Data movement on int8 in --format qop (issue 15, deliverable 2): MaxPool, Reshape, Flatten,
Transpose, Concat, Resize (nearest), ... between a DequantizeLinear and a QuantizeLinear of the
same parameters run on the 8-bit tensor itself (move-on-int8), with no float island; the
numbers are judged by the reference (conftest.judge_qop), and onnxruntime runs the output."""
import collections

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import models
from conftest import judge_qop, op_counts, ort_agrees, output_step, run_qconv

MOVERS = {"MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Slice", "Gather", "Split",
          "Concat", "Pad", "Resize", "DepthToSpace", "SpaceToDepth", "Identity", "Tile", "Expand"}


def resnet_head() -> onnx.ModelProto:
    """Conv -> MaxPool -> Conv -> residual Add -> GAP -> Flatten -> Gemm."""
    b = models._Builder(31)
    x = b.conv("input", 3, 8)
    x = b.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    y = b.conv(x, 8, 8, relu=False)
    x = b.op("Relu", [b.op("Add", [x, y])])
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])])
    x = b.op("Gemm", [x, b.init("wg", b.rng.normal(0, 0.3, (10, 8))), b.init("bg", b.rng.normal(0, 0.1, (10,)))], transB=1)
    return b.model("resnet_head", "input", [1, 3, 16, 16], x, [1, 10])


def transformer_block() -> onnx.ModelProto:
    """q, k, v = x W; heads by Reshape/Transpose; softmax(q k^T) v; back by Transpose/Reshape; W_o."""
    b = models._Builder(32)
    shape = b.init("shape4", np.array([1, 6, 2, 4]))
    b.inits[-1] = onnx.numpy_helper.from_array(np.array([1, 6, 2, 4], np.int64), shape)
    back = b.init("shape3", np.array([1, 6, 8]))
    b.inits[-1] = onnx.numpy_helper.from_array(np.array([1, 6, 8], np.int64), back)

    def heads(t):
        return b.op("Transpose", [b.op("Reshape", [t, shape])], perm=[0, 2, 1, 3])

    x = "input"
    q, k, v = (heads(b.op("MatMul", [x, b.init(f"w{c}", b.rng.normal(0, 0.3, (8, 8)))])) for c in "qkv")
    kt = b.op("Transpose", [k], perm=[0, 1, 3, 2])
    att = b.op("Softmax", [b.op("MatMul", [q, kt])], axis=-1)
    o = b.op("Reshape", [b.op("Transpose", [b.op("MatMul", [att, v])], perm=[0, 2, 1, 3]), back])
    y = b.op("MatMul", [o, b.init("wo", b.rng.normal(0, 0.3, (8, 8)))])
    return b.model("transformer_block", "input", [1, 6, 8], y, [1, 6, 8])


def unet() -> onnx.ModelProto:
    """Conv -> MaxPool -> Conv -> Resize(nearest, x2) and ConvTranspose(x2) -> Concat with the skip -> Conv."""
    b = models._Builder(33)
    skip = b.conv("input", 3, 8)
    x = b.conv(b.op("MaxPool", [skip], kernel_shape=[2, 2], strides=[2, 2]), 8, 8)
    scales = b.init("scales", np.array([1, 1, 2, 2]))
    up = b.op("Resize", [x, "", scales], mode="nearest")
    deconv = b.op("ConvTranspose", [x, b.init("wt", b.rng.normal(0, 0.3, (8, 4, 2, 2))), b.init("bt", b.rng.normal(0, 0.1, (4,)))],
                  strides=[2, 2])
    x = b.op("Concat", [up, deconv, skip], axis=1)
    x = b.conv(x, 20, 4, relu=False)
    return b.model("unet", "input", [1, 3, 16, 16], x, [1, 4, 16, 16])


MODELS = {"resnet_head": resnet_head, "transformer_block": transformer_block, "unet": unet}
SCHEMES = [(True, "uint8"), (False, "int8")]  # u8s8 per-channel, s8s8 per-tensor


def links(path: str):
    """The graph of `path`, each value's producer and each value's readers."""
    g = onnx.load(path).graph
    producer = {o: n for n in g.node for o in n.output}
    readers = collections.defaultdict(list)
    for n in g.node:
        for i in n.input:
            readers[i].append(n)
    return g, producer, readers


def float_islands(path: str) -> list[str]:
    """Data-movement ops still between a DequantizeLinear and a QuantizeLinear of the same tensor type."""
    g, producer, readers = links(path)
    out = []
    for n in g.node:
        if n.op_type in MOVERS and n.input and n.input[0] in producer and producer[n.input[0]].op_type == "DequantizeLinear":
            if all(r.op_type == "QuantizeLinear" for r in readers[n.output[0]]) and readers[n.output[0]]:
                out.append(n.name)
    return out


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("per_channel,activation", SCHEMES)
def test_data_movement_runs_on_int8(name, per_channel, activation, tmp_path):
    src, dst = str(tmp_path / "qdq.onnx"), str(tmp_path / "qop.onnx")
    float_model = MODELS[name]()
    models.quantize_qdq(float_model, src, per_channel=per_channel, activation=activation, work_dir=str(tmp_path))
    before = op_counts(src)
    r = run_qconv("convert", src, dst, "--format", "qop", "-v")
    assert r.returncode == 0, r.stderr
    after = op_counts(dst)
    assert float_islands(src), "the QDQ input has float islands to remove"
    assert float_islands(dst) == []
    for op in ("Conv", "MatMul", "Gemm"):
        assert after.get(op, 0) == 0, f"{op} left: {r.stderr}"
    onnx.checker.check_model(onnx.load(dst), full_check=True)
    print(name, per_channel, activation, dict(before), "->", dict(after))
    xs = models.sample_inputs(float_model, 4, seed=41)
    judge_qop(src, dst, xs)
    if activation == "uint8":  # u8 x s8: uint8 weights make onnxruntime exact on any x86 host
        exact = str(tmp_path / "qop_u8.onnx")
        assert run_qconv("convert", src, exact, "--format", "qop", "--weight-type", "uint8").returncode == 0
        judge_qop(src, exact, xs)
        assert ort_agrees(exact, xs, output_step(src)) == "exact"


def test_a_mover_between_other_parameters_keeps_one_requantization(tmp_path):
    """DQ(s1) -> Reshape -> Q(s2): Reshape on the integers, then DQ(s1) -> Q(s2)."""
    inits = [onnx.numpy_helper.from_array(np.float32(v), n) for n, v in (("s1", 0.5), ("s2", 0.25))]
    inits += [onnx.numpy_helper.from_array(np.uint8(128), "z"), onnx.numpy_helper.from_array(np.array([4], np.int64), "shape")]
    nodes = [helper.make_node("DequantizeLinear", ["x", "s1", "z"], ["xf"], name="dq"),
             helper.make_node("Reshape", ["xf", "shape"], ["r"], name="reshape"),
             helper.make_node("QuantizeLinear", ["r", "s2", "z"], ["y"], name="q")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.UINT8, [2, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, [4])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    src, dst = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    onnx.save(m, src)
    assert run_qconv("convert", src, dst, "--format", "qop").returncode == 0
    out = onnx.load(dst).graph
    assert [n.op_type for n in out.node] == ["Reshape", "DequantizeLinear", "QuantizeLinear"]
    assert out.node[0].input[0] == "x"
    import reference
    xs = [np.arange(4, dtype=np.uint8).reshape(2, 2) * 60]
    assert np.array_equal(reference.outputs(src, xs)[0], reference.outputs(dst, xs)[0])


def left_in_qdq_form(path: str) -> list[onnx.NodeProto]:
    """Default-domain ops with an input from a DequantizeLinear and an output read by a QuantizeLinear."""
    g, producer, readers = links(path)
    return [n for n in g.node if not n.domain and n.op_type not in ("QuantizeLinear", "DequantizeLinear")
            and any(i in producer and producer[i].op_type == "DequantizeLinear" for i in n.input)
            and any(r.op_type == "QuantizeLinear" for o in n.output for r in readers[o])]


@pytest.mark.parametrize("name", ["resnet_head", "transformer_block", "unet", "contrib_zoo"])
def test_nothing_is_left_in_qdq_form_silently(name, tmp_path):
    """Issue 15, deliverable 4: every op left between DQ and Q is named with its reason, and the
    summary counts them per op type."""
    src, dst = str(tmp_path / "qdq.onnx"), str(tmp_path / "qop.onnx")
    float_model = {**MODELS, "contrib_zoo": models.contrib_zoo}[name]()
    models.quantize_qdq(float_model, src, per_channel=True, activation="uint8", work_dir=str(tmp_path))
    r = run_qconv("convert", src, dst, "--format", "qop", "--no-saturation-check", "-v")
    assert r.returncode == 0, r.stderr
    left = left_in_qdq_form(dst)
    assert left, "the test models keep ops standard ONNX cannot quantize"
    for n in left:
        assert f"qconv: note: {src}: {n.name}: " in r.stderr, f"{n.name} ({n.op_type}) is left silently"
    summary = r.stderr.strip().splitlines()[-1]
    for op, count in collections.Counter(n.op_type for n in left).items():
        assert f"{count} {op} left in QDQ form" in summary
