"""The NPU targets on odd inputs (issue 46, item 5), each proved in the runtime's simulator:
  - a per-tensor int4/uint4 weight for --target rknn (was exit 70): stored in 8 bits, value for
    value, and run; a 4-bit tensor computed at run time is refused, exit 4;
  - the MatMul forms on a graph input: the ones RKNN's build never ends on are rewritten or
    refused (exit 4, verify naming them), the ones it builds are left, and run;
  - opsets 23 to 28 without value_info lower for rknn; onnxruntime 1.32 (and so the QNN EP's
    graph-end Q/DQ) loads up to opset 27: --target onnxruntime and qnn declare 27, verify names 28;
  - an unused com.microsoft import is dropped for the targets that refuse the domain.
And (issue 47, item 6) refusals quoting the rule that failed for the node: QNN runs a per-tensor
weight-only op and refuses a per-channel one; ConvInteger and MatMulInteger in each runtime's words.
The judge is the ONNX reference on the input, as in test_npu_targets.py."""
from __future__ import annotations

import os
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper
from onnx import numpy_helper as nh

sys.path.insert(0, os.path.dirname(__file__))
import reference  # noqa: E402
import runtimes  # noqa: E402
from conftest import run_qconv  # noqa: E402
from test_npu_targets import MISSING, STEPS, need, steps_off  # noqa: E402

HANG_LIMIT = 30  # s: a model this small builds in 2 to 10 s (runtimes.md)


def save(path: str, nodes, inputs, outputs, inits, opset: int = 13) -> str:
    g = helper.make_graph(nodes, os.path.basename(path), inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 13 if opset >= 25 else 11 if opset >= 23 else 10 if opset >= 21 else 7
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return path


def tail(y: str):
    return [helper.make_node("QuantizeLinear", [y, "sy", "zy"], ["yq"], name="qy"),
            helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["out"], name="dqy")]


PARAMS = [nh.from_array(np.float32(0.02), "sx"), nh.from_array(np.uint8(128), "zx"),
          nh.from_array(np.float32(0.01), "sw"), nh.from_array(np.int8(0), "zw"),
          nh.from_array(np.float32(0.05), "sy"), nh.from_array(np.uint8(128), "zy")]
QX = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"], name="qx"),
      helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"], name="dqx")]
K, N, M = 64, 32, 8


def float_feeds(path: str, count: int = 2) -> list[np.ndarray]:
    m = onnx.load(path)
    dims = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    rng = np.random.default_rng(7)
    if m.graph.input[0].type.tensor_type.elem_type == T.UINT8:
        return [rng.integers(0, 256, dims).astype(np.uint8) for _ in range(count)]
    return [rng.normal(0, 1, dims).astype(np.float32) for _ in range(count)]


def runs_on_rknn_as_the_input_computes(src: str, dst: str, input_runs: bool = False) -> None:
    """Within RKNN's bound of the reference on the input; where the input runs on RKNN as it is
    (a form qconv leaves), the output computes there exactly as the input does."""
    xs = float_feeds(src)
    got = runtimes.run_rknn(dst, xs)
    if input_runs:
        assert steps_off(runtimes.run_rknn(src, xs), got, 0.05) == 0
    else:
        assert steps_off(reference.outputs(src, xs), got, 0.05) <= STEPS["rknn"] + 1e-4  # 0.05: sy


# ---- a packed weight --------------------------------------------------------------------------


