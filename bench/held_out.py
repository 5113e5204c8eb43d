"""The models bench_copy_floor.py measures, each written the way its producer writes it:

  - conv_chain: a QDQ conv chain as quantize_static writes one (uint8 activations through Q/DQ
    pairs, int8 per-channel 512x512x3x3 weights, int32 biases at x_scale * w_scale), inline or
    with its tensors in one data file beside it as onnx.save(save_as_external_data=True) writes
    them (not aligned);
  - int4_llm: `count` int4 weights of K x N (onnxruntime's MatMulNBitsQuantizer's shapes: K = N =
    4096 by default), blocks of `block` along K, with or without zero points, in one of three forms:
      "nbits":    com.microsoft MatMulNBits, B uint8 [N, k_blocks, blob], scales [N, k_blocks],
                  zero_points uint8 [N, ceil(k_blocks / 2)], as MatMulNBitsQuantizer's QOperator
                  format writes them;
      "standard": DequantizeLinear(x [K, N], scale [k_blocks, N][, zero]; axis 0, block_size) ->
                  MatMul, its data file 4096-aligned (bench_llm.py's writer);
      "ort":      the same standard form with the names, types and storage of
                  MatMulNBitsQuantizer(quant_format=QDQ) saved by onnx.save with external data
                  (int4 at zero 0 when symmetric, uint4 with uint4 zero points when not; tensors
                  packed one after another, unaligned). tests/integration/test_bench_models.py
                  checks these forms against what onnxruntime's quantizer writes.
    The weights are random bytes written straight to the data file (no model is held whole).

Not a test: the conversion timings are bench_copy_floor.py's.
"""
from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto, helper


class DataFile:
    """Tensors written one after another into PATH.data: `align` 4096 as qconv and bench_llm.py
    write them, 1 as onnx.save's external data writer does."""

    def __init__(self, model_path: str, align: int):
        self.location = os.path.basename(model_path) + ".data"
        self.file = open(model_path + ".data", "wb")
        self.align = align

    def tensor(self, name: str, dtype: int, dims: list[int], payload: bytes) -> TensorProto:
        offset = (self.file.tell() + self.align - 1) // self.align * self.align
        self.file.seek(offset)
        self.file.write(payload)
        t = TensorProto(name=name, data_type=dtype, dims=dims, data_location=TensorProto.EXTERNAL)
        for k, v in (("location", self.location), ("offset", str(offset)), ("length", str(len(payload)))):
            t.external_data.add(key=k, value=v)
        return t

    def close(self) -> None:
        self.file.close()


def files_of(path: str) -> list[str]:
    """The model and its data file when it has one."""
    return [path] + ([path + ".data"] if os.path.exists(path + ".data") else [])


def size_of(path: str) -> int:
    return sum(os.path.getsize(f) for f in files_of(path))


# ---------------------------------------------------------------------------------------------
# The conv chain

