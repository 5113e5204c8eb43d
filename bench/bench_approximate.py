"""What --approximate's figures mean (issue 36, item 8): each listed tensor's worst error is per
tensor, in steps of that tensor's own old scale; the end-to-end output moves by more, since the
errors of many tensors add up through the layers. For each model onnxruntime quantized (QDQ,
uint8 activations asymmetric, int8 weights, per channel and per tensor), this converts with
--target tensorrt --approximate (asymmetric activations requantized symmetrically) and --target
aidge --approximate (per-channel constants requantized per tensor), and prints, in one table:
the number of tensors listed, the largest listed error, and the end-to-end error of the output
against the input model under the ONNX reference, in steps of the output's quantization (its
largest, and the 99th percentile over elements). As the last row per model, for TensorRT: the
same model quantized symmetrically at the source (onnxruntime's ActivationSymmetric), which
converts exactly with no approximation.

    .venv/bin/python bench/bench_approximate.py [--inputs 8] [--work DIR]
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

from benchenv import ROOT, require, work_dir

sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=int, default=8, help="random inputs per model (default 8)")
    ap.add_argument("--work", help="folder for the models (default: a temporary one)")
    args = ap.parse_args()
    require(("numpy", "onnx", "onnxruntime"))
    import numpy as np
    import onnx

    import models
    import reference
    from conftest import output_step

    qconv = os.path.join(ROOT, "build", "tools", "qconv")
    work = work_dir(args.work, "qconv-approximate-")
    rows = []
    for name, make in models.FLOAT_MODELS.items():
        fm = make()
        xs = models.sample_inputs(fm, args.inputs, seed=7)
        for per_channel in (True, False):
            for symmetric in (False, True):
                src = os.path.join(work, f"{name}_{'pc' if per_channel else 'pt'}_{'sym' if symmetric else 'asym'}.onnx")
                models.quantize_static(fm, src, fmt="qdq", per_channel=per_channel, activation="uint8", work_dir=work,
                                       symmetric=symmetric)
                want = reference.outputs(onnx.load(src), xs)
                step = output_step(src)
                for target in ("tensorrt", "aidge"):
                    if symmetric and target == "aidge":
                        continue
                    dst = src.replace(".onnx", f"_{target}.onnx")
                    r = subprocess.run([qconv, "convert", src, dst, "--target", target, "--approximate"], capture_output=True,
                                       text=True)
                    if r.returncode != 0:
                        rows.append((name, per_channel, symmetric, target, "exit %d" % r.returncode, "", "", ""))
                        continue
                    listed = [float(m) for m in re.findall(r"worst (?:rounding )?error ([0-9.e+-]+) steps", r.stderr)]
                    got = reference.outputs(onnx.load(dst), xs)
                    diff = np.concatenate([np.abs(a - b).ravel() for a, b in zip(got, want)]) / step
                    rows.append((name, per_channel, symmetric, target, str(len(listed)),
                                 f"{max(listed):.2f}" if listed else "-", f"{diff.max():.1f}", f"{np.percentile(diff, 99):.1f}"))
    print("| model | weights | activations | --target | tensors listed | worst listed (steps of its scale) | "
          "end to end, max (output steps) | end to end, 99th percentile |")
    print("|---|---|---|---|---:|---:|---:|---:|")
    for name, pc, sym, target, n, worst, mx, p99 in rows:
        print(f"| {name} | {'per channel' if pc else 'per tensor'} | {'symmetric' if sym else 'asymmetric'} | {target} | "
              f"{n} | {worst} | {mx} | {p99} |")


if __name__ == "__main__":
    main()
