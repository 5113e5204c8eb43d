"""The per-op support tables of the target profiles (OpRule, lib/qconv/targets/target.cpp), held
against the runtimes themselves (issue 47): every probe below is one op alone in one form
(op_probes.py), with what the installed runtime was measured to do with it. For each:

1. the runtime still does that (a new runtime version that changes it fails here, loudly);
2. `qconv verify --target T` names the op exactly when T does not run it;
3. `qconv convert --target T` exits 0 only with an output T runs wholly, and exits 4 only where
   the input does not run there either (qconv refuses nothing T would have run), naming the op.

"Runs" is corpus_run.run_wholly's: QNN's HTP simulator with CPU fallback disabled and soc_model
set (runtimes.QNN_OPTIONS); RKNN's layer table with every computing layer on the NPU in 8 or 16 bits. A form a
table leaves out was not measured."""
from __future__ import annotations

import json
import os

import onnx
import pytest

import corpus_run
import op_probes
import runtimes
from conftest import run_qconv

# under ASan (scripts/sanitize.sh) these runtime probes are not what that build checks
pytestmark = pytest.mark.skipif(bool(os.environ.get("QCONV_SANITIZED")), reason="runtime probes: not run under ASan")

ALL = ("float", "uint8", "int8", "uint16")


def runs(forms_that_run: tuple[str, ...]) -> dict[str, bool]:
    return {f: f in forms_that_run for f in ALL}


