"""Dialects lowered to standard ONNX, judged by onnxruntime:
- com.microsoft Q/DQ, as onnxruntime's own quantizer writes them (UseQDQContribOps);
- Q/DQ written as primitive ops (Div -> Round -> Add -> Clip -> Cast, Cast -> Sub -> Mul),
  made from real quantize_static models, including narrow ranges.
Under the ONNX reference, --format qdq must give the original's numbers bit for bit, and
--format qop must fuse every target and stay within one quantization step of the original."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import models
from conftest import judge_qdq, judge_qop, op_counts, run_qconv


def check_standard_forms(name: str, src: str, twin: str, judge: str, xs, tmp_path) -> str:
    """The two promises for a dialect model `src`, under the ONNX reference:
    --format qdq gives standard ONNX only, checker-clean, with `twin`'s numbers bit for bit;
    --format qop fuses every target and stays within one output step of `judge` (src itself
    when the reference runs it, else its standard twin). onnxruntime agrees with both.
    Returns the QDQ output's path."""
    qdq = str(tmp_path / "qdq.onnx")
    r = run_qconv("convert", src, qdq, "--format", "qdq")
    assert r.returncode == 0, r.stderr
    assert not any(n.domain for n in onnx.load(qdq).graph.node)
    onnx.checker.check_model(onnx.load(qdq), full_check=True)
    judge_qdq(src, qdq, xs, twin=twin)
    qop = str(tmp_path / "qop.onnx")
    r = run_qconv("convert", src, qop, "--format", "qop")
    assert r.returncode == 0, r.stderr
    target, expected = models.TARGET_COUNTS[name]
    assert op_counts(qop).get("QLinearConv" if target == "Conv" else "QLinearMatMul", 0) == expected
    judge_qop(judge, qop, xs)
    return qdq


def quantize_contrib(name: str, path: str, activation: str, work) -> None:
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    fm = models.FLOAT_MODELS[name]()
    src = str(work / f"float_{name}.onnx")
    onnx.save(fm, src)

    quantize_static(src, path, models.calibration_reader(models.sample_inputs(fm, 8, seed=123)), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type={"uint8": QuantType.QUInt8, "int8": QuantType.QInt8,
                                     "uint16": QuantType.QUInt16}[activation],
                    weight_type=QuantType.QInt8, extra_options={"UseQDQContribOps": True})


@pytest.mark.parametrize("name", ["small_cnn", "resnet_style", "mlp"])
@pytest.mark.parametrize("activation", ["uint8", "int8"])
def test_contrib_qdq_from_onnxruntime(name, activation, tmp_path):
    src = str(tmp_path / "contrib.onnx")
    quantize_contrib(name, src, activation, tmp_path)
    assert any(n.domain == "com.microsoft" for n in onnx.load(src).graph.node)
    xs = models.sample_inputs(models.FLOAT_MODELS[name](), 6, seed=8)
    # onnxruntime runs com.microsoft Q/DQ: the model is its own twin and its own judge
    check_standard_forms(name, src, src, src, xs, tmp_path)


def test_contrib_uint16_at_opset_21_lowers_exactly_and_is_not_fused(tmp_path):
    src = str(tmp_path / "contrib16.onnx")
    quantize_contrib("small_cnn", src, "uint16", tmp_path)
    qdq = str(tmp_path / "qdq.onnx")
    r = run_qconv("convert", src, qdq, "--format", "qdq")
    assert r.returncode == 0, r.stderr
    assert not any(n.domain == "com.microsoft" for n in onnx.load(qdq).graph.node)
    xs = models.sample_inputs(models.small_cnn(), 4, seed=8)
    judge_qdq(src, qdq, xs)
    qop = str(tmp_path / "qop.onnx")
    r = run_qconv("convert", src, qop, "--format", "qop", "-v")
    assert r.returncode == 0
    assert r.stderr.count("not fused: x is uint16: QLinear ops take 8-bit integers (int8, uint8) only") == 3
    judge_qdq(src, qop, xs)  # nothing fused: still the input's numbers, bit for bit


def expand_to_primitives(src: str, dst: str, narrow_first: bool = False) -> int:
    """Rewrite every activation QuantizeLinear/DequantizeLinear (per tensor) as primitive ops,
    seed 001's order. With narrow_first, the first int8 quantizer clips to [-127, 127]."""
    m = onnx.load(src)
    inits = {t.name: t for t in m.graph.initializer}
    out, made, narrowed = [], 0, False
    for n in m.graph.node:
        scale = inits.get(n.input[1]) if len(n.input) > 1 else None
        if n.op_type not in ("QuantizeLinear", "DequantizeLinear") or scale is None or list(scale.dims) not in ([], [1]) \
                or n.input[0] in inits:
            out.append(n)
            continue
        zp = inits[n.input[2]]
        ztype = zp.data_type
        zval = float(numpy_helper.to_array(zp).reshape(-1)[0])
        zf = n.output[0] + "_zp_f"
        m.graph.initializer.append(numpy_helper.from_array(np.array(zval, np.float32), zf))
        o = n.output[0]
        if n.op_type == "QuantizeLinear":
            lo, hi = (0.0, 255.0) if ztype == TensorProto.UINT8 else (-128.0, 127.0)
            if narrow_first and ztype == TensorProto.INT8 and not narrowed:
                lo, narrowed = -127.0, True
            lo_n, hi_n = o + "_lo", o + "_hi"
            m.graph.initializer.append(numpy_helper.from_array(np.array(lo, np.float32), lo_n))
            m.graph.initializer.append(numpy_helper.from_array(np.array(hi, np.float32), hi_n))
            out += [helper.make_node("Div", [n.input[0], n.input[1]], [o + "_d"]),
                    helper.make_node("Round", [o + "_d"], [o + "_r"]),
                    helper.make_node("Add", [o + "_r", zf], [o + "_a"]),
                    helper.make_node("Clip", [o + "_a", lo_n, hi_n], [o + "_c"]),
                    helper.make_node("Cast", [o + "_c"], [o], to=ztype, name=n.name)]
        else:
            out += [helper.make_node("Cast", [n.input[0]], [o + "_f"], to=TensorProto.FLOAT),
                    helper.make_node("Sub", [o + "_f", zf], [o + "_s"]),
                    helper.make_node("Mul", [o + "_s", n.input[1]], [o], name=n.name)]
        made += 1
    del m.graph.node[:]
    m.graph.node.extend(out)
    onnx.checker.check_model(m)
    onnx.save(m, dst)
    return made


