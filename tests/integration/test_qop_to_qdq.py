"""QOp -> QDQ (--format qdq) on what onnxruntime's quantize_static writes in QOperator form, and on
hand-written contrib ops: every quantized op becomes DequantizeLinear -> float op -> QuantizeLinear
with the same parameters. The reference judges (reference.py: the ONNX specification's QLinearConv
and QLinearMatMul, the contrib ops as onnxruntime's schemas define them): every quantized tensor
the two models share, and the output, agree within one step (the QDQ form computes in float32;
the test counts the elements that differ). onnxruntime runs every output and agrees
(conftest.ort_agrees). The round trip QOp -> qdq -> qop gives back the same QLinearConv and
QLinearMatMul with byte-identical initializers."""
import collections
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import models
import reference
from conftest import QOP_ROWS, op_counts, ort_agrees, output_step, run_qconv, session

QOP_CASES = [(m, pc, act) for m in models.QOP_MODELS for pc in (False, True) for act in ("uint8", "int8")]
ROUND_TRIP_OPS = ("QLinearConv", "QLinearMatMul")  # qconv's QOp output is standard-only: contrib ops stay QDQ


def qop_id(case) -> str:
    return f"{case[0]}-{'per_channel' if case[1] else 'per_tensor'}-{case[2]}"


@pytest.fixture(scope="module")
def qop_model(tmp_path_factory):
    work = tmp_path_factory.mktemp("qop")
    cache: dict = {}

    def get(case):
        if case not in cache:
            path = str(work / f"{qop_id(case)}.onnx")
            models.quantize_qop(models.QOP_MODELS[case[0]](), path, per_channel=case[1], activation=case[2],
                                work_dir=str(work))
            cache[case] = path
        return cache[case]

    return get


def quantized_ops(path: str) -> list[str]:
    return [n.op_type for n in onnx.load(path).graph.node
            if n.domain == "com.microsoft" or n.op_type.startswith("QLinear") or n.op_type in ("QGemm", "ConvInteger", "MatMulInteger")]


def shared_integers(src: str, dst: str, x: np.ndarray) -> tuple[int, int, int, int]:
    """Every 8-bit tensor both models compute (by name), under the reference: (largest difference
    in steps, elements that differ, of how many, and how many of those differ off a near tie:
    where the value the QDQ form's QuantizeLinear rounds is not within 1/1000 step of a tie)."""
    a, b = reference.run(src, x, intermediate=True), reference.run(dst, x, intermediate=True)
    weights = {t.name for t in onnx.load(src).graph.initializer}
    m = onnx.load(dst)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    quantizer = {n.output[0]: n for n in m.graph.node if n.op_type == "QuantizeLinear"}
    worst, n, total, off_tie = 0, 0, 0, 0
    for name, v in a.items():
        if name in b and name not in weights and isinstance(v, np.ndarray) and v.dtype in (np.uint8, np.int8):
            d = np.abs(v.astype(np.int64) - b[name].astype(np.int64))
            worst, n, total = max(worst, int(d.max(initial=0))), n + int(np.count_nonzero(d)), total + v.size
            if np.any(d) and name in quantizer:
                q = quantizer[name]
                steps = b[q.input[0]].astype(np.float64) / np.float64(inits[q.input[1]])
                off_tie += int(np.count_nonzero((np.abs(np.abs(steps - np.floor(steps)) - 0.5) >= 1e-3) & (d > 0)))
            elif np.any(d):
                off_tie += int(np.count_nonzero(d))
    return worst, n, total, off_tie


def convert(src: str, dst: str, fmt: str = "qdq", *flags: str) -> str:
    r = run_qconv("convert", src, dst, "--format", fmt, "-v", *flags)
    assert r.returncode == 0, r.stderr
    return r.stderr


def judge_unfused(src: str, dst: str, xs: list[np.ndarray]) -> None:
    """The QDQ output against its QOp input, under the reference; onnxruntime runs it and agrees."""
    assert quantized_ops(dst) == [], collections.Counter(quantized_ops(dst))
    onnx.checker.check_model(onnx.load(dst), full_check=True)
    worst, n, total, off_tie = shared_integers(src, dst, xs[0])
    assert worst <= 1, f"{n} of {total} integers differ, by up to {worst} steps"
    assert off_tie == 0, f"{off_tie} of {n} differing integers are not on a near tie"
    QOP_ROWS.append((os.path.basename(src), total, n))
    step = output_step(dst)
    want, got = reference.outputs(src, xs), reference.outputs(dst, xs)
    assert max(float(np.max(np.abs(w - g))) for w, g in zip(want, got)) <= step * 1.0001
    ort_agrees(dst, xs, step, got)


