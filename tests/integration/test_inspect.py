"""qconv inspect (issue 17, line 3): what a model is and what convert would do, writing nothing.
Its dry run is held to a real conversion's --report."""
from __future__ import annotations

import json
import os
from collections import Counter

import onnx
import pytest

from conftest import run_qconv, saturating_convs
from test_batch_report import EXAMPLE, NNCF, refused_model


def inspect(path: str, *flags: str) -> dict:
    r = run_qconv("inspect", path, "--json", *flags)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("fmt", ["qop", "qdq"])
def test_the_dry_run_says_what_a_conversion_does(tmp_path, fmt):
    before = sorted(os.listdir(os.path.dirname(EXAMPLE)))
    with open(EXAMPLE, "rb") as f:
        original = f.read()
    j = inspect(EXAMPLE, "--format", fmt)
    assert sorted(os.listdir(os.path.dirname(EXAMPLE))) == before  # writes nothing
    with open(EXAMPLE, "rb") as f:
        assert f.read() == original
    rep = str(tmp_path / "r.json")
    assert run_qconv("convert", EXAMPLE, str(tmp_path / "o.onnx"), "--format", fmt, "--report", rep).returncode == 0
    with open(rep) as f:
        [item] = json.load(f)["items"]
    c = j["convert"]
    assert (c["format"], c["exit_code"], c["error"]) == (fmt, 0, None)
    for key in ("rewritten", "refusals", "approximations", "warnings", "notes", "counts"):
        assert c[key] == item[key], key
    # the passes, then emit and check in memory: convert's stages but for reading and writing files
    assert [s["name"] for s in c["stages"]] == [s["name"] for s in item["stages"] if s["name"] not in
                                                ("read", "import", "write", "commit")]
    assert j["saturation"] == [{"node": w["node"], "message": w["reason"]} for w in item["warnings"]
                               if w["pass"] == "check-saturation" and w["node"] != EXAMPLE]
    assert [r["node"] for r in j["saturation"]] == saturating_convs(EXAMPLE) != []


def test_dialects_ops_and_quantized_tensors_of_a_qdq_model():
    j = inspect(EXAMPLE)
    m = onnx.load(EXAMPLE)
    counts = Counter(n.op_type for n in m.graph.node)
    assert j["ops"] == dict(counts)
    assert j["dialects"] == [{"dialect": "standard QDQ", "ops": {"DequantizeLinear": counts["DequantizeLinear"],
                                                                   "QuantizeLinear": counts["QuantizeLinear"]}}]
    quantized = {n.output[0] for n in m.graph.node if n.op_type == "QuantizeLinear"} | \
                {n.input[0] for n in m.graph.node if n.op_type == "DequantizeLinear"}
    tensors = {t["tensor"]: t for t in j["quantized_tensors"]}
    assert set(tensors) == quantized
    inits = {t.name: t for t in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear" and n.input[0] in inits:  # weights and biases
            t = tensors[n.input[0]]
            assert t["type"] == {2: "uint8", 3: "int8", 6: "int32"}[inits[n.input[0]].data_type]
            scale = onnx.numpy_helper.to_array(inits[n.input[1]])
            assert t["scales"] == scale.size
            assert t["scale_min"] == pytest.approx(float(scale.min()), rel=1e-6)
            assert t["granularity"] == (f"per axis 0 ({scale.size})" if scale.size > 1 else "per tensor")
    assert tensors["input_QuantizeLinear_Output"]["zero_points"] == [128]


def test_a_qop_model_and_other_dialects(tmp_path):
    qop = str(tmp_path / "qop.onnx")
    assert run_qconv("convert", EXAMPLE, qop, "--format", "qop", "-q").returncode == 0
    names = [d["dialect"] for d in inspect(qop)["dialects"]]
    assert names == ["standard QDQ", "standard QOp"]
    assert [d["dialect"] for d in inspect(NNCF)["dialects"]] == ["OpenVINO FakeQuantize"]


def test_a_model_convert_would_refuse_is_described_with_the_refusal(tmp_path):
    src = refused_model(str(tmp_path))
    j = inspect(src, "--format", "qdq")
    assert j["dialects"] == [{"dialect": "AMD Quark", "ops": {"com.amd.quark::BFPQuantizeDequantize": 1}}]
    assert j["convert"]["exit_code"] == 4
    assert j["convert"]["error"] == f"{src}: bfp_1: com.amd.quark::BFPQuantizeDequantize has no standard ONNX form in qconv"
    text = run_qconv("inspect", src, "--format", "qdq")
    assert text.returncode == 0
    assert f"convert --format qdq: would fail with exit 4: {j['convert']['error']}" in text.stdout.splitlines()


def test_the_text_form(tmp_path):
    r = run_qconv("inspect", EXAMPLE)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    m = onnx.load(EXAMPLE)
    counts = Counter(n.op_type for n in m.graph.node)
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    [q] = [n for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == m.graph.input[0].name]
    assert lines[0] == f"model: {EXAMPLE}"
    assert (f"dialect: standard QDQ (DequantizeLinear {counts['DequantizeLinear']}, "
            f"QuantizeLinear {counts['QuantizeLinear']})") in lines
    assert (f"  {q.output[0]}: uint8, per tensor, scale {float(inits[q.input[1]]):.6g}, "
            f"zero point {int(inits[q.input[2]])}") in lines
    assert "convert --format qop: would succeed" in lines
    assert "  conv_4 (Conv): becomes QLinearConv [fuse-qlinear-conv]" in lines
    assert f"onnxruntime x86 u8 x s8 saturation risk (CPUs without VNNI): {len(saturating_convs(EXAMPLE))} node(s)" in lines


def test_an_unreadable_model_is_exit_3(tmp_path):
    path = str(tmp_path / "junk.onnx")
    with open(path, "wb") as f:
        f.write(b"junk")
    r = run_qconv("inspect", path)
    assert (r.returncode, r.stdout) == (3, "")
    assert r.stderr.startswith(f"qconv: error: {path}: ")
