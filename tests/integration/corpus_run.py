"""One cell of the real-model matrix (issue 47): a corpus model in one form, converted by qconv for
one target, then both the input and qconv's output run in that target's runtime and judged
against the ONNX reference of the input (tests/integration/reference.py). Used by
test_corpus.py (a fixed part, in CI) and scripts/corpus_matrix.py (the whole matrix, its table
in docs/targets.md).

"Runs there wholly" is each runtime's own test: QNN with CPU fallback disabled and `soc_model`
set (QNN_OPTIONS), the session finalizes and runs; RKNN: the build's layer table shows every
layer that computes on the NPU in 8 or 16 bits; the others: the model loads, compiles and runs.

The baseline an output is judged against (issue 47, "never worse than the input"): the input's
own numbers in the target where it runs there wholly and `qconv verify --target` finds nothing
in it the runtime does not run as written (a kernel measured wrong: OpenVINO's QLinearAdd wraps
around instead of saturating; one never measured); elsewhere the canonical QDQ form of the input
(`qconv convert --format qdq`, no target) run in the target, "what T's arithmetic gives for the
canonical QDQ form". A QDQ input is its own canonical form. OpenVINO at its default precision,
whose float ops round as bf16 on CPUs with avx512_bf16, is judged over more inputs (NOISY_FEEDS)."""
from __future__ import annotations

import json
import math
import os
import subprocess
from dataclasses import dataclass, field

import numpy as np
import onnx

import corpus
import reference
import runtimes

# layers of RKNN's table that move no numbers (the graph's ends, a reshape): they may sit on the CPU
RKNN_HOST_LAYERS = {"InputOperator", "OutputOperator", "Reshape"}
RKNN_NPU_TYPES = {"INT8", "UINT8", "INT16"}
FEEDS = 2  # inputs per cell
SEED = 7   # the tests' inputs (calibration used seed 1000)
# OpenVINO at its default precision rounds its float ops as bf16 on CPUs with avx512_bf16: there
# forms of the same math differ by several steps at their worst value, either way (layout's QOp
# form: 160 to 185 across four), so one worst value over two inputs is a coin toss. Its cells are
# judged over NOISY_FEEDS inputs, each by its own worst value, the steps their mean.
NOISY_FEEDS = 8


def qconv_bin() -> str:
    return os.environ.get("QCONV_BIN", os.path.join(corpus.ROOT, "build", "tools", "qconv"))


def output_step(path: str) -> float | None:
    """The quantization step of the model's first output: the scale of the DequantizeLinear it
    comes from (through ops that only move data), the largest if per channel; None if none."""
    m = onnx.load(path)
    inits = {t.name: t for t in m.graph.initializer}
    producer = {o: n for n in m.graph.node for o in n.output}
    name = m.graph.output[0].name
    for _ in range(16):
        n = producer.get(name)
        if n is None:
            return None
        if n.op_type == "DequantizeLinear" and n.input[1] in inits:
            return float(np.max(onnx.numpy_helper.to_array(inits[n.input[1]])))
        if n.op_type not in ("Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity"):
            return None
        name = n.input[0]
    return None


def steps_off(want: list[np.ndarray], got: list[np.ndarray], step: float | None) -> float:
    """The largest difference, in output steps (or absolute, where the output is not quantized)."""
    diff = max(float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64).reshape(a.shape))))
               for a, b in zip(want, got))
    return diff / step if step else diff


def mean_steps(want: list[np.ndarray], got: list[np.ndarray], step: float | None) -> float:
    """The mean difference over every output value, in output steps: on deep nets a single value's
    1-step rounding can grow far (the largest difference), where the whole output does not move."""
    d = np.concatenate([np.abs(a.astype(np.float64) - b.astype(np.float64).reshape(a.shape)).ravel()
                        for a, b in zip(want, got)])
    return float(d.mean()) / step if step else float(d.mean())


def steps_text(v: float | None) -> str:
    """Steps as the tables print them: whole steps, '' when not measured, 'NaN' where the runtime computed one."""
    if v is None:
        return ""
    return "NaN" if math.isnan(v) else f"{v:.0f}" if v >= 1 or v == 0 else f"{v:.2f}"


