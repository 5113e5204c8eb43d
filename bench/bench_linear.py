"""Is every pass linear in graph size? (issue 16, deliverable 5)

Two graph families, each at 10k, 100k and 1M nodes, where a quadratic pass would show:
- shared scale: DQ -> Q -> DQ chains that all read one scale and one zero point (pair-qdq
  collapses each DQ -> Q pair; the shared values lose a use every time);
- shared weight: QDQ convs that all read one DequantizeLinear'd weight (fuse-qlinear-conv fuses
  each; the weight's DQ loses a reader every time);
- shifted types: int8 tensors written by Cast, each read by DequantizeLinear -> Relu, converted
  with --activation-type uint8 (shift-types puts a converter right after each Cast: it used to
  find "the node after" by scanning the graph, 5.9 s at 30k nodes and 34 s at 60k).
qconv runs each with --time-passes; the table gives each stage's time per node (microseconds)
and the ratio of the largest size's per-node time to the smallest's (linear: about 1; the
target is within 2x). Beside them, the memory floor at the same sizes: what a name table and a
walk over the nodes cost per element on this host, when 10k elements fit in the caches and 1M
do not.

    .venv/bin/python bench/bench_linear.py [--sizes 10000,100000,1000000] [--markdown FILE]
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchenv  # noqa: E402  (.venv and a built qconv, checked first)

benchenv.require()

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def shared_scale(nodes: int) -> onnx.ModelProto:
    n = max(1, nodes // 3)
    inits = [numpy_helper.from_array(np.float32(0.5), "s"), numpy_helper.from_array(np.uint8(128), "z")]
    body = []
    for i in range(n):
        body += [helper.make_node("DequantizeLinear", ["x", "s", "z"], [f"f{i}"]),
                 helper.make_node("QuantizeLinear", [f"f{i}", "s", "z"], [f"q{i}"]),
                 helper.make_node("DequantizeLinear", [f"q{i}", "s", "z"], [f"y{i}"])]
    outs = [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [1]) for i in range(n)]
    g = helper.make_graph(body, "shared_scale", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1])], outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    return m


def shared_weight(nodes: int) -> onnx.ModelProto:
    n = max(1, nodes // 3)
    inits = [numpy_helper.from_array(np.float32(0.5), "s"), numpy_helper.from_array(np.uint8(128), "z"),
             numpy_helper.from_array(np.array([[[[1]], [[-2]]], [[[3]], [[-4]]]], np.int8), "w"),
             numpy_helper.from_array(np.float32(0.1), "ws"), numpy_helper.from_array(np.int8(0), "wz")]
    body = [helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"])]
    for i in range(n):
        body += [helper.make_node("DequantizeLinear", ["x", "s", "z"], [f"f{i}"]),
                 helper.make_node("Conv", [f"f{i}", "wf"], [f"c{i}"]),
                 helper.make_node("QuantizeLinear", [f"c{i}", "s", "z"], [f"q{i}"])]
    outs = [helper.make_tensor_value_info(f"q{i}", TensorProto.UINT8, [1, 2, 2, 2]) for i in range(n)]
    g = helper.make_graph(body, "shared_weight", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 2, 2, 2])],
                          outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    return m


def shifted_types(nodes: int) -> onnx.ModelProto:
    n = max(1, nodes // 3)
    inits = [numpy_helper.from_array(np.float32(0.5), "s"), numpy_helper.from_array(np.int8(3), "z")]
    body = []
    for i in range(n):
        body += [helper.make_node("Cast", ["x"], [f"c{i}"], to=TensorProto.INT8),
                 helper.make_node("DequantizeLinear", [f"c{i}", "s", "z"], [f"f{i}"]),
                 helper.make_node("Relu", [f"f{i}"], [f"y{i}"])]
    outs = [helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [1]) for i in range(n)]
    g = helper.make_graph(body, "shifted_types", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])], outs,
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    return m


def stage_times(qconv: str, src: str, out: str, flags: list[str]) -> dict[str, float]:
    r = subprocess.run([qconv, "convert", src, out, *flags, "-q", "--time-passes", "--no-saturation-check"],
                       capture_output=True, text=True, check=True)
    times = {}
    for line in r.stderr.splitlines():
        if line.startswith("qconv: info: ") and ": time: " in line:  # qconv: info: FILE: time: STAGE MS ms
            name, ms = line.split(": time: ", 1)[1].split()[:2]
            times[name] = float(ms)
    return times


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--markdown", help="also write the tables to this file")
    args = ap.parse_args()
    qconv = os.path.join(args.build, "tools", "qconv")
    sizes = [int(s) for s in args.sizes.split(",")]
    lines = []
    with tempfile.TemporaryDirectory() as work:
        for family, build, flags, watch in (
                ("shared scale", shared_scale, ["--format", "qdq"], "pair-qdq"),
                ("shared weight", shared_weight, ["--format", "qop"], "fuse-qlinear-conv"),
                ("shifted types", shifted_types, ["--format", "qdq", "--activation-type", "uint8"], "shift-types")):
            per_node = {}
            for size in sizes:
                src = os.path.join(work, "in.onnx")
                m = build(size)
                nodes = len(m.graph.node)
                onnx.save(m, src)
                t = stage_times(qconv, src, os.path.join(work, "out.onnx"), flags)
                t["total"] = sum(t.values())
                per_node[size] = (nodes, {k: v * 1000 / nodes for k, v in t.items()})
                print(f"{family}, {nodes} nodes: total {sum(t.values()):.0f} ms, {watch} {t.get(watch, 0):.1f} ms",
                      flush=True)
            # every stage that takes at least 0.05 us per node at the largest size, in pipeline order
            stages = [k for k in per_node[sizes[0]][1] if all(k in per_node[s][1] for s in sizes)]
            top = [k for k in stages if per_node[sizes[-1]][1][k] >= 0.05 or k == watch]
            lines += [f"{family} ({' '.join(flags)}): microseconds per node", "",
                      "| stage | " + " | ".join(f"{per_node[s][0]} nodes" for s in sizes) + " | largest / smallest |",
                      "|---|" + "---:|" * (len(sizes) + 1)]
            for k in top:
                row = [per_node[s][1][k] for s in sizes]
                ratio = row[-1] / row[0] if row[0] > 0.05 else float("nan")
                lines.append(f"| {k} | " + " | ".join(f"{v:.2f}" for v in row) + f" | {ratio:.2f} |")
            lines.append("")
    # the memory floor at the same sizes (bench/memory_floor.cpp): a name table, a node walk
    floor = subprocess.run([os.path.join(args.build, "bench", "qconv_memory_floor"), *map(str, sizes)],
                           capture_output=True, text=True, check=True).stdout.split()
    per = {(floor[i], int(floor[i + 1])): float(floor[i + 2]) for i in range(0, len(floor), 3)}
    lines += ["memory floor (bench/memory_floor.cpp): microseconds per element", "",
              "| work | " + " | ".join(f"{s} elements" for s in sizes) + " | largest / smallest |",
              "|---|" + "---:|" * (len(sizes) + 1)]
    for kind, label in (("names", "name table (unordered_set<string>: insert, find)"),
                        ("nodes", "node walk (one field of each, in allocation order)")):
        row = [per[(kind, s)] for s in sizes]
        lines.append(f"| {label} | " + " | ".join(f"{v:.3f}" for v in row) + f" | {row[-1] / row[0]:.2f} |")
    lines.append("")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
