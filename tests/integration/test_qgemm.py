"""com.microsoft QGemm -> DequantizeLinear -> Gemm -> QuantizeLinear with --format qdq, judged by
the reference (reference.QGemm, onnxruntime's contrib formula) on the original QGemm: the QDQ
output stays within one output quantization step of it and contains no com.microsoft op. With
--format qop the QGemm stays quantized, as it is. onnxruntime runs every output and agrees
(conftest.ort_agrees)."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import models
import reference
from conftest import judge_qop, op_counts, ort_agrees, output_step, run_qconv


def float_gemm_model() -> onnx.ModelProto:
    """x[4,32] -> Gemm(W1[16,32], transB=1, b1) -> Relu -> Gemm(W2[16,8], alpha 0.5, b2) -> y."""
    rng = np.random.default_rng(8)
    inits = [numpy_helper.from_array(rng.normal(0, 0.3, s).astype(np.float32), n)
             for n, s in [("w1", (16, 32)), ("b1", (16,)), ("w2", (16, 8)), ("b2", (8,))]]
    nodes = [helper.make_node("Gemm", ["input", "w1", "b1"], ["h"], name="gemm_1", transB=1),
             helper.make_node("Relu", ["h"], ["r"], name="relu_1"),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["output"], name="gemm_2", alpha=0.5)]
    g = helper.make_graph(nodes, "gemms", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [4, 32])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, [4, 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    return m


def inputs(count: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(0, 1, (4, 32)).astype(np.float32) for _ in range(count)]


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("activation", ["uint8", "int8"])
def test_qgemm_from_onnxruntime_qoperator(per_channel, activation, tmp_path):
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    fsrc, src = str(tmp_path / "float.onnx"), str(tmp_path / "qop_in.onnx")
    onnx.save(float_gemm_model(), fsrc)

    quantize_static(fsrc, src, models.calibration_reader(inputs(8, 1)), quant_format=QuantFormat.QOperator, per_channel=per_channel,
                    activation_type=QuantType.QInt8 if activation == "int8" else QuantType.QUInt8,
                    weight_type=QuantType.QInt8)
    assert op_counts(src).get("QGemm", 0) == 2
    xs = inputs(6, 2)
    for fmt in ("qdq", "qop"):
        dst = str(tmp_path / f"{fmt}.onnx")
        r = run_qconv("convert", src, dst, "--format", fmt)
        assert r.returncode == 0, r.stderr
        out = onnx.load(dst)
        if fmt == "qdq":
            assert not any(n.domain for n in out.graph.node)
            onnx.checker.check_model(out, full_check=True)
            assert op_counts(dst).get("Gemm", 0) == 2
        else:  # never dequantized: a QGemm stays one
            assert op_counts(dst).get("QGemm", 0) == 2 and op_counts(dst).get("Gemm", 0) == 0
        judge_qop(src, dst, xs)


def test_qgemm_alpha_per_column_bias_and_float_output(tmp_path):
    """A hand-written QGemm: alpha 0.5, transB, per-column b_scale, an int32 C at scale
    alpha*a_s*b_s, and no y_scale (float output). The lowered Gemm gives onnxruntime's QGemm
    numbers to float rounding."""
    rng = np.random.default_rng(4)
    a_s, b_s = np.float32(0.05), (rng.uniform(0.01, 0.03, 8)).astype(np.float32)
    inits = [numpy_helper.from_array(a_s, "a_s"), numpy_helper.from_array(np.uint8(128), "a_zp"),
             numpy_helper.from_array(rng.integers(-127, 128, (8, 32)).astype(np.int8), "b"),
             numpy_helper.from_array(b_s, "b_s"), numpy_helper.from_array(np.zeros(8, np.int8), "b_zp"),
             numpy_helper.from_array(rng.integers(-5000, 5000, 8).astype(np.int32), "c")]
    node = helper.make_node("QGemm", ["a", "a_s", "a_zp", "b", "b_s", "b_zp", "c"], ["y"], domain="com.microsoft",
                            name="qgemm_1", alpha=0.5, transB=1)
    g = helper.make_graph([node], "qgemm", [helper.make_tensor_value_info("a", TensorProto.UINT8, [4, 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 7
    src, dst = str(tmp_path / "qgemm.onnx"), str(tmp_path / "std.onnx")
    onnx.save(m, src)
    r = run_qconv("convert", src, dst, "--format", "qdq")
    assert r.returncode == 0, r.stderr
    assert op_counts(dst) == {"DequantizeLinear": 3, "Gemm": 1}
    xs = [rng.integers(0, 256, (4, 32)).astype(np.uint8) for _ in range(4)]
    want, got = reference.outputs(src, xs), reference.outputs(dst, xs)
    for w, g_ in zip(want, got):
        np.testing.assert_allclose(g_, w, rtol=1e-5, atol=1e-5 * float(np.max(np.abs(w))))
    ort_agrees(dst, xs, 1e-5 * max(float(np.max(np.abs(w))) for w in want), got)


def test_qgemm_that_cannot_be_lowered_stays_and_says_why(tmp_path):
    """A b_scale that is not constant and of unknown shape: QGemm stays com.microsoft (onnxruntime
    runs it), with the reason."""
    m = onnx.helper.make_model(helper.make_graph(
        [helper.make_node("QGemm", ["a", "a_s", "a_zp", "b", "b_s", "b_zp"], ["y"], domain="com.microsoft", name="qg")],
        "qgemm", [helper.make_tensor_value_info("a", TensorProto.UINT8, [2, 4]),
                  helper.make_tensor_value_info("b_s", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(np.float32(0.1), "a_s"), numpy_helper.from_array(np.uint8(0), "a_zp"),
         numpy_helper.from_array(np.ones((4, 3), np.int8), "b"), numpy_helper.from_array(np.int8(0), "b_zp")]),
        opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 7
    src, dst = str(tmp_path / "qgemm.onnx"), str(tmp_path / "out.onnx")
    onnx.save(m, src)
    r = run_qconv("convert", src, dst, "--format", "qdq", "-v")
    assert r.returncode == 0, r.stderr
    assert "qg: stays com.microsoft QGemm: the scale of B is neither constant nor known to be a scalar" in r.stderr
    assert op_counts(dst) == {"QGemm": 1}
