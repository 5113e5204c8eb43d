"""Shared fixtures: the qconv binary, quantized models (made once per session), onnxruntime
sessions, and the two judges of every number: the ONNX specification's reference
(reference.py) first, onnxruntime second (see judge_qdq, judge_qop, ort_agrees)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import models  # noqa: E402
import reference  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FUSION_ROWS: list[tuple] = []
SATURATION_ROWS: list[tuple] = []
TARGET_ROWS: list[tuple] = []  # test_targets.py: (target, format, model, outcome)
QOP_ROWS: list[tuple] = []  # test_qop_to_qdq.py: (model, 8-bit elements compared, of them differing)
CORPUS_ROWS: list[str] = []  # test_corpus.py: one line per cell


EXAMPLE = os.path.join(ROOT, "test_data", "examples", "small_cnn_qdq.onnx")  # the README's bundled model


def qconv_bin() -> str:
    return os.environ.get("QCONV_BIN", os.path.join(ROOT, "build", "tools", "qconv"))


def run_qconv(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([qconv_bin(), *args], capture_output=True, text=True, timeout=300)


def run_qconv_limited(address_space: int, *args: str) -> subprocess.CompletedProcess:
    """qconv with its address space limited to `address_space` bytes (RLIMIT_AS): what a memory
    bound in a test means. Not under AddressSanitizer, which reserves terabytes."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    return subprocess.run([qconv_bin(), *args], capture_output=True, text=True, preexec_fn=limit)


def run_traced(trace: str, calls: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """qconv under strace, following threads, the system calls `calls` logged to `trace`.
    LeakSanitizer cannot run under ptrace, so it is off here (the sanitized suite's leak checks
    are the corpus cases, which cover the same refusal paths)."""
    return subprocess.run(["strace", "-f", "-qq", "-e", f"trace={calls}", "-o", trace, qconv_bin(), *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "ASAN_OPTIONS": "detect_leaks=0"})


def save_external(model: onnx.ModelProto, folder, name="in.onnx", location="in.onnx.data", threshold=64) -> str:
    """Save `model` in `folder` with every tensor of `threshold` bytes or more in one data file."""
    path = os.path.join(folder, name)
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location=location,
              size_threshold=threshold)
    return path


DATA_FILE = re.compile(r"(.+)\.[0-9a-f]{16}\.data")


def data_file(model_path: str) -> str | None:
    """The one data file `model_path` names (qconv writes OUT.<hash of its bytes>.data), or None."""
    m = onnx.load(model_path, load_external_data=False)
    locations = {e.value for t in m.graph.initializer for e in t.external_data if e.key == "location"}
    if not locations:
        return None
    assert len(locations) == 1, locations
    (location,) = locations
    match = DATA_FILE.fullmatch(location)
    assert match and match.group(1) == os.path.basename(model_path), location
    return os.path.join(os.path.dirname(model_path), location)


def saturating_convs(path: str) -> list[str]:
    """The Conv nodes whose int8 weight has a pair onnxruntime's x86 u8 x s8 kernel can saturate,
    by the rule (docs/onnxruntime-cpu.md): per output channel, in kernel-position-major,
    channel-minor order, pairs (0,1), (2,3), ... of one sign with |w0 + w1| >= 129."""
    m = onnx.load(path)
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    dq = {n.output[0]: n for n in m.graph.node if n.op_type == "DequantizeLinear"}
    names = []
    for n in m.graph.node:
        w = inits.get(dq[n.input[1]].input[0]) if n.op_type == "Conv" and n.input[1] in dq else None
        if w is None or w.dtype != np.int8:
            continue
        rows = w.astype(np.int32).transpose(0, *range(2, w.ndim), 1).reshape(w.shape[0], -1)
        rows = rows[:, : rows.shape[1] // 2 * 2].reshape(w.shape[0], -1, 2)
        same_sign = (rows[..., 0] * rows[..., 1]) > 0
        if np.any(same_sign & (np.abs(rows.sum(-1)) >= 129)):
            names.append(n.name)
    return names


def session(path: str, level: str = "disable") -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.graph_optimization_level = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    }[level]
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def outputs(sess: ort.InferenceSession, xs: list[np.ndarray]) -> list[np.ndarray]:
    name = sess.get_inputs()[0].name
    return [sess.run(None, {name: x})[0] for x in xs]


