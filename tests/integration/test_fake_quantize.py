"""OpenVINO / NNCF FakeQuantize (org.openvinotoolkit) -> standard ONNX.

onnxruntime cannot run FakeQuantize, so the judge is a twin from OpenVINO's FakeQuantize-1
specification, computed in float32 numpy:
    y = ol if x <= min(il, ih); oh if x > max(il, ih);
        round((x - il) / (ih - il) * (levels-1)) / (levels-1) * (oh - ol) + ol otherwise
(round: ties to even). By default qconv's output gives exactly the twin's values. With
--approximate a uniform FakeQuantize becomes Q/DQ: within one step of the twin, and listed."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import executed, op_counts, run_qconv, tie_inputs

F32 = np.float32
DOMAIN = "org.openvinotoolkit"


def twin(x, il, ih, ol, oh, levels):
    L = F32(levels - 1)
    v = np.round((x - il) / (ih - il) * L) / L * (oh - ol) + ol
    return np.where(x <= np.minimum(il, ih), ol, np.where(x > np.maximum(il, ih), oh, v)).astype(F32)


def model(il, ih, ol, oh, levels, shape=(2, 3, 8)) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.asarray(v, F32), n) for n, v in [("il", il), ("ih", ih), ("ol", ol), ("oh", oh)]]
    node = helper.make_node("FakeQuantize", ["x", "il", "ih", "ol", "oh"], ["y"], domain=DOMAIN, name="fq_1",
                            levels=levels)
    g = helper.make_graph([node], "fq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(DOMAIN, 1)])
    m.ir_version = 7
    return m


def xs_for(scale: float, seed: int):
    return tie_inputs(seed, scale, (2, 3, 8), spread=100)


CASES = {  # NNCF's usual forms, and a general one
    "symmetric-int8": (-128 * 0.02, 127 * 0.02, -128 * 0.02, 127 * 0.02, 256),
    "narrow-int8": (-127 * 0.02, 127 * 0.02, -127 * 0.02, 127 * 0.02, 255),
    "unsigned": (0.0, 255 * 0.01, 0.0, 255 * 0.01, 256),
    "asymmetric": (-3 * 0.05, 252 * 0.05, -3 * 0.05, 252 * 0.05, 256),
    "4-bit": (-8 * 0.1, 7 * 0.1, -8 * 0.1, 7 * 0.1, 16),
    "output-range-differs": (-1.0, 1.0, -2.0, 3.0, 256),
}


@pytest.mark.parametrize("case", list(CASES))
def test_fake_quantize_emulation_is_exact(case, tmp_path):
    il, ih, ol, oh = (F32(v) for v in CASES[case][:4])
    levels = CASES[case][4]
    src, dst = str(tmp_path / "fq.onnx"), str(tmp_path / "std.onnx")
    onnx.save(model(il, ih, ol, oh, levels), src)
    r = run_qconv("convert", src, dst, "--format", "qdq", "-v")
    assert r.returncode == 0, r.stderr
    out = onnx.load(dst)
    assert not any(n.domain for n in out.graph.node)
    onnx.checker.check_model(out, full_check=True)
    assert "fq_1: FakeQuantize emulated exactly with float ops" in r.stderr
    xs = xs_for(float((ih - il) / (levels - 1)), 9)
    for x, got in zip(xs, executed(dst, xs)):
        np.testing.assert_array_equal(got, twin(x, il, ih, ol, oh, levels))


@pytest.mark.parametrize("case", ["symmetric-int8", "narrow-int8", "unsigned", "asymmetric", "4-bit"])
def test_fake_quantize_approximated_as_qdq_is_listed(case, tmp_path):
    il, ih, ol, oh = (F32(v) for v in CASES[case][:4])
    levels = CASES[case][4]
    src, dst = str(tmp_path / "fq.onnx"), str(tmp_path / "std.onnx")
    onnx.save(model(il, ih, ol, oh, levels), src)
    r = run_qconv("convert", src, dst, "--format", "qdq", "--approximate")
    assert r.returncode == 0, r.stderr
    assert "fq_1: approximation: FakeQuantize written as QuantizeLinear/DequantizeLinear" in r.stderr
    out = onnx.load(dst)
    meta = {p.key: p.value for p in out.metadata_props}
    assert meta["qconv.approximations"].startswith("fq_1: FakeQuantize written as QuantizeLinear/DequantizeLinear")
    assert op_counts(dst).get("QuantizeLinear", 0) == 1
    step = float((ih - il) / (levels - 1))
    xs = xs_for(step, 10)
    for x, got in zip(xs, executed(dst, xs)):
        assert float(np.max(np.abs(got - twin(x, il, ih, ol, oh, levels)))) <= step * 1.0001


def test_fake_quantize_per_channel_approximated(tmp_path):
    s = np.array([0.02, 0.05, 0.1], F32).reshape(1, 3, 1)
    il, ih = (-128 * s).astype(F32), (127 * s).astype(F32)
    src, dst = str(tmp_path / "fq.onnx"), str(tmp_path / "std.onnx")
    onnx.save(model(il, ih, il, ih, 256), src)
    r = run_qconv("convert", src, dst, "--format", "qdq", "--approximate")
    assert r.returncode == 0, r.stderr
    q = next(n for n in onnx.load(dst).graph.node if n.op_type == "QuantizeLinear")
    assert [a.i for a in q.attribute if a.name == "axis"] == [1]
    for x, got in zip(xs_for(0.05, 11), executed(dst, xs_for(0.05, 11))):
        assert np.all(np.abs(got - twin(x, il, ih, il, ih, 256)) <= s * 1.0001)


def test_fake_quantize_with_differing_output_range_is_not_approximated(tmp_path):
    il, ih, ol, oh = (F32(v) for v in CASES["output-range-differs"][:4])
    src, dst = str(tmp_path / "fq.onnx"), str(tmp_path / "std.onnx")
    onnx.save(model(il, ih, ol, oh, 256), src)
    r = run_qconv("convert", src, dst, "--format", "qop", "--approximate", "-v")
    assert r.returncode == 0, r.stderr
    assert "fq_1: FakeQuantize emulated exactly with float ops (output range differs from input range)" in r.stderr
    x = xs_for(0.01, 12)
    np.testing.assert_array_equal(executed(dst, x)[0], twin(x[0], il, ih, ol, oh, 256))


def test_fake_quantize_with_one_level_is_refused(tmp_path):
    src, dst = str(tmp_path / "fq.onnx"), str(tmp_path / "out.onnx")
    onnx.save(model(F32(-1), F32(1), F32(-1), F32(1), 1), src)
    r = run_qconv("convert", src, dst, "--format", "qdq")
    assert r.returncode == 4
    assert [line for line in r.stderr.splitlines() if "error" in line] == [
        f"qconv: error: {src}: fq_1: FakeQuantize not converted: needs 5 inputs, levels from 2 to 2^24 and opset 12 "
        "(levels 1, opset 13)"]
    assert not (tmp_path / "out.onnx").exists()