@pytest.mark.parametrize("name", ["small_cnn", "resnet_style", "mobilenet_style", "mlp"])
@pytest.mark.parametrize("activation", ["uint8", "int8"])
def test_primitive_qdq_lowers_exactly_and_fuses(name, activation, quantized, tmp_path):
    std = quantized((name, True, activation))
    src = str(tmp_path / "primitive.onnx")
    assert expand_to_primitives(std, src) > 0
    xs = models.sample_inputs(models.FLOAT_MODELS[name](), 6, seed=21)
    qdq = check_standard_forms(name, src, src, std, xs, tmp_path)
    counts = op_counts(qdq)
    for op in ("Div", "Round", "Clip", "Cast", "Sub"):
        assert counts.get(op, 0) == 0, f"{op} left"
    assert counts["QuantizeLinear"] == op_counts(std)["QuantizeLinear"]


def test_narrow_range_is_kept_exactly(quantized, tmp_path):
    std = quantized(("small_cnn", True, "int8"))
    src = str(tmp_path / "narrow.onnx")
    expand_to_primitives(std, src, narrow_first=True)
    xs = [x * 4 for x in models.sample_inputs(models.small_cnn(), 6, seed=4)]  # reach the clip
    for fmt in ("qdq", "qop"):
        dst = str(tmp_path / f"{fmt}.onnx")
        r = run_qconv("convert", src, dst, "--format", fmt)
        assert r.returncode == 0, r.stderr
        clips = [n for n in onnx.load(dst).graph.node if n.op_type == "Clip"]
        assert len(clips) == 1  # the integer Clip that keeps [-127, 127]
    judge_qdq(src, str(tmp_path / "qdq.onnx"), xs)


def as_quark(src: str, dst: str, domain: str = "com.amd.quark", prefix: str = "Extended") -> int:
    """Rewrite a standard QDQ model in AMD Quark's form: com.amd.quark ExtendedQuantizeLinear /
    ExtendedDequantizeLinear, with axis=0 left out (Quark reads a missing axis as 0). Quark's
    kernel computes saturate(nearbyint(x / s) + z) and (q - z) * s, so the standard original is
    this model's twin."""
    m = onnx.load(src)
    made = 0
    for n in m.graph.node:
        if n.domain == "" and n.op_type in ("QuantizeLinear", "DequantizeLinear"):
            n.domain = domain
            n.op_type = prefix + n.op_type
            keep = [a for a in n.attribute if not (a.name == "axis" and a.i == 0)]
            del n.attribute[:]
            n.attribute.extend(keep)
            made += 1
    m.opset_import.append(helper.make_opsetid(domain, 1))
    onnx.save(m, dst)
    return made


@pytest.mark.parametrize("name", ["small_cnn", "mobilenet_style", "mlp"])
def test_quark_extended_qdq(name, quantized, tmp_path):
    std = quantized((name, True, "uint8"))
    src = str(tmp_path / "quark.onnx")
    assert as_quark(std, src) > 0
    xs = models.sample_inputs(models.FLOAT_MODELS[name](), 6, seed=31)
    check_standard_forms(name, src, std, std, xs, tmp_path)


@pytest.mark.parametrize("name", ["small_cnn", "mlp"])
def test_vitis_quantize_domain_is_quark_under_its_old_name(name, quantized, tmp_path):
    """com.vai.quantize VitisQuantizeLinear / VitisDequantizeLinear: Quark's deprecated names
    for the same kernels (quark.onnx.tools.convert_custom_ops maps one onto the other)."""
    std = quantized((name, True, "uint8"))
    src = str(tmp_path / "vitis.onnx")
    assert as_quark(std, src, "com.vai.quantize", "Vitis") > 0
    xs = models.sample_inputs(models.FLOAT_MODELS[name](), 6, seed=32)
    check_standard_forms(name, src, std, std, xs, tmp_path)


def test_quark_block_float_op_is_refused(tmp_path):
    """BFPQuantizeDequantize has no standard form: exit 4, the node named, nothing written."""
    node = helper.make_node("BFPQuantizeDequantize", ["x"], ["y"], domain="com.amd.quark", name="bfp_1")
    g = helper.make_graph([node], "bfp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.amd.quark", 1)])
    m.ir_version = 7
    src, dst = str(tmp_path / "bfp.onnx"), str(tmp_path / "out.onnx")
    onnx.save(m, src)
    r = run_qconv("convert", src, dst, "--format", "qdq")
    assert r.returncode == 4
    assert [line for line in r.stderr.splitlines() if "error" in line] == [
        f"qconv: error: {src}: bfp_1: com.amd.quark::BFPQuantizeDequantize has no standard ONNX form in qconv"]
    assert not (tmp_path / "out.onnx").exists()
