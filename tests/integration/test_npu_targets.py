"""--target qnn and --target rknn (issue 38): what qconv writes for Qualcomm's QNN HTP and
Rockchip's RKNN runs in their simulators, never mocked:
  - QNN: onnxruntime-qnn's HTP backend (its x86 simulator) with CPU fallback disabled, so that a
    node the NPU does not take fails the session: every run here ran wholly on the NPU. Within 2
    output steps of the reference on the input: HTP's own arithmetic is 1 step off on a few
    percent of elements even with integer inputs (runtimes.md), and that adds up to 2 on whole
    models.
  - RKNN: rknn-toolkit2 in its own venv (scripts/setup_rknn.sh), built for rk3588 at optimization
    level 2 from the model's own quantization, run in its PC simulator: within 3 steps (it is
    1.5 to 2.5 steps off per node with a float graph input, 2 to 3 on whole models).
The judge is the ONNX reference (onnx.reference) on the input; for a QOp input, on qconv's
--format qdq output of it, which test_qop_to_qdq.py holds equal to the input under the reference.
Each runtime limit the profiles route around is held by a small model, so that an upgrade that
lifts one is noticed. A runtime that cannot be installed here skips its tests, saying why."""
from __future__ import annotations

import os
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper
from onnx import numpy_helper as nh

sys.path.insert(0, os.path.dirname(__file__))
import models  # noqa: E402
import npu_models  # noqa: E402
import reference  # noqa: E402
import runtimes  # noqa: E402
from conftest import EXAMPLE, TARGET_ROWS, output_step, run_qconv  # noqa: E402
from test_targets import feeds  # noqa: E402  (the same inputs as the other targets' tests)


def _qnn_missing() -> str | None:
    try:
        import onnxruntime_qnn  # noqa: F401
    except ImportError as e:
        return f"onnxruntime-qnn is not installed here ({e})"
    return None


def _rknn_missing() -> str | None:
    if runtimes.rknn_python():
        return None
    return "no RKNN toolkit venv (QCONV_RKNN_PYTHON unset: scripts/setup_rknn.sh could not make it on this machine)"


MISSING = {"qnn": _qnn_missing, "rknn": _rknn_missing}
# RKNN's own host-side layers: the graph's ends and a final reshape of the output (measured on the
# onnxruntime QDQ models as they are, too)
RKNN_HOST_LAYERS = {"InputOperator", "OutputOperator", "Reshape"}
STEPS = {"qnn": 2.0, "rknn": 3.0}


def need(target: str) -> None:
    why = MISSING[target]()
    if why:
        pytest.skip(f"--target {target} not run: {why}")


def steps_off(want: list[np.ndarray], got: list[np.ndarray], step: float) -> float:
    return max(float(np.max(np.abs(a.astype(np.float64) - b.reshape(a.shape).astype(np.float64))))
               for a, b in zip(want, got)) / step


def convert(src: str, dst: str, *args: str):
    return run_qconv("convert", src, dst, *args)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """onnxruntime-quantized models, made on first use: {name: path}."""
    work = tmp_path_factory.mktemp("npu")
    cache: dict[str, str] = {}

    def get(name: str) -> str:
        if name not in cache:
            path = str(work / f"{name}.onnx")
            if name == "example":
                path = EXAMPLE
            elif name == "llm":
                npu_models.int4_llm_block(path)
            elif name.startswith("tb-"):
                models.quantize_static(npu_models.transformer_block(), path, fmt=name[3:], per_channel=name == "tb-qdq",
                                       activation="uint8", work_dir=str(work))
            elif name.endswith("-u16"):
                from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
                fm = {"cnn": models.cnn, "mlp": models.mlp}[name[:3]]()
                src = str(work / f"float_{name}.onnx")
                onnx.save(fm, src)
                quantize_static(src, path, models.calibration_reader(models.sample_inputs(fm, 16, seed=123)),
                                quant_format=QuantFormat.QDQ, per_channel=True, activation_type=QuantType.QUInt16,
                                weight_type=QuantType.QInt8)
            else:  # cnn-u8s8-per_tensor-qdq
                model, kind, g, fmt = name.split("-")
                models.quantize_static({"cnn": models.cnn, "mlp": models.mlp}[model](), path, fmt=fmt,
                                       per_channel=g == "per_channel", activation="uint8" if kind == "u8s8" else "int8",
                                       work_dir=str(work))
            cache[name] = path
        return cache[name]

    return get


