"""A real NNCF export (test_data/nncf, made by scripts/make_nncf_export.py with torch 2.15 and
nncf 3.4): post-training quantization of a two-conv CNN, exported with OpenVINO FakeQuantize
nodes whose ranges are Constant nodes (per-tensor on activations, per-channel with 255 levels
on weights).

Judges: a standard-ONNX twin that replaces each FakeQuantize by OpenVINO's FakeQuantize-1
formula in float ops, run by onnxruntime; and the twin is itself checked against what NNCF's
own torch kernels computed for the recorded inputs (two_conv_fq_torch.npz)."""
import os

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import reference
from conftest import ROOT, executed, op_counts, run_qconv, session

SRC = os.path.join(ROOT, "test_data", "nncf", "two_conv_fq.onnx")
RECORDED = os.path.join(ROOT, "test_data", "nncf", "two_conv_fq_torch.npz")


def twin_model(path: str, out: str) -> None:
    """Each FakeQuantize(x, il, ih, ol, oh, levels) becomes
    y = x <= min(il, ih) ? ol : x > max(il, ih) ? oh
        : round((x - il) / (ih - il) * (levels-1)) / (levels-1) * (oh - ol) + ol"""
    m = onnx.load(path)
    nodes = []
    for n in m.graph.node:
        if n.op_type != "FakeQuantize":
            nodes.append(n)
            continue
        x, il, ih, ol, oh = n.input
        levels = helper.get_attribute_value(n.attribute[0])
        p = n.output[0] + "_twin"
        L = helper.make_tensor(p + "_L", onnx.TensorProto.FLOAT, [], [float(levels - 1)])
        m.graph.initializer.append(L)
        mk = lambda op, ins, name: nodes.append(helper.make_node(op, ins, [p + name]))  # noqa: E731
        mk("Sub", [x, il], "_a"), mk("Sub", [ih, il], "_w"), mk("Div", [p + "_a", p + "_w"], "_b")
        mk("Mul", [p + "_b", p + "_L"], "_c"), mk("Round", [p + "_c"], "_r"), mk("Div", [p + "_r", p + "_L"], "_d")
        mk("Sub", [oh, ol], "_ow"), mk("Mul", [p + "_d", p + "_ow"], "_e"), mk("Add", [p + "_e", ol], "_v")
        mk("Min", [il, ih], "_lo"), mk("Max", [il, ih], "_hi")
        mk("LessOrEqual", [x, p + "_lo"], "_below"), mk("Greater", [x, p + "_hi"], "_above")
        mk("Where", [p + "_above", oh, p + "_v"], "_top")
        nodes.append(helper.make_node("Where", [p + "_below", ol, p + "_top"], [n.output[0]]))
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    keep = [op for op in m.opset_import if op.domain in ("", "ai.onnx")]
    del m.opset_import[:]
    m.opset_import.extend(keep)
    onnx.checker.check_model(m)
    onnx.save(m, out)


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("nncf") / "twin.onnx")
    twin_model(SRC, path)
    return path


def recorded_inputs():
    data = np.load(RECORDED)
    return [data["x"][i:i + 1] for i in range(data["x"].shape[0])], data


def probe_outputs(twin: str, names: list[str], tmp_path):
    m = onnx.load(twin)
    m.graph.output.extend(helper.make_empty_tensor_value_info(name) for name in names)
    probe = str(tmp_path / "probe.onnx")
    onnx.save(m, probe)
    return session(probe)


