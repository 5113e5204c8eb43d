"""Benchmark: many small models (issue 17, line 5), in ms per model, each way in one run:
  - qconv, one batch:             qconv convert --out-dir DIR IN... (-j 1 and -j 2)
  - qconv, one process per model: a shell loop of `qconv convert IN OUT`
  - qconv, xargs -P 2:            the same processes, two at a time
  - the floor:                    a bare protobuf parse + serialize of each file
                                  (build/bench/qconv_roundtrip), in one process and one per model
  - the peer:                     onnxruntime's offline fusion (ORT_ENABLE_EXTENDED, optimized_model_filepath)
                                  of every model in one Python process (onnxruntime imported once)
The models: the bundled example (test_data/examples/small_cnn_qdq.onnx, 6.5 KB, 3 QDQ convs)
with its int8 weights redrawn per model, so that no two are the same. Each way's outputs are
compared with the one-process-per-model outputs, byte for byte. Median of --runs, the ways
taking turns within each run. Also: a lone conversion's time, and where it goes.

    .venv/bin/python bench/bench_batch.py [--models 200] [--runs 5] [--markdown FILE]

Not a test: nothing here asserts a time.
"""
from __future__ import annotations

import argparse
import filecmp
import os
import shutil
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
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "test_data", "examples", "small_cnn_qdq.onnx")

ORT_BATCH = """
import sys, onnxruntime as ort
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
args = sys.argv[1:]
for src, dst in zip(args[0::2], args[1::2]):
    so.optimized_model_filepath = dst
    ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
"""


def make_models(folder: str, count: int) -> list[str]:
    base = onnx.load(EXAMPLE)
    paths = []
    for i in range(count):
        m = onnx.ModelProto()
        m.CopyFrom(base)
        rng = np.random.default_rng(i)
        for t in m.graph.initializer:
            if t.data_type == onnx.TensorProto.INT8 and len(t.dims) == 4:
                a = rng.integers(-127, 128, tuple(t.dims)).astype(np.int8)
                t.CopyFrom(numpy_helper.from_array(a, t.name))
        path = os.path.join(folder, f"m{i:03d}.onnx")
        onnx.save(m, path)
        paths.append(path)
    return paths