def packed_weight_model(path: str, dtype: int, zero_point: bool, raw: bool = False) -> str:
    """`raw`: the weight in raw_data, two 4-bit values a byte, the first in the low nibble (the
    spec's storage); else in int32_data as onnx.helper.make_tensor writes it."""
    w = np.random.default_rng(0).integers(-8, 8, (K, N)).astype(np.int64) + (8 if dtype == T.UINT4 else 0)
    if raw:
        nibbles = (w.flatten() & 0xF).astype(np.uint8)
        weight = helper.make_tensor("w", dtype, [K, N], (nibbles[0::2] | (nibbles[1::2] << 4)).tobytes(), raw=True)
    else:
        weight = helper.make_tensor("w", dtype, [K, N], w.flatten().tolist())
    inits = [weight, nh.from_array(np.float32(0.05), "sw4"),
             *[p for p in PARAMS if p.name not in ("sw", "zw")]]
    dq = ["w", "sw4"]
    if zero_point:
        inits.append(helper.make_tensor("zw4", dtype, [], [0 if dtype == T.INT4 else 8]))
        dq.append("zw4")
    return save(path, QX + [helper.make_node("DequantizeLinear", dq, ["wd"], name="dqw"),
                            helper.make_node("MatMul", ["xd", "wd"], ["y"], name="mm")] + tail("y"),
                [helper.make_tensor_value_info("x", T.FLOAT, [M, K])], [helper.make_tensor_value_info("out", T.FLOAT, [M, N])],
                inits, opset=21)


@pytest.mark.parametrize("dtype, zero_point, raw", [(T.INT4, True, False), (T.UINT4, True, False), (T.INT4, False, False),
                                                    (T.INT4, True, True), (T.UINT4, True, True)],
                         ids=["int4", "uint4", "int4-no-zero-point", "int4-raw-data", "uint4-raw-data"])
def test_rknn_stores_a_packed_weight_in_8_bits_and_runs_it(dtype, zero_point, raw, tmp_path):
    src = packed_weight_model(str(tmp_path / "in.onnx"), dtype, zero_point, raw)
    dst = str(tmp_path / "out.onnx")
    r = run_qconv("convert", src, dst, "--target", "rknn", "-v")
    name = "int4" if dtype == T.INT4 else "uint4"
    assert r.returncode == 0, r.stderr  # 09f6d0c: exit 70, "makeIntTensor: int4 is not an integer type"
    assert f"dqw: {name} weight stored as {'int8' if dtype == T.INT4 else 'uint8'}, value for value" in r.stderr
    out = onnx.load(dst)
    assert {t.data_type for t in out.graph.initializer} <= {T.FLOAT, T.INT8, T.UINT8, T.INT64}
    assert run_qconv("inspect", src, "--target", "rknn").returncode == 0
    need("rknn")
    runs_on_rknn_as_the_input_computes(src, dst)


def test_rknn_refuses_a_4_bit_tensor_computed_at_run_time(tmp_path):
    inits = [nh.from_array(np.float32(0.05), "s"), helper.make_tensor("z", T.INT4, [], [0])]
    src = save(str(tmp_path / "in.onnx"), [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="qx"),
                                          helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["y"], name="dqx")],
               [helper.make_tensor_value_info("x", T.FLOAT, [1, 16])], [helper.make_tensor_value_info("y", T.FLOAT, [1, 16])],
               inits, opset=21)
    r = run_qconv("convert", src, str(tmp_path / "out.onnx"), "--target", "rknn")
    assert r.returncode == 4 and "qx:" in r.stderr, r.stderr
    v = run_qconv("verify", src, "--target", "rknn")
    assert v.returncode == 1 and "qx: error: target:" in v.stdout and "it is int4" in v.stdout


# ---- the MatMul forms on a graph input --------------------------------------------------------