def test_the_twin_differs_from_nncf_kernels_only_on_exact_ties(twin, tmp_path):
    """NNCF's torch kernels quantize in scale form, round(w / s * 127); the exported FakeQuantize
    means OpenVINO's range form, round((w - il) / (ih - il) * 254). The two agree except where a
    value lies exactly on a tie, and this export has such weights (w = s * (k + 0.5) / 127)."""
    data = np.load(RECORDED)
    weight_fq = {"q_w1": "/c1/c1/conv2d/0__1.0/FakeQuantize_output_0",
                 "q_w2": "/c2/c2/conv2d/0__1.0/FakeQuantize_output_0"}
    sess = probe_outputs(twin, list(weight_fq.values()), tmp_path)
    got = sess.run(None, {"x": data["x"][:1]})[1:]
    src = onnx.load(SRC)
    differing = 0
    for (key, name), g in zip(weight_fq.items(), got):
        fq = next(n for n in src.graph.node if n.output[0] == name)
        w = next(numpy_helper.to_array(t) for t in src.graph.initializer if t.name == fq.input[0])
        ih = next(numpy_helper.to_array(n.attribute[0].t) for n in src.graph.node if n.output[0] == fq.input[2])
        units = w / ih * 127  # weight / step
        tie = np.abs(units - np.floor(units) - 0.5) < 1e-6
        off = np.abs(g - data[key]) > 1e-6
        assert not (off & ~tie).any(), np.argwhere(off & ~tie)  # nothing but a tie differs
        differing += int(off.sum())
    assert differing == 7  # the export has ties, and they do differ (all in c1)
    # the input quantizer sees random inputs (no ties): the same values up to float32 rounding
    q_in = np.concatenate([probe_outputs(twin, ["/x__0.0/FakeQuantize_output_0"], tmp_path)
                           .run(None, {"x": data["x"][i:i + 1]})[1] for i in range(len(data["x"]))])
    np.testing.assert_allclose(q_in, data["q_input"], rtol=0, atol=1e-6)


@pytest.mark.parametrize("fmt", ["qdq", "qop"])
def test_nncf_export_converts_exactly(fmt, twin, tmp_path):
    dst = str(tmp_path / f"std_{fmt}.onnx")
    r = run_qconv("convert", SRC, dst, "--format", fmt, "-v")
    assert r.returncode == 0, r.stderr
    out = onnx.load(dst)
    assert not any(n.domain for n in out.graph.node)
    onnx.checker.check_model(out, full_check=True)
    assert r.stderr.count("FakeQuantize emulated exactly with float ops") == 4
    xs, _ = recorded_inputs()
    for got, want in zip(executed(dst, xs, float_sums=True), reference.outputs(twin, xs)):
        np.testing.assert_array_equal(got, want)


def test_nncf_export_approximated_as_qdq_is_listed_and_within_a_step(twin, tmp_path):
    dst = str(tmp_path / "approx.onnx")
    r = run_qconv("convert", SRC, dst, "--format", "qop", "--approximate", "-v")
    assert r.returncode == 0, r.stderr
    meta = {p.key: p.value for p in onnx.load(dst).metadata_props}
    assert len(meta["qconv.approximations"].strip().splitlines()) == 4
    assert op_counts(dst).get("QuantizeLinear", 0) >= 1
    # the input quantizer is int8 (symmetric) and the Relu one uint8: a QLinearConv kernel
    # takes y of x's type, so c1's x is stored as uint8, its zero points moved by 128 (the same
    # tensor), and c1 fuses (issue 36: it stayed Q/DQ before)
    assert "/c1/Conv: x stored as uint8 (its zero points moved by 128)" in r.stderr
    assert op_counts(dst).get("QLinearConv", 0) == 1
    xs, _ = recorded_inputs()
    got, want = executed(dst, xs, float_sums=True), reference.outputs(twin, xs)
    # Q/DQ rounds x / s, as NNCF's own kernels do: a tied weight moves by one step against the
    # twin; the float output (no quantizer on it) moves by at most one step of q_relu through
    # c2 (step * sum|w| < 0.05), against the twin and against NNCF's recorded outputs alike
    assert max(float(np.abs(a - b).max()) for a, b in zip(got, want)) < 0.05
    nncf = np.load(RECORDED)["y"]
    assert float(np.abs(np.concatenate(got) - nncf).max()) < 0.05
