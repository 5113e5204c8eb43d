"""One int32 bias several QOp nodes read at different scales (issue 47): onnxruntime's
quantize_static, QOperator format, quantizes a float bias that several Gemms share once, for the
first, and the others read the same integers at their own x_scale * w_scale, computing another
bias than the float model's. `qconv verify` names each later reader; a conversion keeps the
input's math and says the output carries the error (naming the nodes); `--approximate` gives
each reader the first one's bias at its own scale, listed, and the output is nearer the float
model than the input is. Judged by the ONNX reference (reference.py: QGemm by onnxruntime's
contrib formula); proved on a small model and on the corpus's captcha OCR with its LSTM unrolled
into 16 steps of Gemm cells (test_data/corpus.json: captcha_unrolled)."""
from __future__ import annotations

import json
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import corpus
import reference
from conftest import run_qconv
from test_corpus import built  # noqa: F401 (the corpus fixture)

KEPT = re.compile(r"the output keeps (\d+) errors? `qconv verify` reports in the input too \(representation \d+: ")


def two_cells(tmp_path) -> tuple[str, str]:
    """x -> Gemm cell_0(W, B); x * 5 -> Gemm cell_1(W, B); sum: quantized by quantize_static, QOp
    (QGemm) with one B_quantized for both. Returns (float model, QOp model)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.normal(size=(8, 4)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.normal(size=(8,)).astype(np.float32), "B"),
             numpy_helper.from_array(np.array(5.0, np.float32), "k")]
    nodes = [helper.make_node("Gemm", ["x", "W", "B"], ["y1"], name="cell_0", transB=1),
             helper.make_node("Mul", ["x", "k"], ["x2"], name="scale"),
             helper.make_node("Gemm", ["x2", "W", "B"], ["y2"], name="cell_1", transB=1),
             helper.make_node("Add", ["y1", "y2"], ["y"], name="sum")]
    g = helper.make_graph(nodes, "cells", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], inits)
    fsrc, src = str(tmp_path / "float.onnx"), str(tmp_path / "qop.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), fsrc)

    class Feeds(CalibrationDataReader):
        def __init__(self):
            self.items = iter([{"x": rng.normal(size=(2, 4)).astype(np.float32)} for _ in range(8)])

        def get_next(self):
            return next(self.items, None)

    quantize_static(fsrc, src, Feeds(), quant_format=QuantFormat.QOperator, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8)
    qgemms = [n for n in onnx.load(src).graph.node if n.op_type == "QGemm"]
    assert len(qgemms) == 2 and qgemms[0].input[6] == qgemms[1].input[6], "quantize_static no longer shares the bias"
    return fsrc, src


def inputs() -> list[np.ndarray]:
    """Inputs within the calibrated range (x * 5 saturates its quantization beyond it)."""
    return [np.random.default_rng(s).normal(0, 0.5, size=(2, 4)).astype(np.float32) for s in range(8)]


def representation_errors(path: str) -> list[dict]:
    v = run_qconv("verify", path, "--json")
    return [f for f in json.loads(v.stdout)["findings"] if f["kind"] == "representation"]


def off(model: str, reference_model: str, xs: list[np.ndarray]) -> float:
    a, b = reference.outputs(model, xs), reference.outputs(reference_model, xs)
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b))


def test_verify_names_the_later_reader_of_a_shared_bias_and_its_two_scales(tmp_path):
    _, src = two_cells(tmp_path)
    [f] = representation_errors(src)
    assert (f["node"], f["tensor"], f["severity"]) == ("cell_1_quant", "B_quantized", "error")
    assert "'B_quantized' is also the int32 bias of cell_0_quant, at x_scale * w_scale" in f["message"]
    assert "convert --approximate gives it the first one's bias at its own scale" in f["message"]


@pytest.mark.parametrize("fmt", ["qdq", "qop"])
def test_a_conversion_keeps_the_inputs_math_and_says_the_output_carries_the_error(tmp_path, fmt):
    _, src = two_cells(tmp_path)
    out = str(tmp_path / f"out.{fmt}.onnx")
    r = run_qconv("convert", src, out, "--format", fmt, "-v")
    assert r.returncode == 0, r.stderr
    [warning] = [ln for ln in r.stderr.splitlines() if "the output keeps" in ln and ": warning: " in ln]
    assert warning.startswith(f"qconv: warning: {src}: ") and KEPT.search(warning), warning
    assert ("cell_1_quant_dq_C" if fmt == "qdq" else "cell_1_quant") in warning
    # each carried finding is a note naming its node (-v)
    assert any("the output keeps an error (representation)" in ln for ln in r.stderr.splitlines())
    assert len(representation_errors(out)) == 1
    xs = inputs()
    step = float(numpy_helper.to_array(next(t for t in onnx.load(src).graph.initializer if t.name == "y_scale")))
    assert off(out, src, xs) <= step * 1.0001  # the input's math, to one step of float rounding


def test_approximate_gives_the_later_reader_its_own_bias_and_the_output_is_nearer_the_float_model(tmp_path):
    fsrc, src = two_cells(tmp_path)
    out = str(tmp_path / "out.onnx")
    r = run_qconv("convert", src, out, "--format", "qdq", "--approximate")
    assert r.returncode == 0, r.stderr
    [line] = [ln for ln in r.stderr.splitlines() if "approximation" in ln]
    assert "cell_1_quant: approximation: its int32 bias 'B_quantized' was quantized for cell_0_quant" in line
    assert "the output keeps" not in r.stderr
    assert representation_errors(out) == []
    xs = inputs()
    before, after = off(src, fsrc, xs), off(out, fsrc, xs)
    assert after < before / 5, (before, after)  # measured: 6.10 -> 0.27


def test_the_unrolled_lstm_of_a_real_model_a_shared_bias_per_gate_kept_named_and_repaired(built, tmp_path):  # noqa: F811
    """The captcha OCR's bidirectional LSTM unrolled into 16 Gemm steps (corpus.json), QOp u8s8:
    its four biases (W and R, two directions) each shared by 16 cells."""
    src = corpus.path("captcha_unrolled", "qop_u8s8")
    errors = representation_errors(src)
    assert len(errors) >= 30 and all(e["tensor"].endswith("_quantized") for e in errors), errors[:3]
    out = str(tmp_path / "out.onnx")
    r = run_qconv("convert", src, out, "--target", "onnxruntime")
    assert r.returncode == 0, r.stderr
    m = KEPT.search(r.stderr)
    assert m and int(m.group(1)) == len(errors), r.stderr[-2000:]
    fixed = str(tmp_path / "fixed.onnx")
    r = run_qconv("convert", src, fixed, "--target", "onnxruntime", "--approximate")
    assert r.returncode == 0, r.stderr
    listed = [ln for ln in r.stderr.splitlines() if "approximation: its int32 bias" in ln]
    assert len(listed) == len(errors)
    assert representation_errors(fixed) == []
    xs = corpus.feeds(corpus.entry("captcha_unrolled"), 2, 7)
    ref = corpus.path("captcha_unrolled")
    before, after = off(src, ref, xs), off(fixed, ref, xs)
    assert after < before, (before, after)