@pytest.mark.parametrize("case", QOP_CASES, ids=qop_id)
def test_qop_becomes_canonical_qdq(case, qop_model, tmp_path):
    src = qop_model(case)
    dst = str(tmp_path / "qdq.onnx")
    err = convert(src, dst)
    assert "stays" not in err
    judge_unfused(src, dst, models.sample_inputs(models.QOP_MODELS[case[0]](), 4, seed=77))
    # QuantizeLinear / DequantizeLinear at the graph's boundaries are kept
    g_src, g_dst = onnx.load(src).graph, onnx.load(dst).graph
    assert g_dst.node[0] == g_src.node[0] and g_dst.node[-1] == g_src.node[-1]
    # onnxruntime's own QOp run agrees with the reference too: the reference judges its contrib ops
    ort_agrees(src, models.sample_inputs(models.QOP_MODELS[case[0]](), 2, seed=78), output_step(dst))


def qop_params(path: str) -> dict:
    """Each QLinearConv / QLinearMatMul by name: its inputs' bytes, dims and types, and attributes."""
    m = onnx.load(path)
    inits = {t.name: t for t in m.graph.initializer}
    out = {}
    for n in m.graph.node:
        if n.op_type in ROUND_TRIP_OPS:
            ins = [(numpy_helper.to_array(inits[i]).tobytes(), tuple(inits[i].dims), inits[i].data_type) if i in inits
                   else "activation" for i in n.input]
            out[n.name] = (n.op_type, ins, sorted(a.SerializeToString() for a in n.attribute))
    return out


@pytest.mark.parametrize("case", [c for c in QOP_CASES if c[0] in ("contrib_zoo", "resnet_style", "mlp", "contrib_zoo2")],
                         ids=qop_id)
def test_round_trip_gives_back_the_same_quantized_ops(case, qop_model, tmp_path):
    src = qop_model(case)
    mid, back = str(tmp_path / "qdq.onnx"), str(tmp_path / "qop.onnx")
    convert(src, mid)
    convert(mid, back, "qop")
    before, after = qop_params(src), qop_params(back)
    assert before and all(after.get(name) == ops for name, ops in before.items())
    # a com.microsoft QGemm comes back as a standard QLinearConv (gemm-as-conv), under its name
    qgemms = {n.name for n in onnx.load(src).graph.node if n.op_type == "QGemm"}
    assert set(after) - set(before) == qgemms


def test_format_qop_never_dequantizes_a_quantized_op(qop_model, tmp_path):
    src = qop_model(("contrib_zoo", True, "uint8"))
    dst = str(tmp_path / "qop.onnx")
    convert(src, dst, "qop")
    assert collections.Counter(quantized_ops(dst)) == collections.Counter(quantized_ops(src))
    assert op_counts(dst).get("QGemm") == 1
    xs = models.sample_inputs(models.contrib_zoo(), 3, seed=5)
    for w, g in zip(reference.outputs(src, xs), reference.outputs(dst, xs)):
        assert np.array_equal(w, g)


def test_unnamed_nodes_get_unique_deterministic_names(qop_model, tmp_path):
    m = onnx.load(qop_model(("contrib_zoo", False, "uint8")))
    for n in m.graph.node:
        n.name = ""
    src = str(tmp_path / "unnamed.onnx")
    onnx.save(m, src)
    a, b = str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx")
    convert(src, a)
    convert(src, b)
    with open(a, "rb") as fa, open(b, "rb") as fb:
        assert fa.read() == fb.read()
    made = [n.name for n in onnx.load(a).graph.node if n.op_type != "Flatten" and n.name]
    assert len(made) == len(set(made)) == len(onnx.load(a).graph.node) - 3  # the input Q, Flatten, output DQ stay unnamed
    judge_unfused(src, a, models.sample_inputs(models.contrib_zoo(), 2, seed=6))


@pytest.mark.parametrize("name", ["small_cnn", "mlp", "contrib_zoo"])
@pytest.mark.parametrize("per_channel", [False, True])
def test_dynamic_quantization_becomes_qdq(name, per_channel, tmp_path):
    src, dst = str(tmp_path / "dyn.onnx"), str(tmp_path / "qdq.onnx")
    models.quantize_dyn(models.QOP_MODELS[name](), src, str(tmp_path), per_channel=per_channel)
    assert op_counts(src).get("ConvInteger", 0) + op_counts(src).get("MatMulInteger", 0) > 0
    convert(src, dst)
    assert quantized_ops(dst) == []
    onnx.checker.check_model(onnx.load(dst), full_check=True)
    xs = models.sample_inputs(models.QOP_MODELS[name](), 3, seed=8)
    want, got = reference.outputs(src, xs), reference.outputs(dst, xs)
    for w, g in zip(want, got):  # float outputs: the same real value, rounded in another order
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * float(np.max(np.abs(w))))
    tolerance = 1e-5 * max(float(np.max(np.abs(w))) for w in want)
    ort_agrees(dst, xs, tolerance, got)
    kept = str(tmp_path / "qop.onnx")  # --format qop never dequantizes: the integer ops stay
    convert(src, kept, "qop")
    assert collections.Counter(quantized_ops(kept)) == collections.Counter(quantized_ops(src))


