"""Issue 28: qconv on a current ONNX (third_party/onnx.pin, the same version as the onnx package
here): the checker judges every IR version and opset it knows, newer ones are exit 4; verify,
inspect and convert know every element type and form of that ONNX (a model per type, at the
opset that introduced it, valid by onnx's full check, judged by onnx.reference); and convert,
inspect and verify read a model's dialects and quantized tensors alike."""
import json
import os
import sys

import ml_dtypes
import numpy as np
import onnx
import onnx.reference
import pytest
from onnx import TensorProto as T, helper as h

from conftest import ROOT, run_qconv

PIN = dict(line.split("=", 1) for line in open(os.path.join(ROOT, "third_party", "onnx.pin")).read().split("\n")
           if "=" in line and not line.startswith("#"))


def test_the_build_and_the_reference_are_one_onnx():
    assert PIN["version"] == onnx.__version__


def save(m, tmp_path, name="in.onnx"):
    p = str(tmp_path / name)
    onnx.save(m, p)
    return p


def relu_model(opset, ir, *, output_type=True, dangling=False):
    nodes = [h.make_node("Relu", ["nothing" if dangling else "x"], ["y"], "relu")]
    out = h.make_tensor_value_info("y", T.FLOAT, [2]) if output_type else onnx.ValueInfoProto(name="y")
    m = h.make_model(h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2])], [out]),
                     opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = ir
    return m


@pytest.mark.parametrize("fault", ["output_type", "dangling"])
def test_the_checker_judges_an_opset_21_model(fault, tmp_path):
    m = relu_model(21, 10, output_type=fault != "output_type", dangling=fault == "dangling")
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(m)
    r = run_qconv("convert", save(m, tmp_path), str(tmp_path / "out.onnx"), "--format", "qdq")
    assert r.returncode == 3, r.stderr
    assert r.stderr.count("\n") == 1 and str(tmp_path / "in.onnx") in r.stderr
    assert ("relu" if fault == "dangling" else "invalid model") in r.stderr
    assert not os.path.exists(tmp_path / "out.onnx")


def test_a_newer_ir_version_is_exit_4_naming_it(tmp_path):
    m = relu_model(21, onnx.IR_VERSION + 1)
    r = run_qconv("convert", save(m, tmp_path), str(tmp_path / "out.onnx"), "--format", "qdq")
    assert r.returncode == 4, r.stderr
    assert f"IR version is {onnx.IR_VERSION + 1}" in r.stderr and f"up to {onnx.IR_VERSION}" in r.stderr


def test_a_newer_opset_is_exit_4_naming_it(tmp_path):
    newest = onnx.defs.onnx_opset_version()
    m = relu_model(newest + 1, onnx.IR_VERSION)
    r = run_qconv("convert", save(m, tmp_path), str(tmp_path / "out.onnx"), "--format", "qdq")
    assert r.returncode == 4, r.stderr
    assert f"opset {newest + 1}" in r.stderr and f"up to opset {newest}" in r.stderr


def test_the_newest_opset_and_ir_version_are_checked_and_pass(tmp_path):
    m = relu_model(onnx.defs.onnx_opset_version(), onnx.IR_VERSION)
    onnx.checker.check_model(m, full_check=True)
    r = run_qconv("convert", save(m, tmp_path), str(tmp_path / "out.onnx"), "--format", "qdq")
    assert r.returncode == 0, r.stderr


def test_reduce_mean_18_is_judged_by_its_own_schema(tmp_path):
    """IR 8 declaring opset 18: ReduceMean-18 takes axes as an input (libonnx 1.12 judged it by
    opset 17's schema and refused it)."""
    axes = onnx.numpy_helper.from_array(np.array([1], np.int64), "axes")
    g = h.make_graph([h.make_node("ReduceMean", ["x", "axes"], ["y"], "rmean")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2, 3])], [h.make_tensor_value_info("y", T.FLOAT, [2, 1])], [axes])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    src, dst = save(m, tmp_path), str(tmp_path / "out.onnx")
    r = run_qconv("convert", src, dst, "--format", "qdq")
    assert r.returncode == 0, r.stderr
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(onnx.reference.ReferenceEvaluator(dst).run(None, {"x": x})[0],
                                  onnx.reference.ReferenceEvaluator(src).run(None, {"x": x})[0])


# --- every element type and form, at the opset that introduced it ---------------------------