# (op, variant) -> form -> whether QNN HTP runs it (measured 2026-11-28, onnxruntime-qnn 2.7.0)
QNN = {
    ("HardSigmoid", ""): runs(("float", "uint8", "uint16")),
    ("LeakyRelu", ""): runs(("float", "uint8", "uint16")),
    ("Neg", ""): runs(("float", "uint8", "uint16")),
    ("BatchNormalization", "quantized parameters"): runs(("uint8", "uint16")),
    ("BatchNormalization", ""): runs(ALL),
    ("Erf", ""): runs(()),
    ("Clip", "computed bounds"): runs(()),
    ("Clip", ""): runs(ALL),
    ("HardSwish", ""): runs(ALL),
    ("Sigmoid", ""): runs(ALL),
    ("Softmax", ""): runs(ALL),
    ("LayerNormalization", ""): runs(ALL),
    ("LayerNormalization", "quantized parameters"): runs(("int8",)),
    ("Gelu", ""): runs(ALL),
}
# measured 2026-11-28: apache-tvm 0.27.0.post1; aidge 0.10.1 (float and 8-bit forms)
EIGHT = ("float", "uint8", "int8")
TVM = {
    ("LSTM", ""): {f: False for f in EIGHT},
    ("Reshape", "shape through Cast"): {f: False for f in EIGHT},
    ("Reshape", ""): {f: True for f in EIGHT},
    ("BatchNormalization", ""): {f: True for f in EIGHT},
    ("HardSigmoid", ""): {f: True for f in EIGHT},
    ("Erf", ""): {f: True for f in EIGHT},
}
AIDGE = {
    ("LSTM", ""): {f: False for f in EIGHT},
    ("Reshape", "shape through Cast"): {f: True for f in EIGHT},
    ("BatchNormalization", ""): {f: True for f in EIGHT},
    ("HardSwish", ""): {f: True for f in EIGHT},
    ("Clip", "computed bounds"): {f: True for f in EIGHT},
    ("LayerNormalization", ""): {f: True for f in EIGHT},
    ("LayerNormalization", "quantized parameters"): {"uint8": False, "int8": False},
    # measured 2026-11-29 (the corpus's Magika classifier): imported as a GenericOperator, no forward();
    # `--target aidge` writes it as a ReduceMax (global-max-pool-as-reduce-max), which runs
    ("GlobalMaxPool", ""): {f: False for f in EIGHT},
}
# measured 2026-11-28: rknn-toolkit2 2.5.0, rk3588 (a float op builds, in FLOAT16: not on the NPU in 8 or 16 bits)
RKNN = {
    ("LSTM", ""): {"float": False},
    ("Sigmoid", ""): {"float": False, "uint8": True, "int8": True},
    ("BatchNormalization", ""): {"float": False, "int8": True},
    ("Slice", "strided"): {"int8": False, "uint8": False},
    ("Slice", ""): {"int8": True, "uint8": True},
    # measured 2026-11-28 (the corpus's layout detector, PP-PicoDet, and probes): the toolkit moves both
    # inputs' Div past the Add and rescales the sum in float16 (Mul FLOAT16 + exDataConvert); one runs in int8
    ("Add", "each input divided"): {"int8": False, "uint8": False},
    ("Add", "one input divided"): {"int8": True, "uint8": True},
    # measured 2026-11-28 (the corpus's captcha_unrolled: an LSTM cell's gates written out): three Sigmoids on
    # the parts of one tensor are merged into Concat -> Sigmoid -> Split in float16; two run in int8
    ("Sigmoid", "on three outputs of one Split"): {"int8": False, "uint8": False},
    ("Sigmoid", "on three Slices of one tensor"): {"int8": False, "uint8": False},
    ("Sigmoid", "on two outputs of one Split"): {"int8": True, "uint8": True},
}
# measured 2026-11-28: openvino 2026.4, CPU at its default precision
OPENVINO = {
    ("Add", "constant quantized at run time, after a Conv"): {"float": True, "uint8": False, "int8": False},
    ("Add", "constant quantized at run time"): {f: True for f in EIGHT},
    ("Add", ""): {f: True for f in EIGHT},
    # measured 2026-11-29 (Silero VAD's LSTM): a weight the model computes from constants and quantizes at
    # run time fails to compile ("expects Constant for port 4"); fold-constant-weights gives it as the
    # floats the chain computes, and the output runs
    ("LSTM", ""): {f: True for f in EIGHT},
    ("LSTM", "gates reordered, quantized at run time"): {f: False for f in EIGHT},
    # measured 2026-11-29: quantized (X dequantized), one of W and R an int8 constant dequantized and the other
    # float fails the same way; both dequantized, or X float, runs
    ("LSTM", "W dequantized"): {"float": True, "uint8": False, "int8": False},
    ("LSTM", "R dequantized"): {"float": True, "uint8": False, "int8": False},
    ("LSTM", "W and R dequantized"): {f: True for f in EIGHT},
}
TABLES = {"qnn": QNN, "tvm": TVM, "aidge": AIDGE, "rknn": RKNN, "openvino": OPENVINO}
OPSET = {"rknn": 19}  # the newest it reads; 21 for the others
CASES = [(t, op, variant, form) for t, table in TABLES.items() for (op, variant), forms in table.items()
         for form in forms if not (variant == "quantized parameters" and form == "float")]


def need(target: str) -> None:
    if target == "qnn":
        pytest.importorskip("onnxruntime_qnn")
    if target == "tvm":
        pytest.importorskip("tvm")
    if target == "aidge":
        pytest.importorskip("aidge_core")
    if target == "iree":
        pytest.importorskip("iree.runtime")
    if target == "openvino":
        pytest.importorskip("openvino")
    if target == "rknn":
        assert runtimes.rknn_python(), "no RKNN venv (scripts/setup_rknn.sh, run by scripts/test.sh)"


def ran(target: str, path: str) -> str:
    """'' when `target` runs the model wholly, else what it said."""
    try:
        corpus_run.run_wholly(target, path, [op_probes.feed()])
        return ""
    except runtimes.Refused as e:
        return str(e) or "refused"


@pytest.mark.parametrize("target,op,variant,form", CASES, ids=[f"{t}-{o}-{v or 'plain'}-{f}".replace(" ", "_")
                                                               for t, o, v, f in CASES])
