"""Write the malformed-model corpus (tests/hostile/corpus/*.onnx, committed) and its manifest.

Each file is one kind of hostile or broken input; tests/integration/test_hostile.py converts
every one and checks the exit code, the message (short, naming file and node), that nothing
is written and nothing crashes. The fuzzer (tests/fuzz) is seeded with them too.
Regenerate with: .venv/bin/python tests/hostile/make_corpus.py (deterministic)."""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")


def model(nodes, inits, inputs=(("x", [1, 3, 4, 4]),), outputs=(("y", [1, 3, 4, 4]),), opset=21, ir=10, domains=()):
    """IR 10 by default: the checker judges validity; qconv's own checks must catch what its
    passes rely on and the checker does not check."""
    g = helper.make_graph(nodes, "hostile",
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains])
    m.ir_version = ir
    return m


def scalar(name, v, t=TensorProto.FLOAT):
    return helper.make_tensor(name, t, [], [v])


def qdq(scale=0.02, zp=(0, TensorProto.UINT8), axis=None, scale_shape=None, x_shape=(1, 3, 4, 4)):
    """x -> QuantizeLinear -> DequantizeLinear -> y, with the given parameters."""
    s = (numpy_helper.from_array(np.full(scale_shape, scale, np.float32), "s") if scale_shape is not None
         else scalar("s", scale))
    z = (numpy_helper.from_array(np.zeros(scale_shape, np.uint8 if zp[1] == TensorProto.UINT8 else np.int8), "z")
         if scale_shape is not None else helper.make_tensor("z", zp[1], [], [zp[0]]))
    kw = {} if axis is None else {"axis": axis}
    return model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="quant", **kw),
                  helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dequant", **kw)], [s, z],
                 inputs=(("x", list(x_shape)),))


def conv_qdq(bias):
    """QDQ Conv whose float bias at x_scale*w_scale overflows int32 when the scales are tiny."""
    w = numpy_helper.from_array(np.ones((2, 3, 1, 1), np.int8), "w")
    b = numpy_helper.from_array(np.array(bias, np.float32), "b")
    inits = [w, b, scalar("sx", 1e-6), helper.make_tensor("zx", TensorProto.UINT8, [], [0]), scalar("sw", 1e-6),
             helper.make_tensor("zw", TensorProto.INT8, [], [0]), scalar("sy", 0.1),
             helper.make_tensor("zy", TensorProto.UINT8, [], [0])]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"], name="qx"),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"], name="dqx"),
             helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wd"], name="dqw"),
             helper.make_node("Conv", ["xd", "wd", "b"], ["c"], name="conv_17"),
             helper.make_node("QuantizeLinear", ["c", "sy", "zy"], ["cq"], name="qy"),
             helper.make_node("DequantizeLinear", ["cq", "sy", "zy"], ["y"], name="dqy")]
    return model(nodes, inits)


def nested_if(depth):
    """If inside If, `depth` deep: written in protobuf's wire format by hand, since the protobuf
    library itself refuses to build messages nested this deep."""
    def varint(n):
        out = b""
        while True:
            out += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
            n >>= 7
            if not n:
                return out

    def field(number, payload):  # length-delimited
        return varint(number << 3 | 2) + varint(len(payload)) + payload

    graph = field(1, field(1, b"x") + field(2, b"y") + field(4, b"Identity"))  # GraphProto.node
    for k in range(depth):
        attr = field(1, b"then_branch") + field(6, graph) + varint(20 << 3) + varint(5)  # name, g, type=GRAPH
        node = field(1, b"c") + field(2, b"y") + field(3, f"if_{k}".encode()) + field(4, b"If") + field(5, attr)
        graph = field(1, node)
    graph += field(11, field(1, b"c")) + field(12, field(1, b"y"))  # input c, output y
    return varint(1 << 3) + varint(10) + field(7, graph) + field(8, varint(2 << 3) + varint(21))


