"""Benchmark: qconv QDQ -> QOp on a ResNet-50-shape model (and, with --qop-to-qdq, the way back:
its QOp form, as onnxruntime's offline fusion writes it, -> QDQ), side by side in one run with
  - the floor: a bare protobuf parse + serialize of the same file (build/bench/qconv_roundtrip);
  - the peer: onnxruntime's offline fusion (optimized_model_filepath, ORT_ENABLE_EXTENDED).
Each is timed as a whole process (median of --runs, the tools taking turns), writing a new
output and replacing one, with its peak RSS from GNU time. --scaling adds the same graph at
four sizes from 10 MB to 2.3 GB (inline and external data), against the floor.

    .venv/bin/python bench/bench_convert.py [--runs 21] [--scaling] [--qop-to-qdq] [--api] [--targets [--baseline BIN]]
                                            [--work DIR] [--markdown FILE]

Not a test: nothing here asserts a time.
"""
from __future__ import annotations

import argparse
import os
import platform
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
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class ExternalSink:
    """Writes each large tensor straight to a data file beside the model (4096-aligned, as
    onnx.save does not stream): a >2 GB model is built without holding its weights."""

    def __init__(self, model_path: str):
        self.location = os.path.basename(model_path) + ".data"
        self.file = open(model_path + ".data", "wb")

    def tensor(self, name: str, array: np.ndarray) -> onnx.TensorProto:
        offset = (self.file.tell() + 4095) // 4096 * 4096
        self.file.seek(offset)
        self.file.write(np.ascontiguousarray(array).tobytes())
        t = TensorProto(name=name, data_type=helper.np_dtype_to_tensor_dtype(array.dtype), dims=array.shape,
                        data_location=TensorProto.EXTERNAL)
        for k, v in (("location", self.location), ("offset", str(offset)), ("length", str(array.nbytes))):
            t.external_data.add(key=k, value=v)
        return t

    def close(self):
        self.file.close()