# ---- contrib ops onnxruntime's quantizer does not write: built by hand ----

def _q(name, values, dtype):
    return numpy_helper.from_array(np.asarray(values, dtype), name)


def contrib_model(op, inputs, attrs, extra_inits, in_shape, out_shape, opset=13, in_type=TensorProto.UINT8,
                  extra_inputs=()):
    node = helper.make_node(op, inputs, ["y"], domain="com.microsoft", name="op", **attrs)
    inits = [_q("x_s", 0.05, np.float32), _q("x_zp", 128, np.uint8), _q("y_s", 0.04, np.float32),
             _q("y_zp", 120, np.uint8), *extra_inits]
    g = helper.make_graph([node], "contrib", [helper.make_tensor_value_info("x", in_type, in_shape), *extra_inputs],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, out_shape)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 7 if opset <= 15 else 9
    return m


def _w(seed, shape):
    return np.random.default_rng(seed).integers(-100, 101, shape).astype(np.int8)


CONTRIB_CASES = {
    "conv_transpose": lambda: contrib_model(
        "QLinearConvTranspose", ["x", "x_s", "x_zp", "w", "w_s", "w_zp", "y_s", "y_zp", "b"], {"strides": [2, 2]},
        [_q("w", _w(1, (4, 3, 2, 2)), np.int8), _q("w_s", 0.01, np.float32), _q("w_zp", 0, np.int8),
         _q("b", [100, -200, 300], np.int32)], [1, 4, 3, 3], [1, 3, 6, 6]),
    "conv_transpose_per_channel": lambda: contrib_model(
        "QLinearConvTranspose", ["x", "x_s", "x_zp", "w", "w_s", "w_zp", "y_s", "y_zp", "b"], {"pads": [1, 1, 1, 1]},
        [_q("w", _w(2, (4, 3, 3, 3)), np.int8), _q("w_s", [0.01, 0.02, 0.005], np.float32),
         _q("w_zp", [0, 0, 0], np.int8), _q("b", [100, -200, 300], np.int32)], [1, 4, 3, 3], [1, 3, 3, 3]),
    "qlinearconv_channels_last": lambda: contrib_model(
        "QLinearConv", ["x", "x_s", "x_zp", "w", "w_s", "w_zp", "y_s", "y_zp", "b"], {"channels_last": 1, "pads": [1, 1, 1, 1]},
        [_q("w", _w(6, (3, 4, 3, 3)), np.int8), _q("w_s", [0.01, 0.02, 0.005], np.float32),
         _q("w_zp", [0, 0, 0], np.int8), _q("b", [100, -200, 300], np.int32)], [1, 3, 3, 4], [1, 3, 3, 3]),
    "reduce_mean": lambda: contrib_model("QLinearReduceMean", ["x", "x_s", "x_zp", "y_s", "y_zp"],
                                         {"axes": [2, 3], "keepdims": 1}, [], [1, 4, 3, 3], [1, 4, 1, 1]),
    "gap_channels_last": lambda: contrib_model("QLinearGlobalAveragePool", ["x", "x_s", "x_zp", "y_s", "y_zp"],
                                               {"channels_last": 1}, [], [1, 3, 3, 4], [1, 1, 1, 4]),
    "avgpool_channels_last": lambda: contrib_model(
        "QLinearAveragePool", ["x", "x_s", "x_zp", "y_s", "y_zp"],
        {"channels_last": 1, "kernel_shape": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1}, [],
        [1, 3, 3, 4], [1, 4, 4, 4]),
    "leaky_relu": lambda: contrib_model("QLinearLeakyRelu", ["x", "x_s", "x_zp", "y_s", "y_zp"], {"alpha": 0.3}, [],
                                        [1, 4, 3, 3], [1, 4, 3, 3]),
    "softmax_opset12_last_axis": lambda: contrib_model("QLinearSoftmax", ["x", "x_s", "x_zp", "y_s", "y_zp"],
                                                       {"opset": 12, "axis": 2}, [], [2, 3, 5], [2, 3, 5]),
    "where": lambda: contrib_model(
        "QLinearWhere", ["c", "x", "x_s", "x_zp", "x2", "x2_s", "x2_zp", "y_s", "y_zp"], {},
        [_q("x2", np.random.default_rng(3).integers(0, 256, (1, 4, 3, 3)), np.uint8), _q("x2_s", 0.03, np.float32),
         _q("x2_zp", 100, np.uint8)], [1, 4, 3, 3], [1, 4, 3, 3],
        extra_inputs=[helper.make_tensor_value_info("c", TensorProto.BOOL, [1, 4, 3, 3])]),
}


