"""The benchmark's int4 LLMs (bench/held_out.py) are written the way onnxruntime's
MatMulNBitsQuantizer writes them: the same operators, attributes, initializer types, shapes and
naming, for its QOperator format (com.microsoft MatMulNBits) and its QDQ format (blocked
DequantizeLinear -> MatMul), symmetric and with zero points. The timings of issue 49 are only
worth what the forms they time are."""
import logging
import os
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
import held_out  # noqa: E402

K, N, BLOCK = 256, 128, 32


def quantized_by_onnxruntime(fmt: str, symmetric: bool) -> onnx.ModelProto:
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer
    logging.getLogger("onnxruntime.quantization").setLevel(logging.WARNING)
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((K, N)).astype(np.float32), "w0")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w0"], ["y"], name="matmul_0")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, N])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    config = DefaultWeightOnlyQuantConfig(block_size=BLOCK, is_symmetric=symmetric,
                                          quant_format=QuantFormat.QDQ if fmt == "qdq" else QuantFormat.QOperator)
    q = MatMulNBitsQuantizer(m, algo_config=config)
    q.process()
    return q.model.model


def shape_of(m: onnx.ModelProto) -> tuple:
    """What the two must share: per node its op, domain and attributes; per initializer its name
    with the weight's own name taken out, its type and dims."""
    weight = {"w0": "W"}
    nodes = [(n.op_type, n.domain, sorted((a.name, helper.get_attribute_value(a)) for a in n.attribute))
             for n in m.graph.node if n.op_type != "Add"]
    inits = sorted((t.name.replace("w0", weight["w0"]), t.data_type, tuple(t.dims)) for t in m.graph.initializer)
    return nodes, inits


@pytest.mark.parametrize("symmetric", [True, False], ids=["symmetric", "zero_points"])
@pytest.mark.parametrize("fmt, form", [("qop", "nbits"), ("qdq", "ort")])
def test_the_bench_writes_what_onnxruntimes_quantizer_writes(tmp_path, fmt, form, symmetric):
    path = str(tmp_path / "bench.onnx")
    held_out.int4_llm(path, form, BLOCK, zero_points=not symmetric, count=1, K=K, N=N)
    ours = onnx.load(path)
    theirs = quantized_by_onnxruntime(fmt, symmetric)
    assert shape_of(ours) == shape_of(theirs)
    assert [(o.domain, o.version) for o in ours.opset_import] == [(o.domain, o.version) for o in theirs.opset_import]
