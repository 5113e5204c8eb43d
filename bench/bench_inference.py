"""Benchmark: onnxruntime inference time, one thread, of a ResNet-50-shape model in the forms
qconv writes, so that users can choose a form by these figures (docs/onnxruntime-cpu.md):

- QDQ input (the form quantize_static writes: uint8 activations, per-channel int8 weights),
  run with onnxruntime's own fusion (ORT_ENABLE_EXTENDED);
- QOp u8 x s8 (`--format qop`), u8 x u8 (`--weight-type uint8`), s8 x s8 (`--activation-type int8`),
  each at ORT_ENABLE_EXTENDED too.

It also counts, per form, the outputs that differ from the u8 x u8 form, which onnxruntime
computes exactly on every CPU (test_saturation.py): on an x86 CPU without VNNI, the u8 x s8
forms are off. Not a test: no time is asserted. Prints a Markdown table and the host's CPU.

    .venv/bin/python bench/bench_inference.py [--runs 15] [--work DIR]
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchenv  # noqa: E402  (.venv and a built qconv, checked first)

benchenv.require()

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_convert import QdqResNet  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QCONV = os.environ.get("QCONV_BIN", os.path.join(ROOT, "build", "tools", "qconv"))


def cpu() -> str:
    text = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    model = re.search(r"model name\s*:\s*(.*)", text)
    flags = set(re.search(r"flags\s*:\s*(.*)", text).group(1).split()) if "flags" in text else set()
    shown = [f for f in ("avx2", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "amx_int8") if f in flags]
    return f"{model.group(1) if model else platform.machine()}; flags: {' '.join(shown) or 'none of avx2/avx512/vnni'}"


def session(path: str) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def timed(path: str, x: np.ndarray, runs: int) -> tuple[float, np.ndarray]:
    sess = session(path)
    name = sess.get_inputs()[0].name
    out = sess.run(None, {name: x})[0]
    sess.run(None, {name: x})  # warm-up
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        sess.run(None, {name: x})
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    work = benchenv.work_dir(args.work, "qconv-infer-")
    src = os.path.join(work, "resnet50_qdq.onnx")
    onnx.save(QdqResNet().build(), src)
    forms = [("QDQ input, onnxruntime's fusion", src, None)]
    for label, flags in [("QOp u8 x s8 (--format qop)", []), ("QOp u8 x u8 (--weight-type uint8)", ["--weight-type", "uint8"]),
                         ("QOp s8 x s8 (--activation-type int8)", ["--activation-type", "int8"])]:
        out = os.path.join(work, f"qop{'_'.join(flags)}.onnx")
        subprocess.run([QCONV, "convert", src, out, "--format", "qop", "-q", *flags], check=True,
                       stderr=subprocess.DEVNULL)
        forms.append((label, out, flags))
    sess = session(src)
    shape = [d if isinstance(d, int) else 1 for d in sess.get_inputs()[0].shape]
    x = np.random.default_rng(0).normal(0, 1, shape).astype(np.float32)
    results = {label: timed(path, x, args.runs) for label, path, _ in forms}
    exact = results["QOp u8 x u8 (--weight-type uint8)"][1]
    step = float(np.min(np.abs(np.diff(np.unique(exact))))) if np.unique(exact).size > 1 else 1.0
    print(f"Host: {cpu()}; onnxruntime {ort.__version__}, 1 thread, median of {args.runs} runs")
    print(f"Model: ResNet-50-shape, input {shape}, {os.path.getsize(src) / 2**20:.1f} MiB\n")
    print("| form | ms per inference | outputs off the exact u8 x u8 result | by up to (steps) |")
    print("|---|---:|---:|---:|")
    for label, _, _ in forms:
        ms, out = results[label]
        off = int(np.count_nonzero(out != exact))
        print(f"| {label} | {ms:.1f} | {off} of {exact.size} | {float(np.max(np.abs(out - exact))) / step:.0f} |")


if __name__ == "__main__":
    main()
