"""--contrib (issue 15, deliverable 3): with --format qop --contrib, the groups standard ONNX has
no quantized op for become onnxruntime's com.microsoft ops (QLinearAdd, QLinearMul,
QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax, QLinearConcat, QLinearGlobalAveragePool,
QLinearAveragePool, QLinearWhere, QGemm). On quantize_static models (u8s8 per-channel, s8s8 per
tensor) qconv leaves no more ops computing in float between DQ and Q than onnxruntime's own
fusion of the same model (the peer), and the output is within one step of the QDQ input under
the reference (conftest.judge_qop). onnxruntime runs it and agrees with the reference, or with
the reference's emulation of its kernels (its QLinearSoftmax is a table approximation on every
host, its u8 x s8 kernels saturate without VNNI). Without --contrib the output is standard ONNX."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import models
import reference
from conftest import judge_qop, op_counts, ort_agrees, ort_offline_fusion_counts, output_step, run_qconv, session
from test_gemm import gemm_variants
from test_int8_data_movement import MODELS as MOVEMENT_MODELS
from test_int8_data_movement import left_in_qdq_form

MODELS = {**MOVEMENT_MODELS, "contrib_zoo": models.contrib_zoo, "contrib_zoo2": models.contrib_zoo2,
          "mlp": models.mlp, "gemm_c_per_row": lambda: gemm_variants((8, 5))}
SCHEMES = [(True, "uint8"), (False, "int8")]  # u8s8 per-channel, s8s8 per-tensor
# onnxruntime's per-channel quantizer fails on a Gemm's C of shape [M, N]: that one per tensor only
CASES = [(m, pc, act) for m in MODELS for pc, act in SCHEMES if not (m == "gemm_c_per_row" and pc)]


def contrib_ops(path: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for n in onnx.load(path).graph.node:
        if n.domain == "com.microsoft":
            counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return counts


@pytest.mark.parametrize("name,per_channel,activation", CASES)
def test_contrib_quantizes_at_least_what_onnxruntime_fuses(name, per_channel, activation, tmp_path):
    src, dst, peer = str(tmp_path / "qdq.onnx"), str(tmp_path / "qop.onnx"), str(tmp_path / "ort.onnx")
    float_model = MODELS[name]()
    models.quantize_qdq(float_model, src, per_channel=per_channel, activation=activation, work_dir=str(tmp_path))
    r = run_qconv("convert", src, dst, "--format", "qop", "--contrib", "-v")
    assert r.returncode == 0, r.stderr
    onnx.checker.check_model(onnx.load(dst))
    ort_offline_fusion_counts(src, peer)
    ours, theirs = left_in_qdq_form(dst), left_in_qdq_form(peer)
    groups = len(left_in_qdq_form(src))
    print(f"{name} {activation}: groups in float: input {groups}, qconv --contrib {len(ours)}, onnxruntime "
          f"{len(theirs)}; qconv writes {contrib_ops(dst)}, onnxruntime {contrib_ops(peer)}")
    assert len(ours) <= len(theirs), f"qconv leaves {[n.name for n in ours]}, onnxruntime {[n.name for n in theirs]}"
    for n in ours:  # whatever is left is named with its reason
        assert f"qconv: note: {src}: {n.name}: " in r.stderr, f"{n.name} ({n.op_type}) is left silently"
    xs = models.sample_inputs(float_model, 4, seed=51)
    judge_qop(src, dst, xs)
    if activation == "uint8":  # u8 x s8: where this host saturates, uint8 weights compute exactly
        exact = str(tmp_path / "qop_u8.onnx")
        r = run_qconv("convert", src, exact, "--format", "qop", "--contrib", "--weight-type", "uint8")
        assert r.returncode == 0, r.stderr
        _, _, _ = judge_qop(src, exact, xs)
        if "QLinearSoftmax" not in contrib_ops(exact):  # onnxruntime's softmax is its table's, on any host
            assert ort_agrees(exact, xs, output_step(src)) == "exact"


def test_without_contrib_the_output_is_standard_onnx(tmp_path):
    src, dst = str(tmp_path / "qdq.onnx"), str(tmp_path / "qop.onnx")
    models.quantize_qdq(models.contrib_zoo(), src, per_channel=True, activation="uint8", work_dir=str(tmp_path))
    assert run_qconv("convert", src, dst, "--format", "qop").returncode == 0
    assert contrib_ops(dst) == {}
    assert [o.domain for o in onnx.load(dst).opset_import] == [""]
    onnx.checker.check_model(onnx.load(dst), full_check=True)


def test_contrib_goes_with_qop_only(tmp_path):
    src, dst = str(tmp_path / "qdq.onnx"), str(tmp_path / "out.onnx")
    models.quantize_qdq(models.mlp(), src, per_channel=False, activation="uint8", work_dir=str(tmp_path))
    r = run_qconv("convert", src, dst, "--format", "qdq", "--contrib")
    assert r.returncode == 2
    assert "--contrib writes onnxruntime's QOperator ops: it goes with --format qop, not qdq" in r.stderr
    assert not (tmp_path / "out.onnx").exists()


def test_qgemm_takes_the_gemm_gemm_as_conv_leaves(tmp_path):
    """A Gemm with C of shape [M, N] has no 1x1 QLinearConv form (gemm-as-conv refuses it); with
    --contrib it becomes QGemm, C requantized at alpha * a_s * b_s."""
    src, dst = str(tmp_path / "qdq.onnx"), str(tmp_path / "qop.onnx")
    float_model = gemm_variants((8, 5))
    models.quantize_qdq(float_model, src, per_channel=False, activation="uint8", work_dir=str(tmp_path))
    r = run_qconv("convert", src, dst, "--format", "qop", "--contrib", "-v")
    assert r.returncode == 0, r.stderr
    assert "gemm_ta: not fused: C is not one value per output column" in r.stderr  # gemm-as-conv's
    assert contrib_ops(dst) == {"QGemm": 1} and op_counts(dst).get("QLinearConv") == 1
    assert op_counts(dst).get("Gemm", 0) == 0
    judge_qop(src, dst, models.sample_inputs(float_model, 6, seed=52))


def test_conv_transpose_stays_and_says_why(tmp_path):
    src, dst = str(tmp_path / "qdq.onnx"), str(tmp_path / "qop.onnx")
    models.quantize_qdq(MOVEMENT_MODELS["unet"](), src, per_channel=True, activation="uint8", work_dir=str(tmp_path))
    r = run_qconv("convert", src, dst, "--format", "qop", "--contrib", "-v")
    assert r.returncode == 0, r.stderr
    assert ("not fused: onnxruntime's CPU provider has no com.microsoft QLinearConvTranspose kernel (only its "
            "XNNPACK provider runs one)") in r.stderr
    assert op_counts(dst)["ConvTranspose"] == 1


def test_onnxruntime_softmax_is_its_emulation_and_within_one_step(tmp_path):
    """The emulation ort_agrees falls back on is onnxruntime's QLinearSoftmax bit for bit; and
    that kernel is within one step of the specification's arithmetic (not on ties only)."""
    rng = np.random.default_rng(4)
    for t, dt, y_s, y_zp in ((TensorProto.UINT8, np.uint8, 1 / 256, 0), (TensorProto.INT8, np.int8, 1 / 255, -128)):
        for opset, axis, shape in ((13, -1, [3, 7]), (13, 1, [2, 5, 3]), (12, 1, [2, 3, 4])):
            node = helper.make_node("QLinearSoftmax", ["x", "xs", "xz", "ys", "yz"], ["y"], domain="com.microsoft",
                                    axis=axis, opset=opset)
            inits = [numpy_helper.from_array(np.float32(0.07), "xs"), numpy_helper.from_array(dt(3), "xz"),
                     numpy_helper.from_array(np.float32(y_s), "ys"), numpy_helper.from_array(dt(y_zp), "yz")]
            g = helper.make_graph([node], "sm", [helper.make_tensor_value_info("x", t, shape)],
                                  [helper.make_tensor_value_info("y", t, shape)], inits)
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)])
            m.ir_version = 7
            path = str(tmp_path / "sm.onnx")
            onnx.save(m, path)
            info = np.iinfo(dt)
            x = rng.integers(info.min, info.max + 1, shape).astype(dt)
            got = session(path).run(None, {"x": x})[0]
            assert np.array_equal(got, reference.run(path, {"x": x}, emulate_u8s8=True)[0])
            exact = reference.run(path, {"x": x})[0]
            assert np.abs(got.astype(np.int64) - exact.astype(np.int64)).max() <= 1