def judge_of(src: str, tmp_path) -> str:
    """The model whose reference outputs the runtime's are judged against: the input when it is
    QDQ, else qconv's --format qdq output of it (a QOp input: com.microsoft ops the reference
    does not run)."""
    if not any(n.op_type.startswith("QLinear") or n.op_type == "QGemm" for n in onnx.load(src).graph.node):
        return src
    qdq = str(tmp_path / "judge.onnx")
    r = convert(src, qdq, "--format", "qdq")
    assert r.returncode == 0, r.stderr
    return qdq


QDQ_CASES = [f"{m}-{k}-{g}-qdq" for m in ("cnn", "mlp") for k in ("u8s8", "s8s8") for g in ("per_tensor", "per_channel")]
QOP_CASES = ["cnn-u8s8-per_tensor-qop", "cnn-s8s8-per_channel-qop", "mlp-u8s8-per_channel-qop", "mlp-s8s8-per_tensor-qop"]
REAL = ["example", "tb-qdq", "tb-qop"]


# ---- 1. every output qconv writes for an NPU target runs there, on the NPU, within its steps ----

@pytest.mark.parametrize("case", QDQ_CASES + QOP_CASES + REAL)
@pytest.mark.parametrize("target", ["qnn", "rknn"])
def test_the_output_for_an_npu_runs_there_within_its_steps(made, tmp_path, target, case):
    need(target)
    src = made(case)
    dst = str(tmp_path / "out.onnx")
    r = convert(src, dst, "--target", target)
    assert r.returncode == 0, r.stderr
    m = onnx.load(dst)
    assert not [n.op_type for n in m.graph.node if n.domain not in ("", "ai.onnx") or n.op_type.startswith("QLinear")]
    judge = judge_of(src, tmp_path)
    xs = feeds(judge)
    want, step = reference.outputs(judge, xs), output_step(judge)
    assert steps_off(want, reference.outputs(dst, xs), step) <= 1.0001  # qconv's output itself: exact
    placed: list = []
    got = runtimes.run_rknn(dst, xs, layers=placed) if target == "rknn" else runtimes.run_qnn(dst, xs)
    off = steps_off(want, got, step)
    if target == "rknn":  # its layer table: every layer that computes runs on the NPU, in 8 bits
        assert placed, "no layer table"
        off_npu = [(op, dtype, where) for op, dtype, where in placed if op not in RKNN_HOST_LAYERS
                   and (where != "NPU" or dtype not in ("INT8", "UINT8"))]
        assert not off_npu, off_npu
    allowed = STEPS[target]
    if target == "qnn" and case.startswith("tb-"):
        # twelve quantized ops in a chain, each 1 step off on a few percent of elements on HTP (a
        # lone Softmax: 1 step): 3 at the block's output, as onnxruntime's own per-tensor QDQ of the
        # same block is on HTP (measured 2026-11-26)
        allowed = 3.0
    if target == "rknn" and case == "tb-qop":
        # RKNN's arithmetic on the block: onnxruntime's own per-tensor QDQ of it is 3 steps off there,
        # this QOp quantization of it (other scales) 4 (measured 2026-11-26)
        allowed = 4.0
    assert off <= allowed + 1e-4, f"{target} is {off:.2f} steps off the reference"
    TARGET_ROWS.append((target, "qdq", case, f"{off:.0f} steps"))


def test_qnn_runs_uint16_activations_on_the_npu(made, tmp_path):
    """uint16 activations run on HTP; its arithmetic is 18 (CNN) and 47 (MLP) uint16 steps off
    here, about 0.1 to 0.2 of an 8-bit step: held within 64 (a quarter of an 8-bit step)."""
    need("qnn")
    for case in ("cnn-u16", "mlp-u16"):
        src, dst = made(case), str(tmp_path / f"{case}.onnx")
        r = convert(src, dst, "--target", "qnn")
        assert r.returncode == 0, r.stderr
        xs = feeds(src)
        off = steps_off(reference.outputs(src, xs), runtimes.run_qnn(dst, xs), output_step(src))
        assert off <= 64, f"{case}: {off:.0f} uint16 steps"
        TARGET_ROWS.append(("qnn", "qdq", case, f"{off:.0f} uint16 steps"))


# ---- 2. what the profiles refuse, and what --approximate does instead ----

def approximations(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("qconv: warning: ") and ": approximation: " in ln]