def matmul_form(path: str, form: str) -> str:
    rng = np.random.default_rng(0)
    w = nh.from_array(rng.integers(-127, 128, (K, N)).astype(np.int8), "w")
    dqw = helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wd"], name="dqw")
    out = lambda shape: [helper.make_tensor_value_info("out", T.FLOAT, shape)]  # noqa: E731
    if form.startswith("u8-input"):  # a uint8 graph input, its DequantizeLinear straight from it
        shape = [M, K] if form.endswith("rank2") else [1, 1, M, K]
        return save(path, [helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"], name="dqx"), dqw,
                           helper.make_node("MatMul", ["xd", "wd"], ["y"], name="mm")] + tail("y"),
                    [helper.make_tensor_value_info("xq", T.UINT8, shape)], out(shape[:-1] + [N]), PARAMS + [w])
    if form == "two-inputs":
        return save(path, QX + [helper.make_node("QuantizeLinear", ["b", "sx", "zx"], ["bq"], name="qb"),
                                helper.make_node("DequantizeLinear", ["bq", "sx", "zx"], ["bd"], name="dqb"),
                                helper.make_node("MatMul", ["xd", "bd"], ["y"], name="mm")] + tail("y"),
                    [helper.make_tensor_value_info("x", T.FLOAT, [M, K]), helper.make_tensor_value_info("b", T.FLOAT, [K, N])],
                    out([M, N]), PARAMS)
    if form == "weight-first":
        wf = nh.from_array(rng.integers(-127, 128, (M, K)).astype(np.int8), "w")
        return save(path, QX + [dqw, helper.make_node("MatMul", ["wd", "xd"], ["y"], name="mm")] + tail("y"),
                    [helper.make_tensor_value_info("x", T.FLOAT, [K, N])], out([M, N]), PARAMS + [wf])
    assert form == "batched-weight"
    wb = nh.from_array(rng.integers(-127, 128, (2, K, N)).astype(np.int8), "w")
    return save(path, QX + [dqw, helper.make_node("MatMul", ["xd", "wd"], ["y"], name="mm")] + tail("y"),
                [helper.make_tensor_value_info("x", T.FLOAT, [2, M, K])], out([2, M, N]), PARAMS + [wb])


@pytest.mark.parametrize("form", ["u8-input-rank2", "u8-input-rank4", "weight-first"])
def test_rknn_builds_these_matmul_forms_as_they_are(form, tmp_path):
    """targets.md said RKNN never builds a MatMul on a quantized graph input; these it builds and
    runs (measured), so qconv leaves them, and they compute there as the input does (RKNN is
    up to 3.5 steps off the reference on the weight-first form, input and output alike)."""
    src = matmul_form(str(tmp_path / "in.onnx"), form)
    dst = str(tmp_path / "out.onnx")
    r = run_qconv("convert", src, dst, "--target", "rknn")
    assert r.returncode == 0 and "nothing to change" in r.stderr, r.stderr
    assert [n.op_type for n in onnx.load(dst).graph.node].count("MatMul") == 1
    need("rknn")
    runs_on_rknn_as_the_input_computes(src, dst, input_runs=True)


@pytest.mark.parametrize("form", ["two-inputs", "batched-weight"])
def test_rknn_refuses_the_matmul_forms_its_build_never_ends_on(form, tmp_path, monkeypatch):
    src = matmul_form(str(tmp_path / "in.onnx"), form)
    r = run_qconv("convert", src, str(tmp_path / "out.onnx"), "--target", "rknn")
    assert r.returncode == 4, r.stderr  # 09f6d0c: exit 0, "left as they were"
    assert "mm: not written as a 1x1 Conv: rknn-toolkit2 2.5 never finishes building" in r.stderr
    assert not os.path.exists(tmp_path / "out.onnx")
    v = run_qconv("verify", src, "--target", "rknn")
    assert v.returncode == 1 and "mm: error: target: not written as a 1x1 Conv" in v.stdout, v.stdout
    need("rknn")
    monkeypatch.setattr(runtimes, "RKNN_TIMEOUT", HANG_LIMIT)
    with pytest.raises(runtimes.Refused, match="did not finish"):
        runtimes.run_rknn(src, [])  # the build alone: it never ends


# ---- opsets ------------------------------------------------------------------------------------


def conv_model(path: str, opset: int, microsoft: bool = False) -> str:
    """A QDQ Conv with no value_info (a model shape inference never ran on)."""
    w = np.random.default_rng(0).integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    nodes = QX + [helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wd"], name="dqw"),
                  helper.make_node("Conv", ["xd", "wd"], ["y"], name="conv")] + tail("y")
    save(path, nodes, [helper.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])],
         [helper.make_tensor_value_info("out", T.FLOAT, [1, 4, 6, 6])], PARAMS + [nh.from_array(w, "w")], opset)
    if microsoft:
        m = onnx.load(path)
        m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
        onnx.save(m, path)
    return path


def declared(path: str) -> dict[str, int]:
    return {o.domain: o.version for o in onnx.load(path).opset_import}