def test_an_int8_softmax_onnxruntime_would_wrap_stays_and_says_why(tmp_path):
    """y_scale 1/256 with zero point -128: onnxruntime's int8 QLinearSoftmax writes 256 - 128 =
    128 for a probability of 1, cast to int8 unclamped: -128. qconv keeps that Softmax in QDQ form."""
    inits = [numpy_helper.from_array(np.float32(v), n) for n, v in (("xs", 0.07), ("ys", 1 / 256))]
    inits += [numpy_helper.from_array(np.int8(0), "xz"), numpy_helper.from_array(np.int8(-128), "yz")]
    nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"], name="dq"),
             helper.make_node("Softmax", ["xf"], ["p"], name="softmax", axis=-1),
             helper.make_node("QuantizeLinear", ["p", "ys", "yz"], ["y"], name="q")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.INT8, [2, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.INT8, [2, 6])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    src, dst = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    onnx.save(m, src)
    r = run_qconv("convert", src, dst, "--format", "qop", "--contrib", "-v")
    assert r.returncode == 0, r.stderr
    assert ("softmax: not fused: onnxruntime's int8 QLinearSoftmax would wrap a probability of 1 around to -128: "
            "it writes floor(1 / y_scale) + y_zero_point = 128 unclamped") in r.stderr
    assert op_counts(dst) == op_counts(src)
