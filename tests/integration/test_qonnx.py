"""QONNX Quant -> standard QDQ. onnxruntime cannot run Quant, so the judge is a twin built
from QONNX's documented formula with standard float ops,
    y = (round(clamp(x / s + z, min, max)) - z) * s        (np.round: ties to even)
run in onnxruntime. --format qdq must give the twin's values exactly (every element equal; the
only bits that may differ are the sign of a zero: QONNX's float round keeps -0.0, integers have
no signed zero); --format qop must fuse every Conv and stay within one step of onnxruntime's
own fusion of qconv's QDQ output."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import reference
from conftest import executed, judge_qop, op_counts, run_qconv


def assert_same_values(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    for x, y in zip(a, b):
        assert x.shape == y.shape and x.dtype == y.dtype
        assert np.array_equal(x, y)                      # every element equal (-0.0 == 0.0)
        differ = x.view(np.uint32) != y.view(np.uint32)
        assert np.all(x[differ] == 0)                    # and where bits differ, it is a signed zero

DOMAIN = "qonnx.custom_op.general"


def bounds(bits: int, signed: bool, narrow: bool) -> tuple[int, int]:
    if signed:
        return -(2 ** (bits - 1)) + int(narrow), 2 ** (bits - 1) - 1
    return 0, 2 ** bits - 1 - int(narrow)


def build(domain: str, twin: bool) -> onnx.ModelProto:
    """x -Quant(8b signed)-> Conv(w: Quant 4b signed narrow, per channel) -> Relu -Quant(8b unsigned)->
    Conv(w: Quant 8b per tensor) -Quant(6b unsigned narrow)-> y. As QONNX ops, or as their float twin."""
    rng = np.random.default_rng(17)
    nodes, inits = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr, np.float32), name))
        return name

    def quant(x, y, scale, bits, signed, narrow):
        s = const(y + "_s", scale)
        z = const(y + "_z", np.zeros_like(np.asarray(scale, np.float32)) if np.ndim(scale) == 0 else 0.0)
        if not twin:
            b = const(y + "_bits", float(bits))
            nodes.append(helper.make_node("Quant", [x, s, z, b], [y], domain=domain, name=y + "_quant",
                                          signed=int(signed), narrow=int(narrow), rounding_mode="ROUND"))
            return y
        lo, hi = bounds(bits, signed, narrow)
        nodes.extend([
            helper.make_node("Div", [x, s], [y + "_d"]),
            helper.make_node("Add", [y + "_d", z], [y + "_a"]),
            helper.make_node("Clip", [y + "_a", const(y + "_lo", float(lo)), const(y + "_hi", float(hi))], [y + "_c"]),
            helper.make_node("Round", [y + "_c"], [y + "_r"]),
            helper.make_node("Sub", [y + "_r", z], [y + "_u"]),
            helper.make_node("Mul", [y + "_u", s], [y]),
        ])
        return y

    x = quant("input", "xq", 0.03, 8, True, False)
    w1 = quant(const("w1", rng.normal(0, 0.3, (8, 3, 3, 3))), "w1q", rng.uniform(0.05, 0.1, (8, 1, 1, 1)), 4, True, True)
    nodes.append(helper.make_node("Conv", [x, w1], ["c1"], name="conv_1", pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Relu", ["c1"], ["r1"]))
    a1 = quant("r1", "a1q", 0.02, 8, False, False)
    w2 = quant(const("w2", rng.normal(0, 0.2, (4, 8, 1, 1))), "w2q", 0.004, 8, True, False)
    nodes.append(helper.make_node("Conv", [a1, w2], ["c2"], name="conv_2"))
    quant("c2", "output", 0.05, 6, False, True)
    graph = helper.make_graph(nodes, "qonnx_cnn", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4, 8, 8])], inits)
    opsets = [helper.make_opsetid("", 13)] + ([] if twin else [helper.make_opsetid(domain, 1)])
    m = helper.make_model(graph, opset_imports=opsets)
    m.ir_version = 7
    return m


@pytest.mark.parametrize("domain", [DOMAIN, "onnx.brevitas", "finn.custom_op.general"])
def test_qonnx_quant_lowers_exactly(domain, tmp_path):
    src, twin = str(tmp_path / "qonnx.onnx"), str(tmp_path / "twin.onnx")
    onnx.save(build(domain, twin=False), src)
    onnx.save(build(domain, twin=True), twin)
    rng = np.random.default_rng(3)
    xs = [rng.normal(0, 2, (1, 3, 8, 8)).astype(np.float32) for _ in range(6)]
    xs.append((np.round(rng.normal(0, 40, (1, 3, 8, 8))) * 0.015).astype(np.float32))  # x / s on ties

    qdq = str(tmp_path / "qdq.onnx")
    r = run_qconv("convert", src, qdq, "--format", "qdq")
    assert r.returncode == 0, r.stderr
    counts = op_counts(qdq)
    assert counts.get("Quant", 0) == 0
    assert counts["QuantizeLinear"] == 3  # activations; the weight quantizers folded into initializers
    onnx.checker.check_model(onnx.load(qdq), full_check=True)
    assert_same_values(reference.outputs(twin, xs), executed(qdq, xs))

    qop = str(tmp_path / "qop.onnx")
    r = run_qconv("convert", src, qop, "--format", "qop", "-v")
    assert r.returncode == 0, r.stderr
    # conv_1 reads int8 and its Relu output is quantized to uint8: onnxruntime has no kernel
    # for that, so x is stored as uint8, its zero points moved by 128 (the same tensor, issue 36:
    # it stayed QDQ before); conv_2 (uint8 -> uint8) fuses, and the integer Clip that keeps its
    # 6-bit narrow range [0, 62] stays after it
    assert op_counts(qop).get("QLinearConv", 0) == 2
    assert "conv_1: x stored as uint8 (its zero points moved by 128)" in r.stderr
    assert [n.op_type for n in onnx.load(qop).graph.node][-2:] == ["Clip", "DequantizeLinear"]
    judge_qop(qdq, qop, xs, step=0.05)


def test_qonnx_twin_matches_qonnx_own_executor(tmp_path):
    """The twin is the formula; check it against the producer's own numpy executor too."""
    qonnx = pytest.importorskip("qonnx.core.onnx_exec")
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.infer_shapes import InferShapes
    m = ModelWrapper(build(DOMAIN, twin=False)).transform(InferShapes())
    twin = str(tmp_path / "twin.onnx")
    onnx.save(build(DOMAIN, twin=True), twin)
    x = np.random.default_rng(5).normal(0, 2, (1, 3, 8, 8)).astype(np.float32)
    want = qonnx.execute_onnx(m, {"input": x})["output"]
    got = reference.outputs(twin, [x])[0]
    assert np.allclose(want, got, atol=1e-6)