def test_the_table_holds_in_the_runtime_and_qconv_predicts_it(tmp_path, target, op, variant, form):
    need(target)
    src = str(tmp_path / "probe.onnx")
    onnx.save(op_probes.model(op, form, variant, OPSET.get(target, 21)), src)
    expected = TABLES[target][(op, variant)][form]
    said = ran(target, src)
    assert (said == "") == expected, f"{target} {'no longer runs' if expected else 'now runs'} {op} ({variant}) on {form}: {said}"

    v = run_qconv("verify", src, "--target", target, "--json")
    findings = [f for f in json.loads(v.stdout)["findings"] if f["kind"] == "target"]
    named = [f for f in findings if f["node"] == "probe"]
    assert bool(named) == (not expected), (op, form, findings)

    dst = str(tmp_path / "out.onnx")
    c = run_qconv("convert", src, dst, "--target", target)
    assert c.returncode in (0, 4), c.stderr
    if c.returncode == 0:
        out_said = ran(target, dst)
        assert out_said == "", f"exit 0, yet {target} does not run the output: {out_said}"
    else:
        assert not expected, f"refused what {target} runs: {c.stderr}"
        assert "probe" in c.stderr and f"--target {target}" in c.stderr, c.stderr


# (target, op, probe variant, the opset it reads the op from) as the profiles' op_opset_min say
# (measured 2026-11-28; Aidge's Split 2026-11-29: its sizes in the attribute split, before 13, import
# as a GenericOperator, as captcha_unrolled's did)
OPSET_FLOORS = [("iree", "BatchNormalization", "", 15), ("iree", "Slice", "", 13),
                ("aidge", "Split", "sizes in the attribute", 13)]


@pytest.mark.parametrize("target,op,variant,floor", OPSET_FLOORS)
def test_an_op_read_from_an_opset_on_is_declared_there(tmp_path, target, op, variant, floor):
    """Below the floor the runtime fails on the op, at it it runs: convert --target declares the
    floor (every node keeping its meaning) and the output runs; verify names the opset."""
    need(target)
    src = str(tmp_path / "probe.onnx")
    m = op_probes.model(op, "int8", variant, opset=floor - 2)
    onnx.save(m, src)
    assert ran(target, src), f"{target} now runs {op} at opset {floor - 2}: the floor can go"
    v = run_qconv("verify", src, "--target", target, "--json")
    assert any(f["node"] == "opset_import" and f"declares {floor}" in f["message"] for f in json.loads(v.stdout)["findings"])
    dst = str(tmp_path / "out.onnx")
    c = run_qconv("convert", src, dst, "--target", target)
    assert c.returncode == 0, c.stderr
    assert next(o.version for o in onnx.load(dst).opset_import if o.domain in ("", "ai.onnx")) == floor
    assert ran(target, dst) == ""