def conv_chain(path: str, target_bytes: int, external: bool, channels: int = 512, seed: int = 0) -> int:
    """A QDQ chain of 3x3 convs, channels -> channels, until its weights hold `target_bytes`;
    its bytes on disk."""
    rng = np.random.default_rng(seed)
    per = channels * channels * 9
    layers = max(1, round(target_bytes / per))
    inits, nodes = [], []

    def const(name: str, a: np.ndarray) -> None:
        inits.append(onnx.numpy_helper.from_array(a, name))

    x_scale = 0.05
    const("x_s", np.float32(x_scale))
    const("x_zp", np.uint8(128))
    nodes += [helper.make_node("QuantizeLinear", ["x", "x_s", "x_zp"], ["x_q"], name="x_quant"),
              helper.make_node("DequantizeLinear", ["x_q", "x_s", "x_zp"], ["a0"], name="x_dequant")]
    for i in range(layers):
        w_s = rng.uniform(0.001, 0.004, channels).astype(np.float32)
        const(f"w{i}", rng.integers(-127, 128, (channels, channels, 3, 3), dtype=np.int8))
        const(f"w{i}_s", w_s)
        const(f"w{i}_zp", np.zeros(channels, np.int8))
        b_s = (np.float32(x_scale) * w_s).astype(np.float32)
        const(f"b{i}", rng.integers(-2000, 2000, channels, dtype=np.int32))
        const(f"b{i}_s", b_s)
        const(f"b{i}_zp", np.zeros(channels, np.int32))
        const(f"y{i}_s", np.float32(x_scale))
        const(f"y{i}_zp", np.uint8(0))
        nodes += [helper.make_node("DequantizeLinear", [f"w{i}", f"w{i}_s", f"w{i}_zp"], [f"w{i}_dq"], name=f"w{i}_dequant", axis=0),
                  helper.make_node("DequantizeLinear", [f"b{i}", f"b{i}_s", f"b{i}_zp"], [f"b{i}_dq"], name=f"b{i}_dequant", axis=0),
                  helper.make_node("Conv", [f"a{i}", f"w{i}_dq", f"b{i}_dq"], [f"c{i}"], name=f"conv_{i}", pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu_{i}"),
                  helper.make_node("QuantizeLinear", [f"r{i}", f"y{i}_s", f"y{i}_zp"], [f"q{i}"], name=f"quant_{i}"),
                  helper.make_node("DequantizeLinear", [f"q{i}", f"y{i}_s", f"y{i}_zp"], [f"a{i + 1}"], name=f"dequant_{i}")]
    g = helper.make_graph(nodes, "conv_chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, 8, 8])],
                          [helper.make_tensor_value_info(f"a{layers}", TensorProto.FLOAT, [1, channels, 8, 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="qconv-bench")
    m.ir_version = 7
    for f in (path, path + ".data"):
        if os.path.exists(f):
            os.unlink(f)
    if external:
        onnx.save(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location=os.path.basename(path) + ".data",
                  size_threshold=1024)
    else:
        onnx.save(m, path)
    return size_of(path)


# ---------------------------------------------------------------------------------------------
# The int4 LLM

def int4_llm(path: str, form: str, block: int, zero_points: bool, count: int | None = None, K: int = 4096, N: int = 4096,
             target_bytes: int = 1 << 30, seed: int = 0) -> int:
    """`count` weights (default: enough for `target_bytes`) chained by MatMul -> Add; its bytes on
    disk. See the module's text for `form`."""
    assert form in ("nbits", "standard", "ort") and K % block == 0 and N % 2 == 0 and (K == N or count == 1)
    rng = np.random.default_rng(seed)
    blocks = K // block
    per = K * N // 2 + blocks * N * 4 + (blocks * N // 2 if zero_points else 0)
    count = count or -(-target_bytes // per)
    for f in (path, path + ".data"):
        if os.path.exists(f):
            os.unlink(f)
    data = DataFile(path, 1 if form == "ort" else 4096)
    nodes, inits = [], []
    signed = form != "nbits" and not zero_points  # the standard forms: int4 at 0 when symmetric
    h = "x"
    for i in range(count):
        q = rng.bytes(K * N // 2)
        scales = rng.uniform(0.001, 0.02, blocks * N).astype(np.float32).tobytes()
        zp = rng.bytes(blocks * N // 2) if zero_points else None
        if form == "nbits":
            inits.append(data.tensor(f"w{i}_Q4", TensorProto.UINT8, [N, blocks, block // 2], q))
            inits.append(data.tensor(f"w{i}_scales", TensorProto.FLOAT, [N, blocks], scales))
            ins = ["", f"w{i}_Q4", f"w{i}_scales"]
            if zp is not None:
                inits.append(data.tensor(f"w{i}_zero_points", TensorProto.UINT8, [N, (blocks + 1) // 2], zp))
                ins.append(f"w{i}_zero_points")
            ins[0] = h
            nodes.append(helper.make_node("MatMulNBits", ins, [f"mm{i}"], name=f"matmul_{i}_Q4", domain="com.microsoft",
                                          K=K, N=N, bits=4, block_size=block))
        else:
            names = (f"w{i}_DQ_Q4", f"w{i}_DQ_scales", f"w{i}_DQ_zero_points") if form == "ort" else \
                    (f"w{i}", f"w{i}_scale", f"w{i}_zero")
            dtype = TensorProto.INT4 if signed else TensorProto.UINT4
            inits.append(data.tensor(names[0], dtype, [K, N], q))
            inits.append(data.tensor(names[1], TensorProto.FLOAT, [blocks, N], scales))
            ins = [names[0], names[1]]
            if zp is not None:
                inits.append(data.tensor(names[2], TensorProto.UINT4, [blocks, N], zp))
                ins.append(names[2])
            nodes.append(helper.make_node("DequantizeLinear", ins, [names[0] + "_output"], name=f"matmul_{i}_DQ_Q4",
                                          axis=0, block_size=block))
            nodes.append(helper.make_node("MatMul", [h, names[0] + "_output"], [f"mm{i}"], name=f"matmul_{i}"))
        if K == N:
            nodes.append(helper.make_node("Add", [h, f"mm{i}"], [f"h{i}"], name=f"add_{i}"))
            h = f"h{i}"
        else:
            h = f"mm{i}"
    data.close()
    g = helper.make_graph(nodes, "int4_llm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, K])],
                          [helper.make_tensor_value_info(h, TensorProto.FLOAT, [1, 8, N])], inits)
    opsets = [helper.make_opsetid("", 21)] + ([helper.make_opsetid("com.microsoft", 1)] if form == "nbits" else [])
    m = helper.make_model(g, opset_imports=opsets, producer_name="onnx.quantize" if form == "ort" else "qconv-bench")
    m.ir_version = 10
    onnx.save(m, path)
    return size_of(path)