def test_rknn_refuses_uint16_and_with_approximate_requantizes_it_to_8_bits(made, tmp_path):
    need("rknn")
    src, dst = made("cnn-u16"), str(tmp_path / "out.onnx")
    r = convert(src, dst, "--target", "rknn")
    assert r.returncode == 4 and not os.path.exists(dst)
    assert "cannot declare opset 19, the highest --target rknn reads" in r.stderr and "is uint16" in r.stderr
    r = run_qconv("verify", src, "--target", "rknn")  # verify names each node, with the runtime's reason
    assert r.returncode == 1
    assert r.stdout.count("not run by --target rknn: it is uint16: rknn-toolkit2 2.5 reads opset 19 or lower") == 14
    r = convert(src, dst, "--target", "rknn", "--approximate")
    assert r.returncode == 0, r.stderr
    listed = approximations(r.stderr)
    assert len(listed) == 14 and all("uint16 requantized to uint8" in ln for ln in listed)
    m = onnx.load(dst)
    assert [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")] == [19]
    xs = feeds(src)
    mine = reference.outputs(dst, xs)
    step = output_step(dst)
    assert steps_off(mine, runtimes.run_rknn(dst, xs), step) <= STEPS["rknn"] + 1e-4
    TARGET_ROWS.append(("rknn", "qdq --approximate", "cnn-u16",
                        f"runs; {steps_off(reference.outputs(src, xs), mine, step):.1f} 8-bit steps from the input"))


def test_the_int4_llm_block_qnn_and_rknn_refuse_with_their_reasons(made, tmp_path):
    """bench_llm.py's layer (int4 weights in blocks, float activations). QNN HTP takes neither
    blocked weights nor a weight-only op (its DQ must sit inside a quantized op): refused with the
    reason, with and without --approximate. RKNN: --approximate requantizes the blocks per channel
    at 8 bits (listed), and the MatMuls then compute in float, which RKNN runs in float16, not in 8
    or 16 bits (issue 47; test_op_tables.py holds that against its layer table): refused, naming them."""
    src, dst = made("llm"), str(tmp_path / "out.onnx")
    r = convert(src, dst, "--target", "qnn")
    assert r.returncode == 4 and "it dequantizes in blocks (--approximate requantizes such a constant per channel" in r.stderr
    r = convert(src, dst, "--target", "qnn", "--approximate")
    assert r.returncode == 4 and not os.path.exists(dst)
    assert "q_matmul (MatMul) reads it and computes in float" in r.stderr and "standalone DQ" in r.stderr
    r = convert(src, dst, "--target", "rknn", "--approximate")
    assert r.returncode == 4 and not os.path.exists(dst)
    assert len(approximations(r.stderr)) == 7
    assert "q_matmul: not run by --target rknn: MatMul in float: rknn-toolkit2 2.5 computes an op the model gives in float" in r.stderr


@pytest.mark.parametrize("target", ["qnn", "rknn"])
def test_verify_names_every_node_that_will_not_run_on_the_npu(made, target):
    src = made("cnn-u8s8-per_tensor-qop")
    r = run_qconv("verify", src, "--target", target)
    assert r.returncode == 1
    named = [ln for ln in r.stdout.splitlines() if f"not run by --target {target}" in ln]
    nodes = {ln.split(": ")[1] for ln in named}
    assert nodes == {"conv_4_quant", "conv_12_quant", "globalaveragepool_16_quant", "gemm_22_quant"}, r.stdout
    reason = {"qnn": "QNN HTP (onnxruntime-qnn 2.7) runs no com.microsoft op",
              "rknn": "rknn-toolkit2 2.5 refuses every com.microsoft op"}[target]
    assert any(reason in ln for ln in named)
    # and what the conversion writes verifies clean
    r = run_qconv("verify", made("cnn-u8s8-per_tensor-qdq"), "--target", target)
    assert r.returncode == 0, r.stdout


# ---- 3. each runtime limit, on a small model: an upgrade that lifts one is noticed ----

def conv_model(path: str, *, per_channel_activation: bool = False, opset: int = 13, zero_point: bool = True) -> None:
    """Q -> DQ -> Conv (int8 per-channel weights, an int32 bias) -> Q -> DQ -> MaxPool -> Q -> DQ."""
    rng = np.random.default_rng(3)
    c = 4
    inits = [nh.from_array(np.full((c,) if per_channel_activation else (), 0.02, np.float32), "xs"),
             nh.from_array(np.full((c,) if per_channel_activation else (), 128, np.uint8), "xz"),
             nh.from_array(rng.integers(-100, 100, (8, c, 3, 3)).astype(np.int8), "wq"),
             nh.from_array(np.full((8,), 0.01, np.float32), "ws"), nh.from_array(np.zeros((8,), np.int8), "wz"),
             nh.from_array(rng.integers(-500, 500, (8,)).astype(np.int32), "bq"),
             nh.from_array(np.full((8,), 0.0002, np.float32), "bs"), nh.from_array(np.zeros((8,), np.int32), "bz"),
             nh.from_array(np.array(0.05, np.float32), "ys"), nh.from_array(np.array(128, np.uint8), "yz")]
    ax = {"axis": 1} if per_channel_activation else {}
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"], **ax),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xf"], **ax),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wf"], axis=0),
             helper.make_node("DequantizeLinear", ["bq", "bs"] + (["bz"] if zero_point else []), ["bf"], axis=0),
             helper.make_node("Conv", ["xf", "wf", "bf"], ["yf"], pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["yf", "ys", "yz"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TP.FLOAT, [1, c, 8, 8])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [1, 8, 8, 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m)
    onnx.save(m, path)


def test_qnn_limits_still_hold(made, tmp_path):
    need("qnn")
    held = []
    # a QOp CNN fails the session (MaxPool on the 8-bit tensor): the profile writes QDQ
    with pytest.raises(runtimes.Refused, match="not selected by that EP"):
        runtimes.run_qnn(made("cnn-u8s8-per_tensor-qop"), feeds(made("cnn-u8s8-per_tensor-qdq"), 1))
    held.append("QOp CNN")
    # MaxPool on uint8 in a QDQ model (qconv's --format qdq of that QOp input): the same failure;
    # dequantize-moves moves it between DQ and Q
    plain = str(tmp_path / "plain.onnx")
    assert convert(made("cnn-u8s8-per_tensor-qop"), plain, "--format", "qdq").returncode == 0
    with pytest.raises(runtimes.Refused, match="MaxPool"):
        runtimes.run_qnn(plain, feeds(plain, 1))
    held.append("MaxPool on uint8")
    # com.microsoft QLinearAdd (the QOp MLP) falls back to the CPU
    with pytest.raises(runtimes.Refused, match="fallback to CPU EP has been explicitly disabled"):
        runtimes.run_qnn(made("mlp-u8s8-per_tensor-qop"), feeds(made("mlp-u8s8-per_tensor-qdq"), 1))
    held.append("QLinearAdd falls back")
    # a per-channel activation fails
    pc = str(tmp_path / "pc.onnx")
    conv_model(pc, per_channel_activation=True)
    with pytest.raises(runtimes.Refused):
        runtimes.run_qnn(pc, feeds(pc, 1))
    held.append("per-channel activation")
    # weight-only int4 blocks (the LLM block as it is) fall back
    with pytest.raises(runtimes.Refused, match="fallback to CPU EP has been explicitly disabled"):
        runtimes.run_qnn(made("llm"), feeds(made("llm"), 1))
    held.append("int4 blocked weight-only MatMul falls back")
    # and what runs: the same conv with per-tensor activations
    ok = str(tmp_path / "ok.onnx")
    conv_model(ok)
    xs = feeds(ok)
    assert steps_off(reference.outputs(ok, xs), runtimes.run_qnn(ok, xs), 0.05) <= 1.0001
    assert len(held) == 5


def test_rknn_limits_still_hold(made, tmp_path):
    need("rknn")
    xs = None
    # opset 21 refused
    o21 = str(tmp_path / "o21.onnx")
    conv_model(o21, opset=21)
    with pytest.raises(runtimes.Refused, match="need <= 19"):
        runtimes.run_rknn(o21, feeds(o21, 1))
    # DequantizeLinears without their zero points (qconv's int32 biases of the QOp CNN: what
    # --target qnn writes) fail its constant folding; a lone Conv's bias without one builds: the
    # limit is held on the whole model
    nozp = str(tmp_path / "nozp.onnx")
    assert convert(made("cnn-u8s8-per_tensor-qop"), nozp, "--target", "qnn").returncode == 0
    assert any(n.op_type == "DequantizeLinear" and len(n.input) == 2 for n in onnx.load(nozp).graph.node)
    with pytest.raises(runtimes.Refused, match="list index out of range"):
        runtimes.run_rknn(nozp, feeds(nozp, 1))
    # what is no limit: MaxPool on uint8 (qconv's --format qdq of a QOp CNN) builds once the zero
    # points are there, so the rknn profile moves data on 8-bit tensors as the input has it
    plain = str(tmp_path / "plain.onnx")
    assert convert(made("cnn-u8s8-per_tensor-qop"), plain, "--format", "qdq").returncode == 0
    m = onnx.load(plain)
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear" and len(n.input) == 2:
            m.graph.initializer.append(nh.from_array(np.array(0, np.int32), n.input[0] + "_zp"))
            n.input.append(n.input[0] + "_zp")
    onnx.save(m, plain)
    judge = judge_of(made("cnn-u8s8-per_tensor-qop"), tmp_path)
    xs = feeds(judge, 1)
    assert steps_off(reference.outputs(judge, xs), runtimes.run_rknn(plain, xs), output_step(judge)) <= STEPS["rknn"] + 1e-4
    # QLinearConv (QOp) refused
    with pytest.raises(runtimes.Refused):
        runtimes.run_rknn(made("cnn-u8s8-per_tensor-qop"), feeds(made("cnn-u8s8-per_tensor-qdq"), 1))
    # and what runs: the conv at opset 13 with its zero points
    ok = str(tmp_path / "ok.onnx")
    conv_model(ok)
    xs = feeds(ok, 1)
    assert steps_off(reference.outputs(ok, xs), runtimes.run_rknn(ok, xs), 0.05) <= STEPS["rknn"] + 1e-4
    # the toolkit writes its check*.onnx stages where it runs: in runtimes' temporary folder, not here
    assert not [f for f in os.listdir(os.getcwd()) if f.startswith("check") and f.endswith(".onnx")]


def test_rknn_never_finishes_a_matmul_on_a_quantized_graph_input(made, tmp_path, monkeypatch):
    """The MLP as onnxruntime writes it: the build loops (held with a 60 s limit); matmul-as-conv
    writes the first MatMul as a 1x1 Conv, which builds (test 1 runs it)."""
    need("rknn")
    monkeypatch.setattr(runtimes, "RKNN_TIMEOUT", 60)
    src = made("mlp-u8s8-per_channel-qdq")
    with pytest.raises(runtimes.Refused, match="did not finish"):
        runtimes.run_rknn(src, feeds(src, 1))
    dst = str(tmp_path / "out.onnx")
    r = convert(src, dst, "--target", "rknn")
    assert r.returncode == 0 and "1 MatMul as 1x1 Conv" in r.stderr
    assert [n.op_type for n in onnx.load(dst).graph.node].count("MatMul") == 2


def test_qnn_raises_the_opset_for_16_bit_com_microsoft_qdq(tmp_path):
    """onnxruntime's quantizer writes 16-bit Q/DQ in the com.microsoft domain below opset 21
    (UseQDQContribOps); QNN runs no com.microsoft op, and the standard 16-bit ops need opset 21:
    the opset is raised (every node keeps its meaning) and the Q/DQ lowered, and HTP runs it."""
    need("qnn")
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    fm = models.cnn()
    fm.opset_import[0].version = 13
    src_f, src = str(tmp_path / "f.onnx"), str(tmp_path / "u16_contrib.onnx")
    onnx.save(fm, src_f)
    quantize_static(src_f, src, models.calibration_reader(models.sample_inputs(fm, 16, seed=123)),
                    quant_format=QuantFormat.QDQ, per_channel=False, activation_type=QuantType.QUInt16,
                    weight_type=QuantType.QInt8, extra_options={"UseQDQContribOps": True})
    m = onnx.load(src)
    if [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")] != [13]:  # this onnxruntime raised it itself
        m.opset_import[[o.domain for o in m.opset_import].index("")].version = 13
        onnx.save(m, src)
    assert any(n.domain == "com.microsoft" for n in m.graph.node)
    dst = str(tmp_path / "out.onnx")
    r = convert(src, dst, "--target", "qnn", "-v")
    assert r.returncode == 0, r.stderr
    assert "opset raised to 21 for 16-bit QuantizeLinear/DequantizeLinear" in r.stderr
    out = onnx.load(dst)
    assert [o.version for o in out.opset_import if o.domain in ("", "ai.onnx")] == [21]
    assert not [n for n in out.graph.node if n.domain not in ("", "ai.onnx")]
    xs = feeds(dst)
    off = steps_off(reference.outputs(dst, xs), runtimes.run_qnn(dst, xs), output_step(dst))
    assert off <= 64, f"{off:.0f} uint16 steps"