class QdqResNet:
    """ResNet-50 topology written directly in QDQ form (the form quantize_static writes):
    uint8 activations through Q/DQ pairs, per-channel int8 weights, int32 biases at
    x_scale*w_scale. Weights are random: this measures conversion, not accuracy.

    `width` multiplies every channel count (1.0: ResNet-50, about 25 MB); the graph stays the
    same, so the scaling series varies only the bytes. With `sink`, tensors of 1 KiB or more go
    to external data; with `dry`, nothing is made and `bytes` counts the weights."""

    def __init__(self, seed: int = 0, width: float = 1.0, sink: ExternalSink | None = None, dry: bool = False):
        self.rng = np.random.default_rng(seed)
        self.width, self.sink, self.dry = width, sink, dry
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.k = 0
        self.bytes = 0

    def uid(self, base: str) -> str:
        self.k += 1
        return f"{base}_{self.k}"

    def channels(self, c: int) -> int:
        return max(1, round(c * self.width))

    def const(self, name: str, array: np.ndarray) -> str:
        self.bytes += array.nbytes
        if self.dry:
            return name
        if self.sink and array.nbytes >= 1024:
            self.inits.append(self.sink.tensor(name, array))
        else:
            self.inits.append(numpy_helper.from_array(array, name))
        return name

    def weights(self, shape: tuple[int, ...]) -> np.ndarray:
        if self.dry:
            return np.broadcast_to(np.int8(0), shape)
        return self.rng.integers(-127, 128, shape, dtype=np.int8)

    def qdq(self, x: str, scale: float) -> tuple[str, float]:
        """Q then DQ of a float tensor at `scale`, zero point 0 (after a Relu)."""
        s = self.const(self.uid("s"), np.array(scale, np.float32))
        z = self.const(self.uid("z"), np.array(0, np.uint8))
        q, d = self.uid("q"), self.uid("dq")
        self.nodes.append(helper.make_node("QuantizeLinear", [x, s, z], [q], name=q + "_Q"))
        self.nodes.append(helper.make_node("DequantizeLinear", [q, s, z], [d], name=d + "_DQ"))
        return d, scale

    def conv(self, x: tuple[str, float], cin: int, cout: int, k: int, stride: int = 1, relu: bool = True):
        xs = x[1]
        w = self.weights((cout, cin, k, k))
        ws = (self.rng.random(cout, dtype=np.float32) * 0.01 + 0.001).astype(np.float32)
        b = self.rng.integers(-5000, 5000, cout, dtype=np.int32)
        wn, bn = self.uid("w"), self.uid("b")
        self.const(wn, w)
        self.const(wn + "_scale", ws)
        self.const(wn + "_zp", np.zeros(cout, np.int8))
        self.const(bn, b)
        self.const(bn + "_scale", (ws * np.float32(xs)).astype(np.float32))
        self.const(bn + "_zp", np.zeros(cout, np.int32))
        self.nodes.append(helper.make_node("DequantizeLinear", [wn, wn + "_scale", wn + "_zp"], [wn + "_dq"], axis=0))
        self.nodes.append(helper.make_node("DequantizeLinear", [bn, bn + "_scale", bn + "_zp"], [bn + "_dq"], axis=0))
        y = self.uid("conv")
        self.nodes.append(helper.make_node("Conv", [x[0], wn + "_dq", bn + "_dq"], [y], name=y, kernel_shape=[k, k],
                                           strides=[stride, stride], pads=[k // 2] * 4))
        if relu:
            r = self.uid("relu")
            self.nodes.append(helper.make_node("Relu", [y], [r], name=r))
            y = r
        return self.qdq(y, 0.05)

    def add_relu(self, a, b):
        y, r = self.uid("add"), self.uid("relu")
        self.nodes.append(helper.make_node("Add", [a[0], b[0]], [y], name=y))
        self.nodes.append(helper.make_node("Relu", [y], [r], name=r))
        return self.qdq(r, 0.05)

    def build(self, size: int = 224) -> onnx.ModelProto:
        c = self.channels
        x = self.qdq("input", 0.02)
        x = self.conv(x, 3, c(64), 7, 2)
        p = self.uid("pool")
        self.nodes.append(helper.make_node("MaxPool", [x[0]], [p], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4))
        x = self.qdq(p, x[1])
        cin = c(64)
        for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
            for i in range(blocks):
                s = stride if i == 0 else 1
                y = self.conv(x, cin, c(width), 1)
                y = self.conv(y, c(width), c(width), 3, s)
                y = self.conv(y, c(width), c(width * 4), 1, relu=False)
                short = self.conv(x, cin, c(width * 4), 1, s, relu=False) if i == 0 else x
                x = self.add_relu(short, y)
                cin = c(width * 4)
        g = self.uid("gap")
        self.nodes.append(helper.make_node("GlobalAveragePool", [x[0]], [g]))
        f = self.uid("flat")
        self.nodes.append(helper.make_node("Flatten", [g], [f]))
        fq = self.qdq(f, x[1])
        self.const("fc_w", self.weights((cin, 1000)))
        self.const("fc_w_scale", np.array(0.002, np.float32))
        self.const("fc_w_zp", np.array(0, np.int8))
        self.nodes.append(helper.make_node("DequantizeLinear", ["fc_w", "fc_w_scale", "fc_w_zp"], ["fc_w_dq"]))
        self.nodes.append(helper.make_node("MatMul", [fq[0], "fc_w_dq"], ["fc"], name="fc"))
        out = self.qdq("fc", 0.1)
        self.nodes.append(helper.make_node("Identity", [out[0]], ["output"]))
        graph = helper.make_graph(self.nodes, "resnet50_qdq",
                                  [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
                                  [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1000])],
                                  self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="qconv-bench")
        m.ir_version = 7
        return m


def width_for(target_bytes: float) -> float:
    """The channel multiplier whose model holds about `target_bytes` of tensors (bisection on a
    dry build: the weights grow with width squared, the per-channel tensors linearly)."""
    lo, hi = 0.05, 20.0
    for _ in range(40):
        mid = (lo + hi) / 2
        dry = QdqResNet(width=mid, dry=True)
        dry.build()
        lo, hi = (mid, hi) if dry.bytes < target_bytes else (lo, mid)
    return (lo + hi) / 2


def save_model(path: str, target_bytes: float, external: bool) -> int:
    """Build the model at about `target_bytes` into `path` (and `path`.data); its bytes on disk."""
    width = 1.0 if target_bytes is None else width_for(target_bytes)
    if external:
        sink = ExternalSink(path)
        onnx.save(QdqResNet(width=width, sink=sink).build(), path)
        sink.close()
        return os.path.getsize(path) + os.path.getsize(path + ".data")
    onnx.save(QdqResNet(width=width).build(), path)
    return os.path.getsize(path)


def measure(rows: list[tuple[str, list[str], str]], runs: int, work: str, fresh: bool) -> dict[str, tuple[float, float]]:
    """Per tool: median wall seconds and max peak RSS (MiB) of a whole process writing its output.
    The tools take turns within each run, so that a drift of this shared machine hits them alike.
    fresh: the output (and its data file) is removed before each run, untimed; else each run replaces
    the last one's. Dirty pages are synced before each run, untimed. Peak RSS comes from GNU time: a child forked straight from this (large)
    Python process would inherit its high-water mark in ru_maxrss."""
    times: dict[str, list[float]] = {name: [] for name, _, _ in rows}
    peaks: dict[str, list[float]] = {name: [] for name, _, _ in rows}
    rss_file = os.path.join(work, "rss")
    for _ in range(runs):
        for name, cmd, out in rows:
            if fresh:
                remove(out)
            os.sync()  # untimed: the last run's writeback must not throttle this one
            start = time.perf_counter()
            proc = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss_file, *cmd],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            times[name].append(time.perf_counter() - start)
            if proc.returncode != 0:
                raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr.decode()}")
            with open(rss_file) as f:
                peaks[name].append(int(f.read().split()[-1]) / 1024.0)
    return {name: (statistics.median(times[name]), max(peaks[name])) for name in times}