MODES = ["ROUND", "HALF_EVEN", "CEIL", "FLOOR", "UP", "DOWN", "HALF_UP", "HALF_DOWN"]


def single_quant(bits: float, signed: bool, narrow: bool, mode: str, zp: float) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.array(v, np.float32), n)
             for n, v in [("s", 0.25), ("z", zp), ("bits", bits)]]
    node = helper.make_node("Quant", ["x", "s", "z", "bits"], ["y"], domain=DOMAIN, name="quant_1",
                            signed=int(signed), narrow=int(narrow), rounding_mode=mode)
    g = helper.make_graph([node], "q", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 64])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(DOMAIN, 1)])
    m.ir_version = 7
    return m


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("bits,signed,narrow,zp", [(8, True, False, 0.0), (4, False, True, 3.0), (12, True, True, -5.0),
                                                    (1, True, False, 0.0)],
                         ids=["8b-signed", "4b-unsigned-narrow-zp3", "12b-signed-narrow-zp-5", "1b-bipolar"])
def test_every_quant_matches_qonnx_executor(mode, bits, signed, narrow, zp, tmp_path):
    """Whatever form qconv picks (Q/DQ or float emulation), onnxruntime running it gives QONNX's
    own executor's numbers."""
    qonnx_exec = pytest.importorskip("qonnx.core.onnx_exec")
    from qonnx.core.modelwrapper import ModelWrapper
    m = single_quant(bits, signed, narrow, mode, zp)
    src, dst = str(tmp_path / "q.onnx"), str(tmp_path / "std.onnx")
    onnx.save(m, src)
    r = run_qconv("convert", src, dst, "--format", "qdq", "-v")
    assert r.returncode == 0, r.stderr
    out = onnx.load(dst)
    assert not any(n.domain for n in out.graph.node)  # standard ONNX only
    onnx.checker.check_model(out, full_check=True)
    qdq_form = mode in ("ROUND", "HALF_EVEN") and zp == 0 and 2 <= bits <= 8
    assert any(n.op_type == "QuantizeLinear" for n in out.graph.node) == qdq_form
    if not qdq_form:
        assert "quant_1: qonnx.custom_op.general::Quant emulated exactly with float ops" in r.stderr
    rng = np.random.default_rng(int(bits) * 31 + len(mode))
    xs = [rng.normal(0, 30, (4, 64)).astype(np.float32),
          ((np.round(rng.normal(0, 200, (4, 64))) + 0.5) * 0.25).astype(np.float32) * np.float32(1.0),  # ties
          (np.round(rng.normal(0, 200, (4, 64))) * 0.125).astype(np.float32)]                     # ties and integers
    got = executed(dst, xs)
    for x, g in zip(xs, got):
        want = qonnx_exec.execute_onnx(ModelWrapper(m), {"x": x})["y"]
        assert_same_values([want.astype(np.float32)], [g])