def op_counts(path: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for n in onnx.load(path).graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return counts


def ort_offline_fusion_counts(path: str, out: str) -> dict[str, int]:
    """What onnxruntime's own QDQ fusion makes of the same model (the peer)."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = out
    so.log_severity_level = 3
    ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return op_counts(out)


def output_step(qdq_path: str) -> float:
    """Scale of the DequantizeLinear that produces the graph output: one quantization step."""
    m = onnx.load(qdq_path)
    inits = {t.name: t for t in m.graph.initializer}
    out = m.graph.output[0].name
    dq = next(n for n in m.graph.node if out in n.output)
    assert dq.op_type == "DequantizeLinear"
    return float(onnx.numpy_helper.to_array(inits[dq.input[1]]))


def tie_inputs(seed: int, step: float, shape, spread: float) -> list[np.ndarray]:
    """Three float32 inputs for a quantizer of step `step`: normal values (sigma spread*step),
    values that are all rounding ties ((k + 0.5) * step), and quarter steps (ties and integers)."""
    rng = np.random.default_rng(seed)
    step = np.float32(step)
    return [rng.normal(0, spread * step, shape).astype(np.float32),
            ((np.round(rng.normal(0, 150, shape)) + 0.5) * step).astype(np.float32),
            (np.round(rng.normal(0, 300, shape)) * np.float32(step / 4)).astype(np.float32)]


def max_abs_diff(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    return max(float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))) for x, y in zip(a, b))


def assert_bit_identical(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert np.array_equal(x.reshape(-1).view(np.uint8), y.reshape(-1).view(np.uint8))


def differing(a: list[np.ndarray], b: list[np.ndarray]) -> tuple[int, int]:
    """How many elements differ, of how many."""
    return (sum(int(np.count_nonzero(x != y)) for x, y in zip(a, b)), sum(x.size for x in a))


def ort_agrees(path: str, xs: list[np.ndarray], step: float, want: list[np.ndarray] | None = None) -> str:
    """onnxruntime, the second judge: `path` loads and runs (optimizations off, so every fused op
    is the model's own), and equals the reference within one step, or else the reference's
    emulation of onnxruntime's saturating x86 u8 x s8 kernel (a CPU without VNNI): whichever
    this host computes. The outcome does not depend on the CPU. Returns which one it equals."""
    got = outputs(session(path), xs)
    exact = want if want is not None else reference.outputs(path, xs)
    off = max_abs_diff(got, exact)
    if off <= step * 1.0001:
        return "exact"
    off_emulated = max_abs_diff(got, reference.outputs(path, xs, emulate_u8s8=True))
    assert off_emulated <= step * 1.0001, (
        f"onnxruntime is {off / step:.1f} steps off the reference and {off_emulated / step:.1f} off its emulation")
    return "saturating"


def executed(path: str, xs: list[np.ndarray], tolerance: float = 0.0, float_sums: bool = False) -> list[np.ndarray]:
    """The first output of `path` for each input under the reference, which judges; onnxruntime
    (optimizations off) must give the same: bit for bit (elementwise float ops and Q/DQ); to
    float rounding with float_sums (a float Conv/MatMul output: the reference sums in float64);
    or within `tolerance` of the reference or of its saturating emulation (ort_agrees)."""
    got = reference.outputs(path, xs)
    if tolerance:
        ort_agrees(path, xs, tolerance, got)
        return got
    for a, b in zip(got, outputs(session(path), xs)):
        assert a.dtype == b.dtype and a.shape == b.shape
        if float_sums:
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5 * float(np.max(np.abs(a))))
        else:
            assert np.array_equal(a, b, equal_nan=True)
    return got


def judge_qdq(src: str, dst: str, xs: list[np.ndarray], twin: str | None = None) -> None:
    """A QDQ output under the reference: bit-identical to its input (or to `twin`, the standard
    model a dialect input stands for). onnxruntime, the second judge, gives the twin's numbers
    bit for bit on this host (optimizations off: float ops and Q/DQ only), and agrees with the
    reference (ort_agrees) when the output ends in a DequantizeLinear."""
    want = reference.outputs(twin or src, xs)
    got = reference.outputs(dst, xs)
    assert_bit_identical(want, got)
    assert_bit_identical(outputs(session(twin or src), xs), outputs(session(dst), xs))
    try:
        step = output_step(dst)
    except (AssertionError, StopIteration, KeyError):
        return
    ort_agrees(dst, xs, step, got)


def judge_qop(src: str, dst: str, xs: list[np.ndarray], step: float | None = None) -> tuple[float, int, int]:
    """A QOp output under the reference: within one step of its input (or of `src`, the model it
    stands for), on near ties only. Returns (worst difference in steps, elements that differ, of
    how many). onnxruntime loads and runs it and agrees (ort_agrees)."""
    step = output_step(src) if step is None else step
    want = reference.outputs(src, xs)
    got = reference.outputs(dst, xs)
    worst = max_abs_diff(want, got)
    n, total = differing(want, got)
    assert worst <= step * 1.0001, f"{n} of {total} elements differ, by up to {worst / step:.2f} steps"
    ort_agrees(dst, xs, step, got)
    return worst / step, n, total


QUANT_CASES = [(m, pc, act) for m in models.FLOAT_MODELS for pc in (False, True) for act in ("uint8", "int8")]


def case_id(case) -> str:
    m, pc, act = case
    return f"{m}-{'per_channel' if pc else 'per_tensor'}-{act}"


@pytest.fixture(scope="session")
def quantized(tmp_path_factory):
    """quantize_static QDQ models, made on first use: {(model, per_channel, act): path}."""
    work = tmp_path_factory.mktemp("quantized")
    cache: dict[tuple, str] = {}

    def get(case):
        if case not in cache:
            name, pc, act = case
            path = str(work / f"{case_id(case)}.onnx")
            models.quantize_qdq(models.FLOAT_MODELS[name](), path, per_channel=pc, activation=act,
                                work_dir=str(work))
            cache[case] = path
        return cache[case]

    return get


def pytest_terminal_summary(terminalreporter):
    tr = terminalreporter
    if SATURATION_ROWS:
        tr.write_sep("-", "saturation warnings judged by the emulated x86 u8 x s8 kernel (test_saturation.py)")
        tr.write_line(f"{'model':<42} {'u8s8 ops':>8} {'warned':>7} {'differ':>7} {'false alarms':>13} {'missed':>7}")
        for row in SATURATION_ROWS:
            tr.write_line(f"{row[0]:<42} {row[1]:>8} {row[2]:>7} {row[3]:>7} {row[4]:>13} {row[5]:>7}")
    if TARGET_ROWS:
        tr.write_sep("-", "--target: each output run in its runtime, judged by the reference on the input (test_targets.py)")
        for row in sorted(TARGET_ROWS):
            tr.write_line(f"{row[0]:<12} {row[1]:<18} {row[2]:<34} {row[3]}")
    if CORPUS_ROWS:
        tr.write_sep("-", "real-model corpus: exit; output runs wholly, steps off the reference; the input's (test_corpus.py)")
        for row in CORPUS_ROWS:
            tr.write_line(row)
    if QOP_ROWS:
        tr.write_sep("-", "QOp -> QDQ: every 8-bit tensor both models compute, under the reference (test_qop_to_qdq.py)")
        tr.write_line(f"{'model':<48} {'elements':>9} {'differ (near ties)':>19}")
        for row in QOP_ROWS:
            tr.write_line(f"{row[0]:<48} {row[1]:>9} {row[2]:>19}")
        tr.write_line(f"{'all':<48} {sum(r[1] for r in QOP_ROWS):>9} {sum(r[2] for r in QOP_ROWS):>19}")
    if not FUSION_ROWS:
        return
    tr.write_sep("-", "fused ops: qconv vs onnxruntime's offline fusion (ORT_ENABLE_EXTENDED)")
    tr.write_line(f"{'model':<42} {'target':<7} {'in model':>8} {'qconv':>6} {'onnxruntime':>12} {'max |diff|/step':>16}"
                  f" {'differ (reference)':>19}")
    for row in FUSION_ROWS:
        tr.write_line(f"{row[0]:<42} {row[1]:<7} {row[2]:>8} {row[3]:>6} {row[4]:>12} {row[5]:>16.3f} {row[6]:>19}")