def run_wholly(target: str, path: str, xs: list[np.ndarray], precise: bool = False,
               optimized: bool = False) -> list[np.ndarray]:
    """The model's outputs in `target`, run wholly there, or runtimes.Refused saying why not.
    `precise`: OpenVINO at INFERENCE_PRECISION_HINT f32; `optimized`: onnxruntime in a default
    session (graph optimizations on), as users run it."""
    if target == "rknn":
        placed: list = []
        out = runtimes.run_rknn(path, xs, layers=placed)
        if not placed:
            raise runtimes.Refused("its build printed no layer table")
        off = sorted({f"{op} ({dtype} on the {where})" for op, dtype, where in placed
                      if op not in RKNN_HOST_LAYERS and (where != "NPU" or dtype not in RKNN_NPU_TYPES)})
        if off:
            raise runtimes.Refused("layers not on the NPU in 8 or 16 bits: " + ", ".join(off[:6]))
        return out
    if target == "openvino":
        return runtimes.run_openvino(path, xs, f32=precise)
    if target == "onnxruntime":
        return runtimes.run_onnxruntime(path, xs, optimized=optimized)
    return runtimes.RUNNERS[target](path, xs)


@dataclass
class Cell:
    model: str
    form: str
    target: str
    exit: int = -1
    stderr: str = ""
    out_runs: str = ""        # "yes" or what the runtime said
    in_runs: str = ""
    out_steps: float | None = None
    in_steps: float | None = None
    out_mean: float | None = None  # mean_steps
    in_mean: float | None = None
    output: str = ""  # qconv's output, where it wrote one
    in_flagged: int = 0      # errors `verify --target` finds on an input that runs wholly
    qdq_runs: str = ""       # the canonical QDQ form, where it is the baseline: "yes" or why not
    qdq_steps: float | None = None
    notes: list[str] = field(default_factory=list)

    def baseline(self) -> tuple[float, str] | None:
        """(steps, what they are) the output may not exceed by more than one step, or None."""
        def bounds(runs: str, steps: float | None) -> bool:  # NaN bounds nothing
            return runs == "yes" and steps is not None and not math.isnan(steps)
        # a flagged QDQ input is its own canonical form
        if bounds(self.in_runs, self.in_steps) and (not self.in_flagged or "qdq" in self.form):
            return self.in_steps, "the input"
        if bounds(self.qdq_runs, self.qdq_steps):
            return self.qdq_steps, "the input's canonical QDQ form"
        return None

    def worse(self) -> bool:
        b = self.baseline()
        return self.exit == 0 and self.out_steps is not None and b is not None and self.out_steps > b[0] + 1 + 1e-6

    def refused_nodes(self) -> list[str]:
        """The lines of an exit-4 refusal that name a node."""
        return [ln for ln in self.stderr.splitlines() if ": error: " in ln or "will not run" in ln]


class Judge:
    """The reference of each (model, form) input, computed once: the ONNX reference (float32, as
    the model declares), or with `exact` the model's math in float64 (reference.exact_outputs),
    which judges whether a QDQ input or its QOp conversion is nearer what the model means."""

    def __init__(self, work: str, exact: bool = False):
        self.work = work
        self.exact = exact
        self.cache: dict[tuple[str, str, int], tuple[list[np.ndarray], list[np.ndarray], float | None]] = {}

    def of(self, name: str, form: str, count: int = FEEDS):
        if (name, form, count) not in self.cache:
            src = corpus.path(name, form)
            xs = corpus.feeds(corpus.entry(name), count, SEED)
            want = reference.exact_outputs(src, xs) if self.exact else reference.outputs(src, xs)
            self.cache[(name, form, count)] = (xs, want, output_step(src))
        return self.cache[(name, form, count)]

    def reference_steps(self, name: str, form: str, model: str = "") -> tuple[float, float]:
        """With `exact`: how far the float32 ONNX reference of the input (or of `model`, a
        conversion of it) is from the exact math of the input (largest, mean)."""
        xs, want, step = self.of(name, form)
        got = reference.outputs(model or corpus.path(name, form), xs)
        return steps_off(want, got, step), mean_steps(want, got, step)


