"""Benchmark: qconv QDQ -> QOp on a ResNet-50-shape model, side by side in one run with
  - the floor: a bare protobuf parse + serialize of the same file (build/bench/qconv_roundtrip);
  - the peer: onnxruntime's offline fusion (optimized_model_filepath, ORT_ENABLE_EXTENDED).
Each is timed as a whole process (median of --runs), with its peak RSS from wait4.

    .venv/bin/python bench/bench_convert.py [--runs 5] [--markdown docs/benchmarks.md]

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

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class QdqResNet:
    """ResNet-50 topology written directly in QDQ form (the form quantize_static writes):
    uint8 activations through Q/DQ pairs, per-channel int8 weights, int32 biases at
    x_scale*w_scale. Weights are random: this measures conversion, not accuracy."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.k = 0

    def uid(self, base: str) -> str:
        self.k += 1
        return f"{base}_{self.k}"

    def const(self, name: str, array: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(array, name))
        return name

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
        w = self.rng.integers(-127, 128, (cout, cin, k, k), dtype=np.int8)
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
        x = self.qdq("input", 0.02)
        x = self.conv(x, 3, 64, 7, 2)
        p = self.uid("pool")
        self.nodes.append(helper.make_node("MaxPool", [x[0]], [p], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4))
        x = self.qdq(p, x[1])
        cin = 64
        for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
            for i in range(blocks):
                s = stride if i == 0 else 1
                y = self.conv(x, cin, width, 1)
                y = self.conv(y, width, width, 3, s)
                y = self.conv(y, width, width * 4, 1, relu=False)
                short = self.conv(x, cin, width * 4, 1, s, relu=False) if i == 0 else x
                x = self.add_relu(short, y)
                cin = width * 4
        g = self.uid("gap")
        self.nodes.append(helper.make_node("GlobalAveragePool", [x[0]], [g]))
        f = self.uid("flat")
        self.nodes.append(helper.make_node("Flatten", [g], [f]))
        fq = self.qdq(f, x[1])
        w = self.rng.integers(-127, 128, (2048, 1000), dtype=np.int8)
        self.const("fc_w", w)
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


def measure(cmd: list[str], runs: int, work: str) -> tuple[float, float]:
    """Median wall seconds and max peak RSS (MiB) of a whole process. Peak RSS comes from
    GNU time: a child forked straight from this (large) Python process would inherit its
    high-water mark in ru_maxrss."""
    times, peaks = [], []
    rss_file = os.path.join(work, "rss")
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss_file, *cmd],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr.decode()}")
        with open(rss_file) as f:
            peaks.append(int(f.read().split()[-1]) / 1024.0)
    return statistics.median(times), max(peaks)


ORT_FUSE = """
import sys, onnxruntime as ort
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
so.optimized_model_filepath = sys.argv[2]
ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--markdown", help="also write the results table to this file")
    args = ap.parse_args()
    qconv = os.path.join(args.build, "tools", "qconv")
    floor = os.path.join(args.build, "bench", "qconv_roundtrip")

    with tempfile.TemporaryDirectory() as work:
        src = os.path.join(work, "resnet50_qdq.onnx")
        onnx.save(QdqResNet().build(), src)
        size_mib = os.path.getsize(src) / 2**20
        rows = [
            ("floor: protobuf parse + serialize", [floor, src, os.path.join(work, "floor.onnx")]),
            ("qconv convert --format qop", [qconv, "convert", src, os.path.join(work, "qconv.onnx"), "--format", "qop", "-q"]),
            ("onnxruntime offline fusion (peer)", [sys.executable, "-c", ORT_FUSE, src, os.path.join(work, "ort.onnx")]),
        ]
        results = [(name, *measure(cmd, args.runs, work)) for name, cmd in rows]
        fused = sum(1 for n in onnx.load(os.path.join(work, "qconv.onnx")).graph.node if n.op_type.startswith("QLinear"))
        peer_fused = sum(1 for n in onnx.load(os.path.join(work, "ort.onnx")).graph.node if n.op_type.startswith("QLinear"))

    t_floor, m_floor = results[0][1], results[0][2]
    t_qconv, m_qconv = results[1][1], results[1][2]
    t_peer, m_peer = results[2][1], results[2][2]
    lines = [
        f"Model: ResNet-50-shape QDQ, {size_mib:.1f} MiB, 53 Conv + 1 MatMul "
        f"(qconv fused {fused} QLinear ops, onnxruntime {peer_fused} QLinear* ops)",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}; median of {args.runs} runs, whole processes",
        "",
        "| tool | time (ms) | peak RSS (MiB) | time / floor | time / peer | RSS / model size |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, t, m in results:
        lines.append(f"| {name} | {t * 1000:.0f} | {m:.0f} | {t / t_floor:.2f} | {t / t_peer:.2f} | {m / size_mib:.2f} |")
    lines += ["", f"qconv / floor: {t_qconv / t_floor:.2f}x time, {m_qconv / m_floor:.2f}x memory; "
                  f"qconv / onnxruntime: {t_qconv / t_peer:.2f}x time, {m_qconv / m_peer:.2f}x memory"]
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