@pytest.mark.parametrize("domain", [DOMAIN, "onnx.brevitas"])
def test_bipolar_quant_matches_qonnx_executor(domain, tmp_path):
    qonnx_exec = pytest.importorskip("qonnx.core.onnx_exec")
    from qonnx.core.modelwrapper import ModelWrapper
    inits = [numpy_helper.from_array(np.array([[0.5], [2.0], [0.25], [1.0]], np.float32), "s")]
    node = helper.make_node("BipolarQuant", ["x", "s"], ["y"], domain=domain, name="bipolar_1")
    g = helper.make_graph([node], "b", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(domain, 1)])
    m.ir_version = 7
    src, dst = str(tmp_path / "b.onnx"), str(tmp_path / "std.onnx")
    onnx.save(m, src)
    r = run_qconv("convert", src, dst, "--format", "qdq", "-v")
    assert r.returncode == 0, r.stderr
    assert "bipolar_1: " + domain + "::BipolarQuant emulated exactly with float ops" in r.stderr
    assert not any(n.domain for n in onnx.load(dst).graph.node)
    x = np.random.default_rng(2).normal(0, 1, (4, 16)).astype(np.float32)
    x[0, :4] = [0.0, -0.0, 1e-30, -1e-30]  # the edges of x >= 0
    want = qonnx_exec.execute_onnx(ModelWrapper(m), {"x": x})["y"]
    got = executed(dst, [x])[0]
    assert np.array_equal(want.view(np.uint32), got.view(np.uint32))  # bit for bit


def test_quant_neither_form_can_say_is_refused(tmp_path):
    """A bit width over 24: no Q/DQ form and no exact float emulation. qconv refuses the model
    (exit 4), naming the node and the requirement, and writes nothing."""
    src, dst = str(tmp_path / "q.onnx"), str(tmp_path / "out.onnx")
    onnx.save(single_quant(30, True, False, "ROUND", 0.0), src)
    for fmt in ("qdq", "qop"):
        r = run_qconv("convert", src, dst, "--format", fmt)
        assert r.returncode == 4
        assert [line for line in r.stderr.splitlines() if "error" in line] == [
            f"qconv: error: {src}: quant_1: qonnx.custom_op.general::Quant not converted: bit width is not a constant "
            "integer from 1 to 24"]
        assert not (tmp_path / "out.onnx").exists()