@pytest.mark.parametrize("case", list(CONTRIB_CASES))
def test_contrib_op_becomes_qdq(case, tmp_path):
    m = CONTRIB_CASES[case]()
    src, dst = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    onnx.save(m, src)
    convert(src, dst)
    assert quantized_ops(dst) == []
    onnx.checker.check_model(onnx.load(dst), full_check=True)
    rng = np.random.default_rng(9)
    shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    feeds = [{"x": rng.integers(0, 256, shape).astype(np.uint8)} for _ in range(4)]
    if case == "where":
        for f in feeds:
            f["c"] = rng.integers(0, 2, shape).astype(bool)
    q = next(n for n in onnx.load(dst).graph.node if n.output[0] == "y")
    for f in feeds:
        want, every = reference.run(src, f)[0], reference.run(dst, f, intermediate=True)
        got = every["y"]
        d = np.abs(want.astype(np.int64) - got.astype(np.int64))
        assert d.max() <= 1
        # where they differ, the value QuantizeLinear rounds is within 1/1000 step of a tie
        steps = every[q.input[0]].astype(np.float64) / 0.04
        assert np.all(np.abs(np.abs(steps - np.floor(steps)) - 0.5)[d > 0] < 1e-3), "a difference off a near tie"
        ort = session(dst).run(None, f)[0]
        assert np.abs(ort.astype(np.int64) - got.astype(np.int64)).max() <= 1


def test_quantized_ops_without_a_qdq_form_stay_and_say_why(tmp_path):
    """DynamicQuantizeLSTM quantizes its input at each step, which no standard op does: it stays."""
    h = 2
    inits = [_q("W", _w(4, (1, 3, 4 * h)), np.int8), _q("R", _w(5, (1, h, 4 * h)), np.int8),
             _q("W_s", [0.01], np.float32), _q("W_zp", [0], np.int8), _q("R_s", [0.02], np.float32), _q("R_zp", [0], np.int8)]
    node = helper.make_node("DynamicQuantizeLSTM", ["x", "W", "R", "", "", "", "", "", "W_s", "W_zp", "R_s", "R_zp"],
                            ["y"], domain="com.microsoft", name="lstm", hidden_size=h)
    g = helper.make_graph([node], "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1, 1, h])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 7
    src, dst = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    onnx.save(m, src)
    err = convert(src, dst)
    assert "lstm: stays com.microsoft DynamicQuantizeLSTM: " in err
    assert op_counts(dst) == {"DynamicQuantizeLSTM": 1}


def zero_points(path: str) -> dict:
    """The zero point of every quantized tensor a standard Q/DQ carries: {tensor: (dtype, values)}."""
    m = onnx.load(path)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    out = {}
    for n in m.graph.node:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear") and len(n.input) > 2 and n.input[2] in inits:
            out[n.output[0] if n.op_type == "QuantizeLinear" else n.input[0]] = inits[n.input[2]]
    return out


@pytest.mark.parametrize("symmetric", [True, False])
def test_int8_with_zero_point_0_for_tensorrt(symmetric, tmp_path):
    """--activation-type int8 --weight-type int8: uint8 at zero point 128 becomes int8 at 0, losslessly;
    every tensor whose zero point is still not 0 is named in a warning."""
    src = str(tmp_path / "qop.onnx")
    models.quantize_qop(models.contrib_zoo(), src, per_channel=True, activation="uint8", work_dir=str(tmp_path),
                        symmetric=symmetric)
    plain, shifted = str(tmp_path / "qdq.onnx"), str(tmp_path / "int8.onnx")
    convert(src, plain)
    err = convert(src, shifted, "qdq", "--activation-type", "int8", "--weight-type", "int8")
    zps, before = zero_points(shifted), zero_points(plain)
    assert zps and all(z.dtype == np.int8 for z in zps.values())
    for t, z in zps.items():  # moved by 128 from uint8, losslessly
        assert np.array_equal(z.astype(np.int64), before[t].astype(np.int64) - (128 if before[t].dtype == np.uint8 else 0))
    nonzero = sorted(t for t, z in zps.items() if np.any(z != 0))
    warned = sorted(line.split(": ")[3] for line in err.splitlines() if "after the shift to int8" in line)
    assert warned == nonzero
    assert f"{len(nonzero)} int8 tensor(s) keep a zero point other than 0" in err
    if symmetric:  # only the output onnxruntime quantizes on the fixed range [0, 1] (Softmax)
        assert nonzero == ["softmax_out_33_quantized"]
    xs = models.sample_inputs(models.contrib_zoo(), 3, seed=10)
    for a, b in zip(reference.outputs(plain, xs), reference.outputs(shifted, xs)):
        assert np.array_equal(a, b)  # the shift is lossless
    ort_agrees(shifted, xs, output_step(shifted))