# IREE 3.13's failures qconv rewrites exactly (measured 2026-11-28 on Silero VAD, then alone): the
# probe fails in IREE as it is, and `convert --target iree` gives an output IREE runs, equal to
# the ONNX reference of the probe (a new IREE that compiles the probe fails here: the pass can go)
def _iree_probe(kind: str) -> onnx.ModelProto:
    from onnx import TensorProto, helper, numpy_helper
    import numpy as np
    if kind == "reflect Pad":  # torch's F.pad(x, (0, 64), mode="reflect"), as the VAD's STFT pads its input
        shape, out = [1, 576], [1, 640]
        nodes = [helper.make_node("Pad", ["x", "pads"], ["y"], mode="reflect", name="probe")]
        inits = [numpy_helper.from_array(np.array([0, 0, 0, 64], np.int64), "pads")]
    else:  # "strided Conv of length 2": padded to 4, one window of 3 reads it
        shape, out = [1, 8, 2], [1, 8, 1]
        nodes = [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3], strides=[2], pads=[1, 1], name="probe")]
        inits = [numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 8, 3)).astype(np.float32), "w")]
    g = helper.make_graph(nodes, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("kind", ["reflect Pad", "strided Conv of length 2"])
def test_what_iree_fails_on_qconv_writes_exactly_in_a_form_it_runs(tmp_path, kind):
    pytest.importorskip("iree.runtime")
    import numpy as np
    from onnx.reference import ReferenceEvaluator
    src, dst = str(tmp_path / "probe.onnx"), str(tmp_path / "out.onnx")
    m = _iree_probe(kind)
    onnx.save(m, src)
    x = np.random.default_rng(1).standard_normal([d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim])
    x = x.astype(np.float32)
    try:
        runtimes.run_iree(src, [x])
        pytest.fail(f"IREE now runs the {kind} probe: its rewrite can go")
    except runtimes.Refused as e:
        assert "linalg.generic" in str(e), e
    # verify names the Conv on the probe as it is (trim-padding rewrites exactly such Convs); not the
    # reflect Pad, which IREE compiles at some pad sizes (8, 17) and fails at others
    v = run_qconv("verify", src, "--target", "iree", "--json")
    named = [f["message"] for f in json.loads(v.stdout)["findings"] if f["kind"] == "target" and f["node"] == "probe"]
    assert bool(named) == (kind != "reflect Pad"), named
    if named:
        assert named[0].startswith("as it is, IREE 3.13's lowering of a Conv fails where the end padding") and \
            named[0].endswith("convert --target iree: 1 end padding position no window reads dropped (pads now [1, 0]) "
                              "(trim-padding)"), named
    c = run_qconv("convert", src, dst, "--target", "iree")
    assert c.returncode == 0, c.stderr
    ops = [n.op_type for n in onnx.load(dst).graph.node]
    assert ops == (["Gather"] if kind == "reflect Pad" else ["Conv"]), ops
    y = runtimes.run_iree(dst, [x])[0]
    (expected,) = ReferenceEvaluator(m).run(None, {"x": x})
    if kind == "reflect Pad":  # the same elements, copied
        np.testing.assert_array_equal(y, expected)
    else:  # the same sums, in float32
        np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rank,opset", [(3, 15), (4, 21)])
def test_a_global_max_pool_aidge_does_not_import_is_written_as_a_reduce_max_it_runs_exactly(tmp_path, rank, opset):
    """aidge_onnx 0.10.1 imports GlobalMaxPool as a GenericOperator (no forward()); `convert --target
    aidge` writes it as a ReduceMax over the spatial axes (an attribute below opset 18, an input from
    it), which Aidge runs, equal to the ONNX reference of the probe to the bit (reference.py's: onnx.reference's
    GlobalMaxPool reduces the channels of a 3-D input too)."""
    pytest.importorskip("aidge_core")
    import numpy as np
    from onnx import TensorProto, helper
    import reference
    shape = [1, 8, 16] if rank == 3 else [1, 8, 4, 4]
    g = helper.make_graph([helper.make_node("GlobalMaxPool", ["x"], ["y"], name="probe")], "gmp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape[:2] + [1] * (rank - 2))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    src, dst = str(tmp_path / "probe.onnx"), str(tmp_path / "out.onnx")
    onnx.save(m, src)
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    try:
        runtimes.run_aidge(src, [x])
        pytest.fail("Aidge now runs GlobalMaxPool: global-max-pool-as-reduce-max can go")
    except runtimes.Refused as e:
        assert "GenericOperator" in str(e), e
    c = run_qconv("convert", src, dst, "--target", "aidge")
    assert c.returncode == 0, c.stderr
    (node,) = onnx.load(dst).graph.node
    assert node.op_type == "ReduceMax" and (len(node.input) == 2) == (opset >= 18), node
    expected = reference.outputs(src, [x])[0]
    assert expected.shape == tuple(shape[:2] + [1] * (rank - 2)), expected.shape
    np.testing.assert_array_equal(runtimes.run_aidge(dst, [x])[0], expected)