@pytest.mark.parametrize("opset", [23, 25, 28])
def test_rknn_lowers_opsets_23_to_28_without_value_info(opset, tmp_path):
    src = conv_model(str(tmp_path / "in.onnx"), opset)
    dst = str(tmp_path / "out.onnx")
    r = run_qconv("convert", src, dst, "--target", "rknn")
    assert r.returncode == 0, r.stderr  # 09f6d0c: "the element type of 'xd' is neither declared nor inferable"
    assert declared(dst) == {"": 19}
    need("rknn")
    runs_on_rknn_as_the_input_computes(src, dst)


@pytest.mark.parametrize("target", ["onnxruntime", "qnn"])
def test_opset_28_is_declared_27_where_onnxruntime_loads_it(target, tmp_path):
    """onnxruntime 1.32: 'Could not find an implementation for QuantizeLinear(28)'. The QNN EP's
    graph-end Q/DQ run on onnxruntime's CPU kernels (offload_graph_io_quantization, its default)."""
    src = conv_model(str(tmp_path / "in.onnx"), 28)
    dst = str(tmp_path / "out.onnx")
    fmt = ["--format", "qdq"] if target == "onnxruntime" else []
    r = run_qconv("convert", src, dst, "--target", target, *fmt)
    assert r.returncode == 0, r.stderr
    assert declared(dst) == {"": 27}  # 09f6d0c: 28
    v = run_qconv("verify", src, "--target", target)
    assert v.returncode == 1 and "opset_import: error: target: the model declares ai.onnx opset 28" in v.stdout, v.stdout
    assert "opset_import" not in run_qconv("verify", dst, "--target", target).stdout
    xs = [np.random.default_rng(3).normal(0, 1, (1, 3, 8, 8)).astype(np.float32)]
    import onnxruntime as ort
    with pytest.raises(Exception, match="QuantizeLinear\\(28\\)"):  # what the input does there
        ort.InferenceSession(src, providers=["CPUExecutionProvider"])
    got = runtimes.run_onnxruntime(dst, xs)
    assert steps_off(reference.outputs(src, xs), got, 0.05) <= 1
    if target == "qnn":
        need("qnn")
        import onnxruntime_qnn
        ort.set_default_logger_severity(3)
        if not any(d.ep_name == "QNNExecutionProvider" for d in ort.get_ep_devices()):
            ort.register_execution_provider_library("QNNExecutionProvider", onnxruntime_qnn.get_library_path())
        so = ort.SessionOptions()
        so.add_provider_for_devices([d for d in ort.get_ep_devices() if d.ep_name == "QNNExecutionProvider"],
                                    {"backend_path": onnxruntime_qnn.get_qnn_htp_path()})  # the EP's defaults
        out = ort.InferenceSession(dst, so).run(None, {"x": xs[0]})[0]
        assert steps_off(reference.outputs(src, xs), [out], 0.05) <= STEPS["qnn"]


@pytest.mark.parametrize("target, kept", [("rknn", False), ("qnn", False), ("onnxruntime", True)])
def test_an_unused_com_microsoft_import_is_dropped_where_the_target_refuses_it(target, kept, tmp_path):
    src = conv_model(str(tmp_path / "in.onnx"), 21, microsoft=True)
    dst = str(tmp_path / "out.onnx")
    r = run_qconv("convert", src, dst, "--target", target, "-v")
    assert r.returncode == 0, r.stderr
    assert ("com.microsoft" in declared(dst)) == kept
    if not kept:
        assert f"the unused import of domain com.microsoft dropped: --target {target} refuses it" in r.stderr


# ---- refusals quote the rule that failed for the node (issue 47, item 6) -----------------------


def weight_only(path: str, op: str, per_channel: bool) -> str:
    """A constant dequantized per tensor or per channel, read by a float Sub or MatMul."""
    rng = np.random.default_rng(0)
    n = 16
    shape = [1, n] if op == "Sub" else [32, n]
    scale = np.full(n, 0.01, np.float32) if per_channel else np.float32(0.01)
    zero = np.zeros(n, np.int8) if per_channel else np.int8(0)
    inits = [nh.from_array(rng.integers(-127, 128, shape).astype(np.int8), "w"), nh.from_array(scale, "ws"),
             nh.from_array(zero, "wz")]
    x = [1, n] if op == "Sub" else [1, 32]
    return save(path, [helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], name="dqw", axis=1),
                       helper.make_node(op, ["x", "wd"], ["y"], name="op")],
                [helper.make_tensor_value_info("x", T.FLOAT, x)], [helper.make_tensor_value_info("y", T.FLOAT, [1, n])],
                inits)


