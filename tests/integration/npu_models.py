"""Models for the NPU targets' tests (test_npu_targets.py): a transformer block quantized by
onnxruntime (QDQ and QOperator), and the int4 LLM block of bench/bench_llm.py at a small size."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

import models


def transformer_block(hidden: int = 32, ffn: int = 64, seq: int = 8) -> onnx.ModelProto:
    """One encoder block's math: q, k, v projections, softmax(q k^T / sqrt(d)) v, an output
    projection with a residual Add, and an FFN (MatMul, Relu, MatMul) with a residual Add."""
    b = models._Builder(41)

    def proj(x: str, k: int, n: int) -> str:
        return b.op("MatMul", [x, b.init("w", b.rng.normal(0, np.sqrt(1.0 / k), (k, n)))])

    x = "input"
    q, k, v = proj(x, hidden, hidden), proj(x, hidden, hidden), proj(x, hidden, hidden)
    scores = b.op("Mul", [b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 2, 1])]),
                          b.init("scale", np.array(1.0 / np.sqrt(hidden)))])
    ctx = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), v])
    h = b.op("Add", [x, proj(ctx, hidden, hidden)])
    f = proj(b.op("Relu", [proj(h, hidden, ffn)]), ffn, hidden)
    return b.model("transformer_block", "input", [1, seq, hidden], b.op("Add", [h, f]), [1, seq, hidden])


def int4_llm_block(path: str, hidden: int = 64, ffn: int = 128, block: int = 32, seq: int = 4) -> None:
    """bench_llm.py's layer at a small size: seven int4 weights dequantized in blocks of `block`
    along K (symmetric, float scales) into MatMuls chained by Add, Relu and Mul; float activations."""
    rng = np.random.default_rng(0)
    inits, nodes = [], []

    def weight(x: str, name: str, k: int, n: int) -> str:
        q = rng.integers(-8, 8, (k, n))
        inits.append(helper.make_tensor(name, TensorProto.INT4, [k, n], q.flatten().tolist()))
        s = (rng.uniform(0.02, 0.2, (k // block, n)) / np.sqrt(k)).astype(np.float32)
        inits.append(onnx.numpy_helper.from_array(s, name + "_scale"))
        nodes.append(helper.make_node("DequantizeLinear", [name, name + "_scale"], [name + "_dq"], name=name + "_dq",
                                      axis=0, block_size=block))
        nodes.append(helper.make_node("MatMul", [x, name + "_dq"], [name + "_out"], name=name + "_matmul"))
        return name + "_out"

    t = "x"
    for w in ("q", "k", "v", "o"):
        t = weight(t, w, hidden, hidden)
    nodes.append(helper.make_node("Add", ["x", t], ["attn"], name="attn_add"))
    gate, up = weight("attn", "gate", hidden, ffn), weight("attn", "up", hidden, ffn)
    nodes.append(helper.make_node("Relu", [gate], ["act"], name="relu"))
    nodes.append(helper.make_node("Mul", ["act", up], ["mlp"], name="mul"))
    down = weight("mlp", "down", ffn, hidden)
    nodes.append(helper.make_node("Add", ["attn", down], ["y"], name="mlp_add"))
    g = helper.make_graph(nodes, "int4_llm_block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, hidden])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, hidden])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], producer_name="qconv-test")
    m.ir_version = 10
    onnx.checker.check_model(m)
    onnx.save(m, path)
