"""Gemm in --format qop (issue 15): a quantized Gemm becomes a 1x1 QLinearConv between int8
Unsqueeze and Squeeze (gemm-as-conv, then fuse-qlinear-conv), its bias int32 at x_s*w_s; alpha,
beta, transA, transB, a bias C and per-column weights honoured. Judged by the reference: within
one step of the QDQ input (conftest.judge_qop); onnxruntime runs it and agrees."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import models
import test_qgemm
from conftest import judge_qop, op_counts, run_qconv


def gemm_variants(c_shape=(1, 5)) -> onnx.ModelProto:
    """x[6,8] -> Gemm(transA, W1[5,6] transB, C, beta 0.5) -> [8,5] -> Gemm(W2[5,4], no C) -> y[8,4]."""
    rng = np.random.default_rng(15)
    inits = [numpy_helper.from_array(rng.normal(0, 0.3, s).astype(np.float32), n)
             for n, s in [("w1", (5, 6)), ("c1", c_shape), ("w2", (5, 4))]]
    nodes = [helper.make_node("Gemm", ["input", "w1", "c1"], ["h"], name="gemm_ta", transA=1, transB=1, beta=0.5),
             helper.make_node("Gemm", ["h", "w2"], ["output"], name="gemm_nobias")]
    g = helper.make_graph(nodes, "gemms", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [6, 8])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, [8, 4])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    return m


MODELS = {"alpha_transB_relu": test_qgemm.float_gemm_model, "transA_beta_no_bias": gemm_variants}


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("activation", ["uint8", "int8"])
def test_gemm_becomes_qlinearconv(name, per_channel, activation, tmp_path):
    src, dst = str(tmp_path / "qdq.onnx"), str(tmp_path / "qop.onnx")
    # onnxruntime's per-channel quantizer fails on a C of shape [1, N]: give it [N]
    float_model = gemm_variants((5,)) if name == "transA_beta_no_bias" and per_channel else MODELS[name]()
    models.quantize_qdq(float_model, src, per_channel=per_channel, activation=activation, work_dir=str(tmp_path))
    gemms = op_counts(src).get("Gemm", 0)
    assert gemms == 2
    r = run_qconv("convert", src, dst, "--format", "qop", "-v")
    assert r.returncode == 0, r.stderr
    assert "not fused" not in r.stderr
    counts = op_counts(dst)
    assert counts.get("Gemm", 0) == 0 and counts.get("QLinearConv", 0) == gemms
    onnx.checker.check_model(onnx.load(dst), full_check=True)
    xs = models.sample_inputs(float_model, 6, seed=21)
    judge_qop(src, dst, xs)


def test_a_gemm_whose_bias_is_not_per_column_stays_and_says_why(tmp_path):
    """C of shape [M, N] is not a per-channel bias: the Gemm stays QDQ, named."""
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.normal(0, 0.3, (4, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.normal(0, 0.1, (2, 3)).astype(np.float32), "c")]
    g = helper.make_graph([helper.make_node("Gemm", ["input", "w", "c"], ["output"], name="gemm_mn")], "g",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, [2, 3])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    src, dst = str(tmp_path / "qdq.onnx"), str(tmp_path / "qop.onnx")
    models.quantize_qdq(m, src, per_channel=False, activation="uint8", work_dir=str(tmp_path))
    r = run_qconv("convert", src, dst, "--format", "qop", "-v")
    assert r.returncode == 0, r.stderr
    assert "gemm_mn: not fused: C is " in r.stderr
    assert op_counts(dst).get("Gemm") == 1