@pytest.mark.parametrize("op", ["Sub", "MatMul"])
def test_qnn_runs_a_per_tensor_weight_only_op_and_refuses_a_per_channel_one_in_its_words(op, tmp_path):
    """09f6d0c refused both, quoting the QNN EP's per-channel message for the per-tensor one too;
    HTP runs the per-tensor one wholly (CPU fallback disabled)."""
    need("qnn")
    src = weight_only(str(tmp_path / "pt.onnx"), op, False)
    dst = str(tmp_path / "out.onnx")
    assert run_qconv("convert", src, dst, "--target", "qnn").returncode == 0
    xs = [np.random.default_rng(1).normal(0, 1, onnx.load(src).graph.input[0].type.tensor_type.shape.dim[1].dim_value)
          .reshape(1, -1).astype(np.float32)]
    got = runtimes.run_qnn(dst, xs)  # raises where a node falls back
    np.testing.assert_allclose(got[0], reference.outputs(src, xs)[0], rtol=1e-2, atol=1e-2)
    pc = weight_only(str(tmp_path / "pc.onnx"), op, True)
    r = run_qconv("convert", pc, dst, "--target", "qnn")
    assert r.returncode == 4 and "takes a per-channel DequantizeLinear only inside a quantized op" in r.stderr
    with pytest.raises(runtimes.Refused):
        runtimes.run_qnn(pc, xs)  # what the refusal says: HTP does not take it


def integer_op(path: str, op: str) -> str:
    if op == "ConvInteger":
        return save(path, [helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], name="intop")],
                    [helper.make_tensor_value_info("x", T.UINT8, [1, 3, 8, 8])],
                    [helper.make_tensor_value_info("y", T.INT32, [1, 4, 6, 6])],
                    [nh.from_array(np.ones((4, 3, 3, 3), np.int8), "w"), nh.from_array(np.uint8(128), "xz")])
    return save(path, [helper.make_node("MatMulInteger", ["x", "w", "xz"], ["y"], name="intop")],
                [helper.make_tensor_value_info("x", T.UINT8, [1, 32])], [helper.make_tensor_value_info("y", T.INT32, [1, 16])],
                [nh.from_array(np.ones((32, 16), np.int8), "w"), nh.from_array(np.uint8(128), "xz")])


@pytest.mark.parametrize("op", ["ConvInteger", "MatMulInteger"])
def test_integer_ops_are_refused_in_the_runtimes_own_words(op, tmp_path):
    """09f6d0c quoted the QLinearConv/MaxPool text (qnn) and the QLinearConv one (rknn)."""
    src = integer_op(str(tmp_path / "in.onnx"), op)
    r = run_qconv("convert", src, str(tmp_path / "out.onnx"), "--target", "qnn")
    assert r.returncode == 4 and "runs neither ConvInteger nor MatMulInteger" in r.stderr and "MaxPool" not in r.stderr
    r = run_qconv("convert", src, str(tmp_path / "out.onnx"), "--target", "rknn")
    assert r.returncode == 4 and "refuses ConvInteger ('Not Support Dtype: 2" in r.stderr
    if not MISSING["qnn"]():
        x = np.zeros([d.dim_value for d in onnx.load(src).graph.input[0].type.tensor_type.shape.dim], np.uint8)
        with pytest.raises(runtimes.Refused, match=f"Operators of type `{op}` are not supported by QNN EP|CPU EP"):
            runtimes.run_qnn(src, [x])
    if op == "ConvInteger":
        need("rknn")
        with pytest.raises(runtimes.Refused, match="Not Support Dtype: 2"):
            runtimes.run_rknn(src, [])