def fresh(folder: str) -> str:
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    return folder


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", type=int, default=200)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--markdown", help="also write the table to this file")
    args = ap.parse_args()
    qconv = os.path.join(args.build, "tools", "qconv")
    floor = os.path.join(args.build, "bench", "qconv_roundtrip")
    flags = ["--format", "qop", "-q"]
    with tempfile.TemporaryDirectory() as work:
        ins = make_models(fresh(os.path.join(work, "in")), args.models)
        names = [os.path.basename(p) for p in ins]

        def outs(d: str) -> list[str]:
            return [os.path.join(d, n) for n in names]

        def script(d: str, cmd: list[str]) -> str:
            path = os.path.join(work, f"{os.path.basename(d)}.sh")
            with open(path, "w") as f:
                for src, dst in zip(ins, outs(d)):
                    f.write(" ".join([*cmd, src, dst]) + "\n")
            return path

        def pairs(d: str) -> str:
            path = os.path.join(work, f"{os.path.basename(d)}.pairs")
            with open(path, "w") as f:
                for src, dst in zip(ins, outs(d)):
                    f.write(f"{src} {dst}\n")
            return path

        d = {k: os.path.join(work, k) for k in ("procs", "batch1", "batch2", "xargs", "floor1", "floorN", "ort")}
        ways = [
            ("qconv, one batch (-j 1)", lambda: [qconv, "convert", *flags, "--out-dir", d["batch1"], *ins], "batch1"),
            ("qconv, one batch (-j 2)", lambda: [qconv, "convert", *flags, "--out-dir", d["batch2"], "-j", "2", *ins],
             "batch2"),
            ("qconv, one process per model", lambda: ["sh", script(d["procs"], [qconv, "convert", *flags])], "procs"),
            ("qconv, xargs -P 2 (one process per model)",
             lambda: ["sh", "-c", f"xargs -P 2 -n 2 {qconv} convert {' '.join(flags)} < {pairs(d['xargs'])}"], "xargs"),
            ("floor: parse + serialize, one process", lambda: [floor, *[x for p in zip(ins, outs(d["floor1"])) for x in p]],
             "floor1"),
            ("floor: parse + serialize, one process per model", lambda: ["sh", script(d["floorN"], [floor])], "floorN"),
            ("peer: onnxruntime offline fusion, one process",
             lambda: [sys.executable, "-c", ORT_BATCH, *[x for p in zip(ins, outs(d["ort"])) for x in p]], "ort"),
        ]
        times: dict[str, list[float]] = {name: [] for name, _, _ in ways}
        for _ in range(args.runs):
            for name, cmd, key in ways:
                fresh(d[key])
                argv = cmd()  # untimed: scripts written
                os.sync()
                start = time.perf_counter()
                r = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                times[name].append(time.perf_counter() - start)
                if r.returncode != 0:
                    raise SystemExit(f"{name} failed: {r.stderr.decode()[:2000]}")
        for key in ("batch1", "batch2", "xargs"):
            same = all(filecmp.cmp(a, b, shallow=False) for a, b in zip(outs(d[key]), outs(d["procs"])))
            if not same:
                raise SystemExit(f"{key}: outputs differ from one process per model")
        def median_ms(argv: list[str], n: int = 41) -> float:
            t = []
            for _ in range(n):
                start = time.perf_counter()
                subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                t.append(time.perf_counter() - start)
            return statistics.median(t) * 1000

        lone_out = os.path.join(work, "lone.onnx")
        lone_ms = median_ms([qconv, "convert", *flags, ins[0], lone_out])
        true_ms = median_ms(["/bin/true"])
        version_ms = median_ms([qconv, "--version"])
        stage_runs: dict[str, list[float]] = {}
        for _ in range(41):
            r = subprocess.run([qconv, "convert", *flags, "--time-passes", ins[0], lone_out], capture_output=True,
                               text=True, check=True)
            for line in r.stderr.splitlines():
                if line.startswith("qconv: info: ") and ": time: " in line:  # qconv: info: FILE: time: STAGE MS ms
                    name, ms = line.split(": time: ", 1)[1].rsplit(None, 2)[:2]
                    stage_runs.setdefault(name.strip(), []).append(float(ms))
        stages = {k: statistics.median(v) for k, v in stage_runs.items()}
        io_stages = ["read", "import", "emit", "write", "check", "commit"]
        passes_ms = sum(v for k, v in stages.items() if k not in io_stages)
        schemas = subprocess.run([os.path.join(args.build, "bench", "qconv_schema_cost")], capture_output=True,
                                 text=True, check=True).stdout.split()
        schema_ms = dict(zip(schemas[0::2], map(float, schemas[1::2])))
        vnni = "avx512_vnni" in open("/proc/cpuinfo").read() or "avx_vnni" in open("/proc/cpuinfo").read()
        per = {name: statistics.median(t) * 1000 / args.models for name, t in times.items()}
        ref = per["qconv, one batch (-j 1)"]
        lines = [f"{args.models} models of {os.path.getsize(ins[0])} bytes (median of {args.runs} runs; "
                 f"{os.cpu_count()} CPUs, VNNI: {'yes' if vnni else 'no'}); outputs of the batches and of xargs "
                 "byte-identical to one process per model", "",
                 "| way | ms per model | x one batch (-j 1) |", "|---|---:|---:|"]
        lines += [f"| {name} | {v:.2f} | {v / ref:.1f} |" for name, v in per.items()]
        lines += ["", f"A lone conversion of one of them, as a whole process (median of 41): {lone_ms:.1f} ms. "
                      "Where it goes:", "", "| part | ms |", "|---|---:|",
                  f"| a process that does nothing (`/bin/true`) | {true_ms:.2f} |",
                  f"| `qconv --version`: exec of the command (static since issue 39) and its static initializers "
                  f"(includes the row above) | {version_ms:.2f} |"]
        lines += [f"| stage `{k}` | {stages[k]:.2f} |" for k in io_stages if k in stages]
        lines += [f"| the {len(stages) - len([k for k in io_stages if k in stages])} passes together | {passes_ms:.2f} |",
                  f"| the rest (logger, exit) | {lone_ms - version_ms - sum(stages.values()):.2f} |", "",
                  f"The checker's schemas: libonnx's registry builds all of them on its first lookup, "
                  f"{schema_ms['registry']:.2f} ms in one process (what the `check` stage waited for before); "
                  f"io::OpSchemas builds the three this model uses in {schema_ms['lazy']:.2f} ms "
                  "(build/bench/qconv_schema_cost)."]
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
