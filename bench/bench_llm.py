"""Benchmark: an LLM-scale weight-only int4 model (issue 28, deliverable 6), both ways, in one run:
  - qconv, the standard form (DequantizeLinear(int4, block_size 32) -> MatMul) -> MatMulNBits
    (--format qop --contrib), and that output -> the standard form again (--format qdq);
  - qconv on the standard form with --format qdq (nothing to change: the weights are spliced);
  - the floor: `cp` of the same model and data file;
  - the peer: onnxruntime's own offline conversion of the standard form (a session with
    ORT_ENABLE_EXTENDED writing optimized_model_filepath, its initializers to a data file).
Each is a whole process: wall seconds (median of --runs) and peak RSS (GNU time).

The model has a transformer's shapes, not its attention math: --layers blocks of seven int4
weights (q, k, v, o: hidden x hidden; gate, up: hidden x ffn; down: ffn x hidden) chained by
MatMul, Add, Relu and Mul, with float32 scales per block of 32 along K, symmetric as onnxruntime's
QDQ writer makes them; the weights are random bytes, written straight to one external data file.

    .venv/bin/python bench/bench_llm.py [--layers 18] [--runs 3] [--work DIR] [--markdown FILE]

Not a test: nothing here asserts a time.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchenv  # noqa: E402  (.venv and a built qconv, checked first)

benchenv.require()

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_convert import ROOT, measure, remove  # noqa: E402

HIDDEN, FFN, BLOCK = 4096, 11008, 32

ORT_OFFLINE = """
import os, sys, onnxruntime as ort
so = ort.SessionOptions()
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
so.optimized_model_filepath = sys.argv[2]
so.add_session_config_entry("session.optimized_model_external_initializers_file_name", os.path.basename(sys.argv[2]) + ".data")
so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
"""


def build(path: str, layers: int) -> int:
    """The standard-form model at `path` with its weights in `path`.data; its bytes on disk."""
    rng = np.random.default_rng(0)
    data = open(path + ".data", "wb")
    location = os.path.basename(path) + ".data"
    inits, nodes = [], []

    def external(name: str, dtype: int, dims: list[int], payload: bytes) -> None:
        offset = (data.tell() + 4095) // 4096 * 4096
        data.seek(offset)
        data.write(payload)
        t = TensorProto(name=name, data_type=dtype, dims=dims, data_location=TensorProto.EXTERNAL)
        for k, v in (("location", location), ("offset", str(offset)), ("length", str(len(payload)))):
            t.external_data.add(key=k, value=v)
        inits.append(t)

    def weight(x: str, name: str, k: int, n: int) -> str:
        external(name, TensorProto.INT4, [k, n], rng.bytes(k * n // 2))
        scales = rng.uniform(0.001, 0.02, (k // BLOCK, n)).astype(np.float32) * rng.choice([-1, 1], (k // BLOCK, n))
        external(name + "_scale", TensorProto.FLOAT, [k // BLOCK, n], scales.astype(np.float32).tobytes())
        nodes.append(helper.make_node("DequantizeLinear", [name, name + "_scale"], [name + "_dq"], name=name + "_dq",
                                      axis=0, block_size=BLOCK))
        nodes.append(helper.make_node("MatMul", [x, name + "_dq"], [name + "_out"], name=name + "_matmul"))
        return name + "_out"

    h = "x"
    for i in range(layers):
        t = h
        for w in ("q", "k", "v", "o"):
            t = weight(t, f"l{i}_{w}", HIDDEN, HIDDEN)
        nodes.append(helper.make_node("Add", [h, t], [f"l{i}_attn"], name=f"l{i}_attn_add"))
        h = f"l{i}_attn"
        gate, up = weight(h, f"l{i}_gate", HIDDEN, FFN), weight(h, f"l{i}_up", HIDDEN, FFN)
        nodes.append(helper.make_node("Relu", [gate], [f"l{i}_act"], name=f"l{i}_relu"))
        nodes.append(helper.make_node("Mul", [f"l{i}_act", up], [f"l{i}_mlp"], name=f"l{i}_mul"))
        down = weight(f"l{i}_mlp", f"l{i}_down", FFN, HIDDEN)
        nodes.append(helper.make_node("Add", [h, down], [f"l{i}_out"], name=f"l{i}_mlp_add"))
        h = f"l{i}_out"
    data.close()
    g = helper.make_graph(nodes, "int4_llm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, HIDDEN])],
                          [helper.make_tensor_value_info(h, TensorProto.FLOAT, [1, 8, HIDDEN])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], producer_name="qconv-bench")
    m.ir_version = 10
    onnx.save(m, path)
    return os.path.getsize(path) + os.path.getsize(path + ".data")


def cp(src: str, dst: str) -> list[str]:
    return ["sh", "-c", f'cp "{src}" "{dst}" && cp "{src}.data" "{dst}.data"']


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=18)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", default=None)
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    qconv = os.path.join(args.build, "tools", "qconv")
    work = benchenv.work_dir(args.work, "qconv-llm-")
    os.makedirs(work, exist_ok=True)
    src = os.path.join(work, "qdq.onnx")
    size = build(src, args.layers)
    print(f"model: {args.layers} layers, {size / 2**30:.2f} GiB on disk ({src})")
    out = {k: os.path.join(work, f"{k}.onnx") for k in ("nbits", "back", "same", "cp", "ort")}
    nbits_src = os.path.join(work, "nbits_src.onnx")  # the MatMulNBits form, made once as the way back's input
    remove(nbits_src)
    os.system(f'"{qconv}" convert "{src}" "{nbits_src}" --format qop --contrib -q')
    rows_a = [("cp", cp(src, out["cp"]), out["cp"]),
              ("qconv standard -> MatMulNBits (--format qop --contrib)",
               [qconv, "convert", src, out["nbits"], "--format", "qop", "--contrib", "-q"], out["nbits"]),
              ("qconv standard -> standard (--format qdq, nothing to change)",
               [qconv, "convert", src, out["same"], "--format", "qdq", "-q"], out["same"]),
              ("onnxruntime offline conversion of the standard form", [sys.executable, "-c", ORT_OFFLINE, src, out["ort"]], out["ort"])]
    data_file = next(f for f in os.listdir(work) if f.startswith("nbits_src.onnx.") and f.endswith(".data"))
    nbits_size = os.path.getsize(nbits_src) + os.path.getsize(os.path.join(work, data_file))
    rows_b = [("cp", ["sh", "-c", f'cp "{nbits_src}" "{out["cp"]}" && cp "{os.path.join(work, data_file)}" "{out["cp"]}.data"'], out["cp"]),
              ("qconv MatMulNBits -> standard (--format qdq)", [qconv, "convert", nbits_src, out["back"], "--format", "qdq", "-q"],
               out["back"])]
    results = [("standard form in", size, measure(rows_a, args.runs, work, fresh=True)),
               ("MatMulNBits form in", nbits_size, measure(rows_b, args.runs, work, fresh=True))]
    lines = [f"Machine: {platform.machine()}, {os.cpu_count()} cores; {args.layers} layers of hidden {HIDDEN}, ffn {FFN}, "
             f"int4 blocks of {BLOCK}; median of {args.runs} runs, each writing a new output.", ""]
    for title, nbytes, res in results:
        cp_t = res["cp"][0]
        lines += [f"{title} ({nbytes / 2**30:.2f} GiB):", "",
                  "| tool | seconds | x cp | peak RSS (MiB) |", "|---|---|---|---|"]
        lines += [f"| {name} | {t:.2f} | {t / cp_t:.2f} | {rss:.0f} |" for name, (t, rss) in res.items()]
        lines.append("")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    for f in os.listdir(work):
        os.unlink(os.path.join(work, f))
    os.rmdir(work)


if __name__ == "__main__":
    main()