def cases():
    """name -> (bytes, exit code, what the message must contain)"""
    ok = qdq().SerializeToString()
    c = {}
    c["empty_file"] = (b"", 3, "empty file")
    c["random_bytes"] = (np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8).tobytes(), 3, "not an ONNX model")
    c["truncated_model"] = (ok[: len(ok) // 2], 3, "not an ONNX model")
    c["tensor_not_model"] = (numpy_helper.from_array(np.ones(8, np.float32), "t").SerializeToString(), 3, "not an ONNX model")
    c["text_file"] = (b"This is not a model.\nir_version: 7\n", 3, "not an ONNX model")
    c["no_graph"] = (helper.make_model(helper.make_graph([], "g", [], [])).SerializeToString()[:4], 3, "not an ONNX model")
    m = qdq()
    m.graph.node[1].input[0] = "nowhere"
    c["dangling_edge"] = (m.SerializeToString(), 3, "node 'dequant' (DequantizeLinear): input 'nowhere' is not produced")
    m = model([helper.make_node("Relu", ["b"], ["a"], name="r1"), helper.make_node("Relu", ["a"], ["b"], name="r2"),
               helper.make_node("Identity", ["x"], ["y"], name="id")], [])
    c["cycle"] = (m.SerializeToString(), 3, "node 'r1' (Relu): input 'b' is produced by a later node")
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r1"), helper.make_node("Neg", ["x"], ["y"], name="r2")], [])
    c["duplicate_value_names"] = (m.SerializeToString(), 3, "node 'r2' (Neg): output 'y' is already defined")
    m = qdq()
    m.graph.initializer.append(scalar("s", 0.5))
    c["duplicate_initializer"] = (m.SerializeToString(), 3, "initializer 's' is defined twice")
    m = qdq()
    m.opset_import[0].version = 999
    c["unknown_opset"] = (m.SerializeToString(), 4, "ai.onnx opset 999")
    m = qdq()
    m.ir_version = 7
    m.opset_import[0].version = 999
    c["unknown_opset_old_ir"] = (m.SerializeToString(), 4, "ai.onnx opset 999")
    m = qdq()
    m.graph.initializer[0].raw_data = b"\x00\x00\x80"
    c["raw_data_size_mismatch"] = (m.SerializeToString(), 3, "initializer 's': raw data holds 3 bytes, dims need 4")
    m = qdq()
    t = m.graph.initializer[0]
    del t.dims[:]
    t.dims.extend([1 << 40, 1 << 40])
    c["absurd_dims"] = (m.SerializeToString(), 3, "initializer 's': its dims multiply past 2^63 elements")
    m = qdq()
    del m.graph.initializer[0].dims[:]
    m.graph.initializer[0].dims.extend([-3])
    c["negative_dims"] = (m.SerializeToString(), 3, "initializer 's': dimension -3 is negative")
    c["zero_scale"] = (qdq(scale=0.0).SerializeToString(), 3, "node 'quant' (QuantizeLinear): scale 0 is not positive and finite")
    c["negative_scale"] = (qdq(scale=-0.5).SerializeToString(), 4, "scale -0.5 is not positive and finite")
    c["nan_scale"] = (qdq(scale=float("nan")).SerializeToString(), 3, "scale nan is not positive and finite")
    c["inf_scale"] = (qdq(scale=float("inf")).SerializeToString(), 3, "scale inf is not positive and finite")
    c["zero_point_wrong_type"] = (qdq(zp=(0.0, TensorProto.FLOAT)).SerializeToString(), 3,
                                  "node 'quant' (QuantizeLinear): zero point of type float is not a quantized type")
    m = qdq()
    m.graph.initializer[1].CopyFrom(helper.make_tensor("z", TensorProto.INT32, [], [5]))
    c["zero_point_int32_nonzero"] = (m.SerializeToString(), 3, "node 'quant' (QuantizeLinear): zero point 5 must be 0 for int32")
    m = model([helper.make_node("DequantizeLinear", ["b", "s", "z"], ["y"], name="dq_bias")],
              [numpy_helper.from_array(np.arange(3, dtype=np.int32), "b"), scalar("s", 0.1),
               helper.make_tensor("z", TensorProto.INT32, [], [5])], inputs=(), outputs=(("y", [3]),))
    c["zero_point_out_of_range"] = (m.SerializeToString(), 3, "node 'dq_bias' (DequantizeLinear): zero point 5 must be 0 for int32")
    m = qdq(scale_shape=[3], axis=1)
    m.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.full([5], 0.1, np.float32), "s"))
    m.graph.initializer[1].CopyFrom(numpy_helper.from_array(np.zeros([5], np.uint8), "z"))
    c["per_channel_length_mismatch"] = (m.SerializeToString(), 3,
                                        "node 'quant' (QuantizeLinear): per-axis scale has 5 values, axis 1 of the input has 3")
    c["axis_out_of_range"] = (qdq(scale_shape=[3], axis=7).SerializeToString(), 3,
                              "node 'quant' (QuantizeLinear): axis 7 is outside the input's rank 4")
    # (a bias that overflows int32, or is NaN, is no longer refused: its conv stays in QDQ form,
    # test_hostile.py::test_a_bias_qlinearconv_cannot_hold_leaves_the_conv_in_qdq_form)
    c["deeply_nested_subgraphs"] = (nested_if(400), 3, "nested deeper than 256 levels")
    m = model([helper.make_node("FooBar", ["x"], ["y"], name="foo")], [])
    c["unknown_operator"] = (m.SerializeToString(), 3, "node 'foo' (FooBar): not an ai.onnx operator at opset 21")
    m = qdq()  # found by the fuzzer: initializers taken out before this one leaked (LeakSanitizer)
    m.graph.initializer.add().CopyFrom(scalar("", 1.0))
    m.graph.initializer.add().CopyFrom(scalar("later", 2.0))
    c["unnamed_initializer"] = (m.SerializeToString(), 3, "an initializer has no name")
    m = model([helper.make_node("Conv", ["", "w"], ["y"], name="conv_int")],  # found by the fuzzer: null input (UBSan)
              [numpy_helper.from_array(np.ones((3, 3, 1, 1), np.int8), "w")])
    c["integer_conv_without_input"] = (m.SerializeToString(), 4, "conv_int: integer Conv not rebuilt (standard Conv takes "
                                       "no int8 input): it has no data input")
    m = qdq()
    m.graph.output[0].name = "ghost"
    c["dangling_graph_output"] = (m.SerializeToString(), 3, "graph output 'ghost'")
    return c


def main():
    os.makedirs(OUT, exist_ok=True)
    manifest = {}
    for name, (data, code, message) in cases().items():
        with open(os.path.join(OUT, name + ".onnx"), "wb") as f:
            f.write(data)
        manifest[name] = {"exit": code, "message": message}
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{len(manifest)} cases in {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
