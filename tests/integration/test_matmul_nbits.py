"""Issue 28, deliverable 3: onnxruntime's MatMulNBits and the standard weight-only form,
DequantizeLinear(block_size) -> MatMul, both ways, from onnxruntime's own weight-only quantizer
(MatMulNBitsQuantizer: QOperator for 2, 4 and 8 bits, QDQ for 4). The ONNX reference judges the
standard form, onnxruntime the MatMulNBits one: equal within float rounding (here: equal).

onnxruntime itself runs the standard form approximately by default: its optimizer fuses
DequantizeLinear(block_size) -> MatMul into MatMulNBits with accuracy_level 4 (A quantized to
int8) unless the session says session.qdq_matmulnbits_accuracy_level = 0 (docs/targets.md)."""
import json
import os

import numpy as np
import onnx
import onnx.reference
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper as h, numpy_helper as nh

from conftest import run_qconv

K, N, N2 = 96, 40, 16


def float_model():
    rng = np.random.default_rng(0)
    g = h.make_graph([h.make_node("MatMul", ["x", "w"], ["h"], "mm1"), h.make_node("Relu", ["h"], ["r"], "relu"),
                      h.make_node("MatMul", ["r", "w2"], ["y"], "mm2")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2, 5, K])], [h.make_tensor_value_info("y", T.FLOAT, [2, 5, N2])],
                     [nh.from_array(rng.normal(0, 0.2, (K, N)).astype(np.float32), "w"),
                      nh.from_array(rng.normal(0, 0.2, (N, N2)).astype(np.float32), "w2")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def quantize(path, bits, symmetric, fmt, block=32, accuracy_level=None):
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer
    cfg = DefaultWeightOnlyQuantConfig(block_size=block, is_symmetric=symmetric, bits=bits, accuracy_level=accuracy_level,
                                       quant_format=QuantFormat.QOperator if fmt == "qop" else QuantFormat.QDQ)
    q = MatMulNBitsQuantizer(float_model(), algo_config=cfg)
    q.process()
    onnx.save(q.model.model, path)
    return path


X = np.random.default_rng(3).normal(0, 1, (2, 5, K)).astype(np.float32)


def exact_session(path):
    so = ort.SessionOptions()
    so.add_session_config_entry("session.qdq_matmulnbits_accuracy_level", "0")
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def agree(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * float(np.abs(a).max()))


def ops(path):
    return [(n.domain, n.op_type) for n in onnx.load(path).graph.node]


@pytest.mark.parametrize("bits", [2, 4, 8])
@pytest.mark.parametrize("symmetric", [True, False])
def test_matmul_nbits_becomes_the_standard_form(bits, symmetric, tmp_path):
    src = quantize(str(tmp_path / "nbits.onnx"), bits, symmetric, "qop")
    assert ops(src).count(("com.microsoft", "MatMulNBits")) == 2
    dst = str(tmp_path / "qdq.onnx")
    r = run_qconv("convert", src, dst, "--format", "qdq", "-v")
    assert r.returncode == 0, r.stderr
    assert "2 MatMulNBits lowered to DequantizeLinear(block_size) -> MatMul" in r.stderr
    m = onnx.load(dst)
    onnx.checker.check_model(m, full_check=True)
    assert not any(d == "com.microsoft" for d, _ in ops(dst))
    assert m.opset_import[0].version == (25 if bits == 2 else 21)
    dqs = [n for n in m.graph.node if n.op_type == "DequantizeLinear"]
    assert len(dqs) == 2 and all(h.get_attribute_value(a) == 32 for n in dqs for a in n.attribute if a.name == "block_size")
    weights = {t.name: t for t in m.graph.initializer}
    wanted = {2: (T.INT2, T.UINT2), 4: (T.INT4, T.UINT4), 8: (T.INT8, T.UINT8)}[bits][0 if symmetric else 1]
    assert weights[dqs[0].input[0]].data_type == wanted
    assert (len(dqs[0].input) == 3) != symmetric  # no zero points: signed at 0, as onnxruntime's QDQ writer does
    want = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]  # the kernel
    agree(onnx.reference.ReferenceEvaluator(dst).run(None, {"x": X})[0], want)
    agree(exact_session(dst).run(None, {"x": X})[0], want)
    r = run_qconv("verify", dst, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["findings"] == [], r.stdout


@pytest.mark.parametrize("symmetric", [True, False])
def test_the_standard_form_becomes_matmul_nbits_with_contrib(symmetric, tmp_path):
    src = quantize(str(tmp_path / "qdq.onnx"), 4, symmetric, "qdq")
    r = run_qconv("verify", src, "--json")  # onnxruntime's symmetric blocks have negative scales: valid
    assert r.returncode == 0 and json.loads(r.stdout)["findings"] == [], r.stdout
    dst = str(tmp_path / "nbits.onnx")
    r = run_qconv("convert", src, dst, "--format", "qop", "--contrib", "-v")
    assert r.returncode == 0, r.stderr
    assert "2 MatMul fused to MatMulNBits" in r.stderr and "not fused" not in r.stderr
    assert ops(dst).count(("com.microsoft", "MatMulNBits")) == 2
    nodes = [n for n in onnx.load(dst).graph.node if n.op_type == "MatMulNBits"]
    assert all("accuracy_level" not in [a.name for a in n.attribute] for n in nodes)  # float, not int8 A
    want = onnx.reference.ReferenceEvaluator(src).run(None, {"x": X})[0]
    agree(ort.InferenceSession(dst, providers=["CPUExecutionProvider"]).run(None, {"x": X})[0], want)
    # without --contrib the standard form stays: QLinear ops have no blocked form
    r = run_qconv("convert", src, str(tmp_path / "std.onnx"), "--format", "qop", "-v")
    assert r.returncode == 0 and "MatMulNBits" not in [op for _, op in ops(str(tmp_path / "std.onnx"))]
    assert r.stderr.count("not fused") == 2, r.stderr


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_both_ways_give_back_onnxruntimes_bytes(bits, tmp_path):
    """MatMulNBits -> standard -> MatMulNBits: B, scales and zero points byte for byte."""
    src = quantize(str(tmp_path / "nbits.onnx"), bits, False, "qop")
    mid, back = str(tmp_path / "qdq.onnx"), str(tmp_path / "back.onnx")
    assert run_qconv("convert", src, mid, "--format", "qdq").returncode == 0
    r = run_qconv("convert", mid, back, "--format", "qop", "--contrib")
    assert r.returncode == 0, r.stderr
    a = sorted(nh.to_array(t).tobytes() for t in onnx.load(src).graph.initializer)
    b = sorted(nh.to_array(t).tobytes() for t in onnx.load(back).graph.initializer)
    assert a == b


def test_accuracy_level_is_named_not_kept(tmp_path):
    src = quantize(str(tmp_path / "nbits.onnx"), 4, True, "qop", accuracy_level=4)
    r = run_qconv("convert", src, str(tmp_path / "qdq.onnx"), "--format", "qdq", "-v", "--report", str(tmp_path / "r.json"))
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("accuracy_level 4 not kept") == 2
    notes = json.load(open(tmp_path / "r.json"))["items"][0]["notes"]
    assert sum("accuracy_level 4 not kept" in n["reason"] for n in notes) == 2


def edit(src, dst, fn):
    m = onnx.load(src)
    fn(m)
    onnx.save(m, dst)
    return dst


def test_act_order_and_float_zero_points_stay_with_their_reason(tmp_path):
    src = quantize(str(tmp_path / "nbits.onnx"), 4, False, "qop")

    def act_order(m):
        order = np.arange(K, dtype=np.int32)[::-1] // 32
        m.graph.initializer.append(nh.from_array(order.copy(), "g_idx"))
        node = m.graph.node[0]
        node.input.append("g_idx")

    def float_zero(m):
        node = m.graph.node[0]
        zp = next(t for t in m.graph.initializer if t.name == node.input[3])
        m.graph.initializer.remove(zp)
        m.graph.initializer.append(nh.from_array(np.full((N, 3), 8.0, np.float32), zp.name))

    for name, fn, reason in [("act_order", act_order, "g_idx reorders K by group (act-order)"),
                             ("float_zero", float_zero, "zero points are float: a DequantizeLinear's zero point has the weight's integer type")]:
        path = edit(src, str(tmp_path / f"{name}.onnx"), fn)
        r = run_qconv("convert", path, str(tmp_path / f"{name}_out.onnx"), "--format", "qdq", "-v")
        assert r.returncode == 0, r.stderr
        assert f"mm1_Q4: stays com.microsoft::MatMulNBits: {reason}" in r.stderr, r.stderr
        assert ops(str(tmp_path / f"{name}_out.onnx")).count(("com.microsoft", "MatMulNBits")) == 1


def test_an_op_that_changed_meaning_before_opset_21_keeps_matmul_nbits(tmp_path):
    """The blocked DequantizeLinear needs opset 21; a Pad-13 (19 added mode 'wrap', a change of
    allowed values) cannot be redeclared, so the MatMulNBits stay, and the reason names the node.
    A ReduceMean-13 (axes an attribute, 18 made it an input) no longer blocks: its axes move to a
    constant input and the model is raised."""
    src = quantize(str(tmp_path / "nbits.onnx"), 4, True, "qop")

    def add(op):
        def edit_model(m):
            out = m.graph.output[0].name
            m.graph.node[-1].output[0] = "pre"
            if op == "Pad":
                m.graph.initializer.append(nh.from_array(np.zeros(6, np.int64), "pads"))
                m.graph.node.append(h.make_node("Pad", ["pre", "pads"], [out], "pad"))
            else:
                m.graph.node.append(h.make_node("ReduceMean", ["pre"], [out], "rmean", axes=[2], keepdims=1))
                m.graph.output[0].CopyFrom(h.make_tensor_value_info(out, T.FLOAT, [2, 5, 1]))
        return edit_model

    path = edit(src, str(tmp_path / "pad.onnx"), add("Pad"))
    dst = str(tmp_path / "out.onnx")
    r = run_qconv("convert", path, dst, "--format", "qdq", "-v")
    assert r.returncode == 0, r.stderr
    assert "its standard form needs opset 21, and node 'pad' (Pad) does not keep its meaning" in r.stderr
    assert ops(dst).count(("com.microsoft", "MatMulNBits")) == 2

    path = edit(src, str(tmp_path / "reduce.onnx"), add("ReduceMean"))
    r = run_qconv("convert", path, dst, "--format", "qdq")
    assert r.returncode == 0, r.stderr
    m = onnx.load(dst)
    onnx.checker.check_model(m, full_check=True)
    assert ops(dst).count(("com.microsoft", "MatMulNBits")) == 0
    rmean = next(n for n in m.graph.node if n.op_type == "ReduceMean")
    assert len(rmean.input) == 2 and not any(a.name == "axes" for a in rmean.attribute)


def test_inspect_and_verify_read_matmul_nbits(tmp_path):
    src = quantize(str(tmp_path / "nbits.onnx"), 4, False, "qop")
    i = json.loads(run_qconv("inspect", src, "--json").stdout)
    assert [d["dialect"] for d in i["dialects"]] == ["onnxruntime com.microsoft"]
    assert [t["type"] for t in i["quantized_tensors"]] == ["4-bit, packed in uint8"] * 2
    v = run_qconv("verify", src, "--json")
    assert v.returncode == 0 and json.loads(v.stdout)["quantized_tensors"] == 2


# --- GatherBlockQuantized <-> DequantizeLinear(block_size) -> Gather (4-bit embedding tables) ---

IDS = np.array([[0, 5, 49, 3, 3, 17, 8], [1, 2, 40, 41, 9, 0, 33]], np.int64)


def embedding_model(path):
    """Gather over a [50, 64] table, then a MatMul: what onnxruntime's weight-only quantizer
    makes GatherBlockQuantized and MatMulNBits of."""
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer
    rng = np.random.default_rng(0)
    g = h.make_graph([h.make_node("Gather", ["emb", "ids"], ["e"], "gather"), h.make_node("MatMul", ["e", "w"], ["y"], "mm")],
                     "g", [h.make_tensor_value_info("ids", T.INT64, [2, 7])], [h.make_tensor_value_info("y", T.FLOAT, [2, 7, 32])],
                     [nh.from_array(rng.normal(0, 1, (50, 64)).astype(np.float32), "emb"),
                      nh.from_array(rng.normal(0, .2, (64, 32)).astype(np.float32), "w")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    cfg = DefaultWeightOnlyQuantConfig(block_size=32, is_symmetric=True, bits=4, op_types_to_quantize=("MatMul", "Gather"))
    q = MatMulNBitsQuantizer(m, algo_config=cfg)
    q.process()
    onnx.save(q.model.model, path)
    return path


def test_gather_block_quantized_both_ways(tmp_path):
    src = embedding_model(str(tmp_path / "emb.onnx"))
    assert ("com.microsoft", "GatherBlockQuantized") in ops(src)
    qdq, back = str(tmp_path / "qdq.onnx"), str(tmp_path / "back.onnx")
    r = run_qconv("convert", src, qdq, "--format", "qdq", "-v")
    assert r.returncode == 0, r.stderr
    assert "1 GatherBlockQuantized lowered to DequantizeLinear(block_size) -> Gather" in r.stderr
    assert [op for _, op in ops(qdq)] == ["DequantizeLinear", "Gather", "DequantizeLinear", "MatMul"]
    onnx.checker.check_model(onnx.load(qdq), full_check=True)
    want = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, {"ids": IDS})[0]
    agree(onnx.reference.ReferenceEvaluator(qdq).run(None, {"ids": IDS})[0], want)
    r = run_qconv("convert", qdq, back, "--format", "qop", "--contrib", "-v")
    assert r.returncode == 0, r.stderr
    assert "1 Gather fused to GatherBlockQuantized" in r.stderr and "left as they were" not in r.stderr
    assert sorted(op for _, op in ops(back)) == ["GatherBlockQuantized", "MatMulNBits"]
    agree(ort.InferenceSession(back, providers=["CPUExecutionProvider"]).run(None, {"ids": IDS})[0], want)
    i = json.loads(run_qconv("inspect", src, "--json").stdout)
    assert sorted(t["type"] for t in i["quantized_tensors"]) == ["4-bit, packed in uint8", "int4"]


def test_a_uint4_table_with_zero_points_fuses_and_one_without_stays_named(tmp_path):
    src = embedding_model(str(tmp_path / "emb.onnx"))
    qdq = str(tmp_path / "qdq.onnx")
    assert run_qconv("convert", src, qdq, "--format", "qdq").returncode == 0
    m = onnx.load(qdq)
    table = next(t for t in m.graph.initializer if t.name == m.graph.node[0].input[0])
    values = nh.to_array(table).astype(np.int32) + 8  # the same numbers as uint4 at zero point 8
    table.CopyFrom(h.make_tensor(table.name, T.UINT4, values.shape, values.ravel().tolist()))
    scales = next(t for t in m.graph.initializer if t.name == m.graph.node[0].input[1])
    m.graph.initializer.append(h.make_tensor("table_zero", T.UINT4, list(scales.dims), [8] * int(np.prod(scales.dims))))
    m.graph.node[0].input.append("table_zero")
    with_zero = str(tmp_path / "uint4.onnx")
    onnx.save(m, with_zero)
    want = onnx.reference.ReferenceEvaluator(qdq).run(None, {"ids": IDS})[0]
    out = str(tmp_path / "out.onnx")
    r = run_qconv("convert", with_zero, out, "--format", "qop", "--contrib", "-v")
    assert r.returncode == 0 and "1 Gather fused to GatherBlockQuantized" in r.stderr, r.stderr
    agree(ort.InferenceSession(out, providers=["CPUExecutionProvider"]).run(None, {"ids": IDS})[0], want)
    del m.graph.node[0].input[2]  # uint4 without zero points: 0 in the standard op, 8 in onnxruntime's
    m.graph.initializer.remove(next(t for t in m.graph.initializer if t.name == "table_zero"))
    onnx.save(m, with_zero)
    r = run_qconv("convert", with_zero, out, "--format", "qop", "--contrib", "-v")
    assert r.returncode == 0
    assert "not fused to GatherBlockQuantized: a uint4 table without zero points" in r.stderr, r.stderr


def test_a_large_weight_with_external_data_both_ways(tmp_path):
    """A weight of 1 MiB or more, repacked, leaves memory for a temporary file until the writer
    copies it into the output's data file (ir::ByteKeeper): LLM weights are repacked one at a time."""
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer
    rng = np.random.default_rng(5)
    k, n = 2048, 1536
    g = h.make_graph([h.make_node("MatMul", ["x", "w"], ["y"], "mm")], "g", [h.make_tensor_value_info("x", T.FLOAT, [3, k])],
                     [h.make_tensor_value_info("y", T.FLOAT, [3, n])], [nh.from_array(rng.normal(0, .1, (k, n)).astype(np.float32), "w")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 21)])
    m.ir_version = 10
    q = MatMulNBitsQuantizer(m, algo_config=DefaultWeightOnlyQuantConfig(block_size=32, is_symmetric=False, bits=4))
    q.process()
    src = str(tmp_path / "nbits.onnx")
    onnx.save(q.model.model, src, save_as_external_data=True, location="nbits.onnx.data", size_threshold=1024)
    qdq, back = str(tmp_path / "qdq.onnx"), str(tmp_path / "back.onnx")
    for a, b, flags in ((src, qdq, ["--format", "qdq"]), (qdq, back, ["--format", "qop", "--contrib"])):
        r = run_qconv("convert", a, b, *flags)
        assert r.returncode == 0, r.stderr
        assert [f for f in os.listdir(tmp_path) if f.startswith(os.path.basename(b) + ".") and f.endswith(".data")]
    x = rng.normal(0, 1, (3, k)).astype(np.float32)
    want = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    agree(onnx.reference.ReferenceEvaluator(qdq).run(None, {"x": x})[0], want)
    agree(ort.InferenceSession(back, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0], want)
    a = sorted(nh.to_array(t, base_dir=str(tmp_path)).tobytes() for t in onnx.load(src, load_external_data=False).graph.initializer)
    b = sorted(nh.to_array(t, base_dir=str(tmp_path)).tobytes() for t in onnx.load(back, load_external_data=False).graph.initializer)
    assert a == b