NP = {T.INT16: np.int16, T.UINT16: np.uint16, T.INT4: ml_dtypes.int4, T.UINT4: ml_dtypes.uint4,
      T.INT2: ml_dtypes.int2, T.UINT2: ml_dtypes.uint2}
RANGE = {T.INT4: (-8, 7), T.UINT4: (0, 15), T.INT2: (-2, 1), T.UINT2: (0, 3), T.INT16: (-300, 300), T.UINT16: (0, 600)}
IR = {19: 9, 21: 10, 23: 11, 24: 12, 25: 13}


def typed_model(qtype, opset, *, scale_type=T.FLOAT, block=0, zp=True, output_dtype=0, precision=0, x_type=T.FLOAT):
    """x -> QuantizeLinear -> DequantizeLinear -> MatMul(., DequantizeLinear(w)) -> y: the activation per
    tensor, the weight per column or blocked along K, every tensor of `qtype`. With `precision`, y is
    quantized too (QuantizeLinear-23 with that precision), so that the MatMul can fuse."""
    K, N = 64, 8
    rng = np.random.default_rng(0)
    inits = [h.make_tensor("xs", x_type if x_type != T.FLOAT else T.FLOAT, [], [0.0625])]
    qin = ["x", "xs"]
    if zp:
        inits.append(h.make_tensor("xz", qtype, [], [0]))
        qin.append("xz")
    attrs = {k: v for k, v in (("output_dtype", output_dtype), ("precision", precision)) if v}
    nodes = [h.make_node("QuantizeLinear", qin, ["xq"], "q_x", **attrs),
             h.make_node("DequantizeLinear", ["xq"] + qin[1:], ["xd"], "dq_x")]
    lo, hi = RANGE.get(qtype, (-4, 4))
    w = rng.integers(lo, hi + 1, (K, N)).astype(np.float32)
    inits.append(h.make_tensor("w", qtype, [K, N], w.ravel().tolist()))
    sshape = [(K + block - 1) // block, N] if block else [N]
    if scale_type == T.FLOAT8E8M0:
        sv = (2.0 ** rng.integers(-8, -3, sshape)).astype(np.float32)
    else:
        sv = rng.uniform(0.01, 0.1, sshape).astype(np.float32)
    inits.append(h.make_tensor("ws", scale_type, sshape, sv.ravel().tolist()))
    win = ["w", "ws"]
    if zp and scale_type != T.FLOAT8E8M0:
        inits.append(h.make_tensor("wz", qtype, sshape, np.full(sshape, (lo + hi) // 2 if lo == 0 else 0).ravel().tolist()))
        win.append("wz")
    dattrs = {"axis": 0 if block else 1}
    if block:
        dattrs["block_size"] = block
    if scale_type == T.FLOAT8E8M0:
        dattrs["output_dtype"] = x_type
    nodes.append(h.make_node("DequantizeLinear", win, ["wd"], "dq_w", **dattrs))
    if scale_type not in (T.FLOAT, T.FLOAT8E8M0, x_type):
        nodes.append(h.make_node("Cast", ["wd"], ["wc"], "cast_w", to=x_type))
        nodes.append(h.make_node("MatMul", ["xd", "wc"], ["y"], "mm"))
    elif precision:
        inits += [h.make_tensor("ys", scale_type, [], [0.5]), h.make_tensor("yz", qtype, [], [3])]
        nodes += [h.make_node("MatMul", ["xd", "wd"], ["yf"], "mm"),
                  h.make_node("QuantizeLinear", ["yf", "ys", "yz"], ["yq"], "q_y", precision=precision),
                  h.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"], "dq_y")]
    else:
        nodes.append(h.make_node("MatMul", ["xd", "wd"], ["y"], "mm"))
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", x_type, [2, K])],
                     [h.make_tensor_value_info("y", x_type, [2, N])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = IR[opset]
    onnx.checker.check_model(m, full_check=True)
    return m


TYPES = {
    "int16": dict(qtype=T.INT16, opset=21), "uint16": dict(qtype=T.UINT16, opset=21),
    "int4": dict(qtype=T.INT4, opset=21), "uint4": dict(qtype=T.UINT4, opset=21),
    "uint4_blocked": dict(qtype=T.UINT4, opset=21, block=16), "int4_blocked_partial": dict(qtype=T.INT4, opset=21, block=24),
    "float8e4m3fn": dict(qtype=T.FLOAT8E4M3FN, opset=19), "float8e4m3fnuz": dict(qtype=T.FLOAT8E4M3FNUZ, opset=19),
    "float8e5m2": dict(qtype=T.FLOAT8E5M2, opset=19), "float8e5m2fnuz": dict(qtype=T.FLOAT8E5M2FNUZ, opset=19),
    "float4e2m1": dict(qtype=T.FLOAT4E2M1, opset=23),
    "int2": dict(qtype=T.INT2, opset=25), "uint2": dict(qtype=T.UINT2, opset=25),
    "mxfp4_e8m0_scales": dict(qtype=T.FLOAT4E2M1, opset=24, block=32, scale_type=T.FLOAT8E8M0, zp=False),
    "output_dtype": dict(qtype=T.INT4, opset=21, zp=False, output_dtype=T.INT4),
    "precision": dict(qtype=T.INT8, opset=23, x_type=T.FLOAT16, scale_type=T.FLOAT16, precision=T.FLOAT),
}
TYPE_NAMES = {T.INT16: "int16", T.UINT16: "uint16", T.INT4: "int4", T.UINT4: "uint4", T.INT2: "int2", T.UINT2: "uint2",
              T.FLOAT8E4M3FN: "float8e4m3fn", T.FLOAT8E4M3FNUZ: "float8e4m3fnuz", T.FLOAT8E5M2: "float8e5m2",
              T.FLOAT8E5M2FNUZ: "float8e5m2fnuz", T.FLOAT4E2M1: "float4e2m1", T.INT8: "int8"}


def x_of(kw):
    x = np.random.default_rng(1).normal(0, 1, (2, 64))
    return x.astype(np.float16 if kw.get("x_type") == T.FLOAT16 else np.float32)


@pytest.mark.parametrize("case", sorted(TYPES))
def test_every_type_verifies_inspects_and_converts(case, tmp_path):
    kw = TYPES[case]
    src = save(typed_model(**kw), tmp_path)
    r = run_qconv("verify", src, "--json")
    v = json.loads(r.stdout)
    assert r.returncode == 0 and v["findings"] == [], r.stdout + r.stderr
    assert v["dialects"] == ["standard QDQ"] and v["quantized_tensors"] == (3 if kw.get("precision") else 2)
    r = run_qconv("inspect", src, "--json")
    assert r.returncode == 0, r.stderr
    i = json.loads(r.stdout)
    types = {t["tensor"]: t["type"] for t in i["quantized_tensors"]}
    assert types["w"] == TYPE_NAMES[kw["qtype"]]
    if kw.get("block"):
        entry = next(t for t in i["quantized_tensors"] if t["tensor"] == "w")
        assert f"block_size {kw['block']}" in entry["granularity"]
    x = x_of(kw)
    want = onnx.reference.ReferenceEvaluator(src).run(None, {"x": x})[0]
    for fmt in ("qdq", "qop"):
        dst = str(tmp_path / f"{fmt}.onnx")
        r = run_qconv("convert", src, dst, "--format", fmt, "-v")
        assert r.returncode == 0, r.stderr
        onnx.checker.check_model(onnx.load(dst), full_check=True)
        got = onnx.reference.ReferenceEvaluator(dst).run(None, {"x": x})[0]
        if kw["qtype"] == T.INT8:  # precision = float: the division a QLinear op makes, so it fuses exactly
            assert "QLinearMatMul" in [n.op_type for n in onnx.load(dst).graph.node] or fmt == "qdq"
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_array_equal(got, want)
            if fmt == "qop":  # what is true: QLinear ops take 8-bit integers, and no blocked scale
                assert ("QLinear ops take 8-bit integers (int8, uint8) only" in r.stderr
                        or "blocked quantization (block_size) has no QLinear form" in r.stderr), r.stderr
                assert "not an integer type" not in r.stderr


def test_a_precision_narrower_than_float_is_named_not_fused(tmp_path):
    """QuantizeLinear-23 dividing in float16 where its scale is float: a QLinear op divides in float."""
    kw = dict(qtype=T.INT8, opset=23, precision=T.FLOAT16)
    src = save(typed_model(**kw), tmp_path)
    r = run_qconv("convert", src, str(tmp_path / "out.onnx"), "--format", "qop", "-v")
    assert r.returncode == 0, r.stderr
    assert "divides in float16 (its precision attribute)" in r.stderr
    assert "QLinearMatMul" not in [n.op_type for n in onnx.load(str(tmp_path / "out.onnx")).graph.node]


def test_a_blocked_scale_of_the_wrong_shape_is_a_finding(tmp_path):
    m = typed_model(qtype=T.UINT4, opset=21, block=16)
    m.graph.node[2].attribute[1].i = 32  # block_size 32: 2 blocks along K, the scale has 4
    r = run_qconv("verify", save(m, tmp_path), "--json")
    assert r.returncode == 1
    f = json.loads(r.stdout)["findings"]
    assert [x["kind"] for x in f] == ["per-axis"] and "where 2 is wanted" in f[0]["message"]


def test_an_onnxruntime_qint4_model_converts(tmp_path):
    """onnxruntime's static quantizer with QInt4 weights (libonnx 1.12: 'Unrecognized data_type 22')."""
    import models
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    fsrc, src = str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx")
    onnx.save(models.mlp(), fsrc)
    quantize_static(fsrc, src, models.calibration_reader(models.sample_inputs(models.mlp(), 8, 3)),
                    quant_format=QuantFormat.QDQ, per_channel=True, activation_type=QuantType.QUInt16,
                    weight_type=QuantType.QInt4)
    assert any(t.data_type == T.INT4 for t in onnx.load(src).graph.initializer)
    r = run_qconv("verify", src, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["findings"] == [], r.stdout
    dst = str(tmp_path / "out.onnx")
    r = run_qconv("convert", src, dst, "--format", "qdq")
    assert r.returncode == 0, r.stderr
    x = models.sample_inputs(models.mlp(), 1, 9)[0]
    name = onnx.load(src).graph.input[0].name
    np.testing.assert_array_equal(onnx.reference.ReferenceEvaluator(dst).run(None, {name: x})[0],
                                  onnx.reference.ReferenceEvaluator(src).run(None, {name: x})[0])


# --- one reading of a model: convert, inspect and verify agree -----------------------------

def dialect_models(folder):
    sys.path.insert(0, os.path.join(ROOT, "tests", "fuzz"))
    import make_seeds
    make_seeds.main(str(folder))
    return sorted(p for p in os.listdir(folder) if p.startswith("dialect_") and not p.startswith(("dialect_ir2", "dialect_invalid_")))


def test_convert_inspect_and_verify_read_each_dialect_alike(tmp_path):
    names = dialect_models(tmp_path / "seeds")
    assert len(names) >= 15
    seen = set()
    for name in names:
        src = str(tmp_path / "seeds" / name)
        r = run_qconv("inspect", src, "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        i = json.loads(r.stdout)
        v = json.loads(run_qconv("verify", src, "--json").stdout)
        report = str(tmp_path / "report.json")
        run_qconv("convert", src, str(tmp_path / "out.onnx"), "--format", "qdq", "--report", report)
        c = json.load(open(report))["items"][0]
        inspected = sorted(d["dialect"] for d in i["dialects"])
        assert inspected == v["dialects"] == c["dialects"], name
        assert len(i["quantized_tensors"]) == v["quantized_tensors"] == c["quantized_tensors"], name
        assert inspected, f"{name}: no dialect read"
        seen.update(inspected)
    assert {"onnxruntime com.microsoft", "standard QDQ", "standard QOp", "QONNX", "Vitis AI",
            "OpenVINO FakeQuantize", "AMD Quark"} <= seen, seen


@pytest.mark.parametrize("bits", [8, 16])
def test_com_microsoft_qdq_is_read_as_quantized(bits, tmp_path):
    """onnxruntime's com.microsoft Q/DQ (8 and 16 bit): inspect said 'dialects: none' and 0 tensors."""
    import test_dialects
    src = str(tmp_path / "contrib.onnx")
    if bits == 8:
        test_dialects.quantize_contrib("small_cnn", src, "uint8", tmp_path)
    else:
        test_dialects.quantize_contrib("small_cnn", src, "uint16", tmp_path)
    i = json.loads(run_qconv("inspect", src, "--json").stdout)
    assert [d["dialect"] for d in i["dialects"]] == ["onnxruntime com.microsoft"]
    assert len(i["quantized_tensors"]) > 4
    r = run_qconv("inspect", src)
    assert "dialects: none" not in r.stdout and "quantized tensors: 0" not in r.stdout