def noisy(target: str, precise: bool = False) -> bool:
    """Whether the setting's float arithmetic is not the model's (OpenVINO at its default precision)."""
    return target == "openvino" and not precise


def judged(want: list[np.ndarray], got: list[np.ndarray], step: float | None, per_input: bool) -> float:
    """The steps a cell reports: the largest difference over every input, or with `per_input` the
    mean over the inputs of each one's largest (NOISY_FEEDS)."""
    if not per_input:
        return steps_off(want, got, step)
    return float(np.mean([steps_off([w], [g], step) for w, g in zip(want, got)]))


def qconv_target(target: str, precise: bool = False) -> str:
    """The --target a runtime setting is converted for: OpenVINO at f32 is openvino-f32."""
    return "openvino-f32" if target == "openvino" and precise else target


def verify_errors(path: str, target: str) -> list[dict]:
    """The errors `qconv verify --target` finds on a model (each a finding of its --json)."""
    v = subprocess.run([qconv_bin(), "verify", path, "--target", target, "--json"], capture_output=True, text=True,
                       timeout=600)
    found = json.loads(v.stdout)["findings"] if v.stdout else []
    return [f for f in found if f["severity"] == "error"] if v.returncode == 1 else []


def cell(judge: Judge, name: str, form: str, target: str, precise: bool = False,
         extra: tuple[str, ...] = (), optimized: bool = False) -> Cell:
    """One cell; OpenVINO `precise` (INFERENCE_PRECISION_HINT f32) is converted with --target
    openvino-f32; onnxruntime `optimized` runs in a default session."""
    src = corpus.path(name, form)
    c = Cell(name, form, target + (" f32" if precise else "") + (" default" if optimized else ""))
    dst = os.path.join(judge.work, f"{name}.{form}.{target}{'.f32' if precise else ''}{'.default' if optimized else ''}.onnx")
    if os.path.exists(dst):
        os.remove(dst)
    p = subprocess.run([qconv_bin(), "convert", src, dst, "--target", qconv_target(target, precise), *extra],
                       capture_output=True, text=True, timeout=600)
    c.exit, c.stderr = p.returncode, p.stderr
    c.output = dst if c.exit == 0 else ""
    per_input = noisy(target, precise)
    xs, want, step = judge.of(name, form, NOISY_FEEDS if per_input else FEEDS)
    try:
        got = run_wholly(target, src, xs, precise, optimized)
        c.in_steps, c.in_mean = judged(want, got, step, per_input), mean_steps(want, got, step)
        c.in_runs = "yes"
    except runtimes.Refused as e:
        c.in_runs = str(e)
    if c.exit == 0:
        try:
            got = run_wholly(target, dst, xs, precise, optimized)
            c.out_steps, c.out_mean = judged(want, got, step, per_input), mean_steps(want, got, step)
            c.out_runs = "yes"
        except runtimes.Refused as e:
            c.out_runs = str(e)
    if c.exit == 0 and c.in_runs == "yes":  # what the baseline needs (Cell.baseline)
        c.in_flagged = len(verify_errors(src, qconv_target(target, precise)))
    if c.exit == 0 and (c.in_runs != "yes" or c.in_flagged) and "qdq" not in form:
        canonical = dst[:-len(".onnx")] + ".canonical.onnx"
        p = subprocess.run([qconv_bin(), "convert", src, canonical, "--format", "qdq"], capture_output=True, text=True,
                           timeout=600)
        if p.returncode != 0:
            c.qdq_runs = f"qconv convert --format qdq: exit {p.returncode}"
        else:
            try:
                got = run_wholly(target, canonical, xs, precise, optimized)
                c.qdq_steps = judged(want, got, step, per_input)
                c.qdq_runs = "yes"
            except runtimes.Refused as e:
                c.qdq_runs = str(e)
    return c