def remove(model: str) -> None:
    """The model and its data files: OUT.data (the floor, onnxruntime) and OUT.<tag>.data (qconv)."""
    folder, base = os.path.split(model)
    for name in os.listdir(folder or "."):
        if name == base or (name.startswith(base + ".") and name.endswith(".data")):
            os.unlink(os.path.join(folder, name))


ORT_FUSE = """
import sys, onnxruntime as ort
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
so.optimized_model_filepath = sys.argv[2]
ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
"""


class Tools:
    def __init__(self, build: str, work: str, qop_flags: list[str] | None = None):
        self.qconv = os.path.join(build, "tools", "qconv")
        self.qop_flags = qop_flags or []  # --contrib: onnxruntime's com.microsoft ops too
        self.floor = os.path.join(build, "bench", "qconv_roundtrip")
        self.work = work

    def commands(self, src: str, peer: bool, fmt: str = "qop") -> list[tuple[str, list[str], str]]:
        """(name, command, output) for the floor, qconv and, with `peer`, onnxruntime."""
        out = {k: os.path.join(self.work, f"{k}.onnx") for k in ("floor", "qconv", "ort")}
        rows = [("floor", [self.floor, src, out["floor"]], out["floor"]),
                ("qconv", [self.qconv, "convert", src, out["qconv"], "--format", fmt, "-q",
                           *(self.qop_flags if fmt == "qop" else [])], out["qconv"])]
        if peer:
            rows.append(("onnxruntime", [sys.executable, "-c", ORT_FUSE, src, out["ort"]], out["ort"]))
        return rows


def both_modes(rows: list[tuple[str, list[str], str]], runs: int, work: str) -> dict[str, dict[str, float]]:
    """Per tool: median seconds writing a new output ("fresh") and replacing one ("replace"), and
    its peak RSS (MiB, "rss")."""
    res: dict[str, dict[str, float]] = {name: {} for name, _, _ in rows}
    for mode in ("fresh", "replace"):
        for name, (t, m) in measure(rows, runs, work, fresh=mode == "fresh").items():
            res[name][mode] = t
            res[name]["rss"] = max(res[name].get("rss", 0.0), m)
    return res


