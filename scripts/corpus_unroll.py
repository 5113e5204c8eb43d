"""A model's LSTM written out step by step (issue 47's unrolled LSTM): what an exporter writes
for a loop of LSTM cells (torch.nn.LSTMCell in a Python loop, Keras with unroll=True). Per
direction and time step: Gemm(x_t, W, Wb) + Gemm(h, R, Rb), split into the gates i, o, f, c
(ONNX's order), then c = f * c + i * tanh(g_c) and h = o * tanh(c), each cell reading the
same W, R and bias initializers. onnxruntime's quantize_static then quantizes each shared bias
once, for its first cell, and the other cells read it at their own scales (shared_bias.h):
the corpus's real model with that defect. The float math is the LSTM's (default activations,
no clip, no peepholes, layout 0, no sequence lengths); every other node is kept as it is."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper


def _shape(m: onnx.ModelProto, name: str) -> list[int]:
    for vi in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        if vi.name == name:
            return [d.dim_value for d in vi.type.tensor_type.shape.dim]
    raise SystemExit(f"unroll: the shape of '{name}' is not known (shape inference first)")


def unroll(m: onnx.ModelProto) -> onnx.ModelProto:
    """`m` with each LSTM node replaced by its unrolled cells (shapes inferred, fixed)."""
    inits = {t.name: t for t in m.graph.initializer}
    nodes: list[onnx.NodeProto] = []
    for n in m.graph.node:
        if n.op_type != "LSTM":
            nodes.append(n)
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        assert set(attrs) <= {"direction", "hidden_size"}, f"unroll: {n.name} has {sorted(attrs)}"
        assert len(n.input) < 5 or not n.input[4], f"unroll: {n.name} has sequence lengths"
        dirs = 2 if attrs.get("direction", b"forward") == b"bidirectional" else 1
        assert attrs.get("direction", b"forward") in (b"forward", b"bidirectional"), f"unroll: {n.name}: reverse only"
        hidden = attrs["hidden_size"]
        steps, batch, _ = _shape(m, n.input[0])
        W, R = (numpy_helper.to_array(inits[n.input[k]]) for k in (1, 2))
        B = numpy_helper.to_array(inits[n.input[3]]) if len(n.input) > 3 and n.input[3] else np.zeros((dirs, 8 * hidden), np.float32)
        p = n.name or n.output[0]

        def add(op, ins, out, **kw):
            nodes.append(helper.make_node(op, ins, [out], name=out, **kw))
            return out

        def const(name, value):
            m.graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
            return name

        xs = [add("Gather", [n.input[0], const(f"{p}_t{t}", np.int64(t))], f"{p}_x{t}", axis=0) for t in range(steps)]
        ys: list[list[str]] = [[""] * dirs for _ in range(steps)]
        for d in range(dirs):
            w = const(f"{p}_W{d}", W[d])
            r = const(f"{p}_R{d}", R[d])
            wb = const(f"{p}_Wb{d}", B[d, :4 * hidden])
            rb = const(f"{p}_Rb{d}", B[d, 4 * hidden:])
            k = const(f"{p}_d{d}", np.int64(d))
            h = add("Gather", [n.input[5], k], f"{p}_h{d}_init", axis=0) if len(n.input) > 5 and n.input[5] else \
                const(f"{p}_h{d}_zero", np.zeros((batch, hidden), np.float32))
            c = add("Gather", [n.input[6], k], f"{p}_c{d}_init", axis=0) if len(n.input) > 6 and n.input[6] else \
                const(f"{p}_c{d}_zero", np.zeros((batch, hidden), np.float32))
            for t in (range(steps) if d == 0 else reversed(range(steps))):
                s = f"{p}_d{d}_t{t}"
                g = add("Add", [add("Gemm", [xs[t], w, wb], f"{s}_xw", transB=1),
                                add("Gemm", [h, r, rb], f"{s}_hr", transB=1)], f"{s}_gates")
                gi, go, gf, gc = (f"{s}_g{x}" for x in "iofc")
                nodes.append(helper.make_node("Split", [g], [gi, go, gf, gc], name=f"{s}_split", axis=1, split=[hidden] * 4))
                i, o, f = (add("Sigmoid", [x], x + "_act") for x in (gi, go, gf))
                c = add("Add", [add("Mul", [f, c], f"{s}_fc"), add("Mul", [i, add("Tanh", [gc], gc + "_act")], f"{s}_ig")], f"{s}_c")
                h = add("Mul", [o, add("Tanh", [c], f"{s}_c_act")], f"{s}_h")
                ys[t][d] = h
        read = {i for x in m.graph.node for i in x.input} | {o.name for o in m.graph.output}
        assert not read & set(n.output[1:]) - {""}, f"unroll: {n.name}: Y_h and Y_c are read, and not written here"
        per_step = [add("Concat", [add("Unsqueeze", [ys[t][d]], f"{p}_y{t}_{d}", axes=[0]) for d in range(dirs)],
                        f"{p}_y{t}", axis=0) for t in range(steps)]
        add("Concat", [add("Unsqueeze", [y], y + "_step", axes=[0]) for y in per_step], n.output[0], axis=0)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    for name in {t.name for t in m.graph.initializer} - {i for x in m.graph.node for i in x.input}:
        m.graph.initializer.remove(next(t for t in m.graph.initializer if t.name == name))
    del m.graph.value_info[:]
    m = onnx.shape_inference.infer_shapes(m)
    onnx.checker.check_model(m)
    return m