def table(res: dict[str, dict[str, float]]) -> list[str]:
    """The markdown table of both_modes' results, against the floor."""
    f = res["floor"]
    lines = ["| tool | new output (ms) | replacing output (ms) | peak RSS (MiB) | / floor, new | / floor, replacing |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, r in res.items():
        lines.append(f"| {name} | {r['fresh'] * 1000:.0f} | {r['replace'] * 1000:.0f} | {r['rss']:.0f} | "
                     f"{r['fresh'] / f['fresh']:.2f} | {r['replace'] / f['replace']:.2f} |")
    return lines


def resnet50(tools: Tools, runs: int) -> list[str]:
    """Issue 4's three targets on the ResNet-50-size model, every tool measured alternately
    in the same run, writing a fresh output and replacing an existing one."""
    src = os.path.join(tools.work, "resnet50_qdq.onnx")
    size = save_model(src, None, external=False)
    size_mib = size / 2**20
    rows = tools.commands(src, peer=True)
    res = both_modes(rows, runs, tools.work)
    fused = sum(1 for n in onnx.load(rows[1][2]).graph.node if n.op_type.startswith("QLinear"))
    peer_fused = sum(1 for n in onnx.load(rows[2][2]).graph.node if n.op_type.startswith("QLinear"))
    q, f, p = res["qconv"], res["floor"], res["onnxruntime"]
    limit = 2 * size_mib + 16
    lines = [
        f"Model: ResNet-50-shape QDQ, {size_mib:.1f} MiB, 53 Conv + 1 MatMul "
        f"(qconv fused {fused} QLinear ops, onnxruntime {peer_fused} QLinear* ops); median of {runs} runs each",
        "",
    ] + table(res)
    lines += [
        "",
        f"- qconv / floor: {q['fresh'] / f['fresh']:.2f}x (new output), {q['replace'] / f['replace']:.2f}x "
        f"(replacing); target <= 1.25x",
        f"- qconv / onnxruntime: {q['fresh'] / p['fresh']:.2f}x (new output), {q['replace'] / p['replace']:.2f}x "
        f"(replacing); target <= 0.33x",
        f"- qconv peak RSS: {q['rss']:.0f} MiB; target <= 2 x {size_mib:.1f} + 16 = {limit:.0f} MiB "
        f"({q['rss'] / f['rss']:.2f}x the floor's)",
    ]
    return lines


def api(tools: Tools, runs: int, models: list[tuple[str, str]]) -> list[str]:
    """The Python API (the installed wheel, issue 37) beside the CLI, in this one run: for each
    model, the CLI as a whole process (as above), and in this warm Python process the API by path
    (a file written, as the CLI writes it), bytes in and bytes out, and a path in with an
    onnx.ModelProto out (its parse included). 'over run()' is the API's time less the time the
    library's run() itself took (the report's "ms"): what the binding and the Python around it
    add to the conversion the CLI makes in-process."""
    try:
        import qconv
    except ImportError:
        return ["(no qconv package in this environment: scripts/test.sh installs the wheel into .venv)"]
    lines = [f"qconv {qconv.__version__} (commit {qconv.__commit__}), median of {runs} runs each", "",
             "| model | way | time (ms) | over run() (ms) |", "|---|---|---:|---:|"]
    for label, src in models:
        out = os.path.join(tools.work, "api.onnx")
        data = open(src, "rb").read()
        cli = measure([("cli", [tools.qconv, "convert", src, out, "--format", "qop", "-q"], out)], runs, tools.work,
                      fresh=False)["cli"][0]
        ways = {"API, path -> path": lambda: qconv.convert(src, out, format="qop", quiet=True),
                "API, bytes -> bytes": lambda: qconv.convert(data, format="qop", quiet=True),
                "API, path -> ModelProto": lambda: qconv.convert(src, format="qop", quiet=True)}
        lines.append(f"| {label} | CLI (whole process) | {cli * 1000:.1f} | |")
        for way, call in ways.items():
            times, over = [], []
            for _ in range(runs):
                start = time.perf_counter()
                r = call()
                if way.endswith("ModelProto"):
                    assert r.model is not None
                times.append(time.perf_counter() - start)
                over.append(times[-1] - r.report["ms"] / 1000)
            lines.append(f"| {label} | {way} | {statistics.median(times) * 1000:.1f} | "
                         f"{statistics.median(over) * 1000:.2f} |")
    return lines


def resnet50_qop_to_qdq(tools: Tools, runs: int) -> list[str]:
    """QOp -> QDQ (issue 14): the ResNet-50-shape model in the QOp form onnxruntime's offline fusion
    writes (QLinearConv, com.microsoft QLinearAdd, QLinearMatMul), converted to QDQ by qconv, beside
    the floor (a parse + serialize of that file) and onnxruntime's run on it (load, optimize, save:
    onnxruntime has no QOp -> QDQ conversion, so this is what reading the QOp model costs it)."""
    qdq = os.path.join(tools.work, "resnet50_qdq.onnx")
    src = os.path.join(tools.work, "resnet50_qop.onnx")
    if not os.path.exists(qdq):
        save_model(qdq, None, external=False)
    subprocess.run([sys.executable, "-c", ORT_FUSE, qdq, src], check=True)
    counts: dict[str, int] = {}
    for n in onnx.load(src).graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    rows = tools.commands(src, peer=True, fmt="qdq")
    res = both_modes(rows, runs, tools.work)
    left = sum(1 for n in onnx.load(rows[1][2]).graph.node if n.op_type.startswith("QLinear") or n.domain)
    quantized = ", ".join(f"{counts[k]} {k}" for k in sorted(counts) if k.startswith("QLinear"))
    return [
        f"Model: the ResNet-50-shape model's QOp form ({os.path.getsize(src) / 2**20:.1f} MiB: {quantized}) -> "
        f"QDQ ({left} quantized ops left); median of {runs} runs each",
        "",
    ] + table(res)


# --targets: each target on the ResNet-50-shape model (uint8 asymmetric activations, per-channel
# weights); aidge needs --approximate for its per-channel weights, tensorrt refuses the asymmetric
# activations (exit 4), so it is timed on the symmetric form of the model instead.
TARGET_FLAGS = {"onnxruntime": [], "openvino": [], "iree": [], "tvm": [], "aidge": ["--approximate"], "tensorrt": []}


def targets(tools: Tools, runs: int, baseline: str | None) -> list[str]:
    """Every --target beside today's --format qop and qdq (and, with `baseline`, the same two runs
    of another qconv binary: the one before --target), the floor in the same run."""
    src = os.path.join(tools.work, "resnet50_qdq.onnx")
    if not os.path.exists(src):
        save_model(src, None, external=False)
    sym = os.path.join(tools.work, "resnet50_qdq_symmetric.onnx")
    m = onnx.load(src)  # activations at zero point 128 as int8 at 0: what TensorRT takes
    for t in m.graph.initializer:
        if t.data_type == TensorProto.UINT8 and not t.dims:
            t.CopyFrom(numpy_helper.from_array(np.array(128, np.uint8), t.name))
    onnx.save(m, sym)
    out = lambda k: os.path.join(tools.work, f"{k}.onnx")  # noqa: E731
    rows = [("floor", [tools.floor, src, out("floor")], out("floor"))]
    for fmt in ("qop", "qdq"):
        rows.append((f"qconv --format {fmt}", [tools.qconv, "convert", src, out(fmt), "--format", fmt, "-q"], out(fmt)))
        if baseline:
            rows.append((f"baseline --format {fmt}", [baseline, "convert", src, out("b" + fmt), "--format", fmt, "-q"],
                         out("b" + fmt)))
    for t, flags in TARGET_FLAGS.items():
        rows.append((f"qconv --target {t}", [tools.qconv, "convert", sym if t == "tensorrt" else src, out(t),
                                             "--target", t, "-q", *flags], out(t)))
    res = measure(rows, runs, tools.work, fresh=True)
    f = res["floor"][0]
    lines = [f"Model: ResNet-50-shape QDQ ({os.path.getsize(src) / 2**20:.1f} MiB); new output each run, median of "
             f"{runs}; tensorrt on its symmetric form{'; baseline: ' + baseline if baseline else ''}", "",
             "| run | ms | / floor | peak RSS (MiB) |", "|---|---:|---:|---:|"]
    for name, (t, rss) in res.items():
        lines.append(f"| {name} | {t * 1000:.0f} | {t / f:.2f} | {rss:.0f} |")
    return lines


SCALING = [("inline", 10e6), ("inline", 100e6), ("inline", 1e9),
           ("external data", 10e6), ("external data", 100e6), ("external data", 1e9), ("external data", 2.3e9)]


def scaling(tools: Tools, runs: int) -> list[str]:
    """The same graph at four sizes from 10 MB to over 2 GB (inline up to 1 GB, the protobuf
    limit being 2 GB; external data at all four). One model on disk at a time."""
    lines = [
        f"Median of {runs} runs below 1 GB, 5 runs from 1 GB; new output each run.",
        "",
        "| storage | model (MB) | floor (ms) | qconv (ms) | qconv / floor | qconv ms per 100 MB | "
        "qconv --no-saturation-check (ms) | its ms per 100 MB | qconv peak RSS (MiB) | RSS limit 2 x size + 16 (MiB) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for storage, target in SCALING:
        src = os.path.join(tools.work, "scale.onnx")
        size = save_model(src, target, external=storage != "inline")
        n = runs if size < 1e9 else 5
        rows = tools.commands(src, peer=False)
        unchecked = os.path.join(tools.work, "unchecked.onnx")
        rows.append(("unchecked", [tools.qconv, "convert", src, unchecked, "--format", "qop", "-q",
                                   "--no-saturation-check", *tools.qop_flags], unchecked))
        res = measure(rows, n, tools.work, fresh=True)
        for _, _, out in rows:
            remove(out)
        remove(src)
        (tf, _), (tq, mq), (tu, _) = res["floor"], res["qconv"], res["unchecked"]
        lines.append(f"| {storage} | {size / 1e6:.0f} | {tf * 1000:.0f} | {tq * 1000:.0f} | {tq / tf:.2f} | "
                     f"{tq * 1000 / (size / 1e8):.1f} | {tu * 1000:.0f} | {tu * 1000 / (size / 1e8):.1f} | {mq:.0f} | "
                     f"{2 * size / 2**20 + 16:.0f} |")
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--scaling", action="store_true", help="also the four sizes from 10 MB to over 2 GB "
                    "(needs about 7 GB of disk in --work and a few minutes)")
    ap.add_argument("--qop-to-qdq", action="store_true", help="also the model's QOp form -> QDQ (issue 14)")
    ap.add_argument("--contrib", action="store_true", help="qconv --format qop with --contrib (com.microsoft ops too)")
    ap.add_argument("--targets", action="store_true", help="also every --target beside today's formats")
    ap.add_argument("--api", action="store_true", help="also the Python API (the installed wheel) beside the CLI")
    ap.add_argument("--baseline", help="with --targets: another qconv binary timed beside (the one before --target)")
    ap.add_argument("--work", help="folder for the models, created when missing (default: a temporary folder)")
    ap.add_argument("--markdown", help="also write the results to this file")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(dir=args.work and benchenv.work_dir(args.work, "")) as work:
        tools = Tools(args.build, work, ["--contrib"] if args.contrib else [])
        lines = [f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}; whole processes", ""]
        lines += resnet50(tools, args.runs)
        print("\n".join(lines), flush=True)
        if args.qop_to_qdq:
            more = resnet50_qop_to_qdq(tools, args.runs)
            print("\n" + "\n".join(more), flush=True)
            lines += ["", "QOp -> QDQ:", ""] + more
        if args.api:
            more = api(tools, args.runs, [("bundled example", os.path.join(ROOT, "test_data", "examples",
                                                                             "small_cnn_qdq.onnx")),
                                          ("ResNet-50 shape", os.path.join(work, "resnet50_qdq.onnx"))])
            print("\n" + "\n".join(more), flush=True)
            lines += ["", "Python API:", ""] + more
        if args.targets:
            more = targets(tools, args.runs, args.baseline)
            print("\n" + "\n".join(more), flush=True)
            lines += ["", "--target:", ""] + more
        if args.scaling:
            print()
            lines += ["", "Scaling:", ""] + scaling(tools, args.runs)
    text = "\n".join(lines)
    if args.scaling:
        print("\n" + "\n".join(lines[lines.index("Scaling:"):]))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
