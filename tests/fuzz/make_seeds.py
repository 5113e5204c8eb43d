"""Write one small model per dialect qconv reads, from the test builders, as fuzzing seeds:
so that libFuzzer starts inside every pass instead of having to find each dialect itself.

    .venv/bin/python tests/fuzz/make_seeds.py OUT_DIR      (scripts/fuzz.sh runs it)

Each seed is deterministic. docs/robustness.md lists which pass each one reaches."""
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import models  # noqa: E402
import test_aidge_float_form  # noqa: E402
import test_dialects  # noqa: E402
import test_fake_quantize  # noqa: E402
import test_gemm  # noqa: E402
import test_qgemm  # noqa: E402
import test_qonnx  # noqa: E402
import test_qop_to_qdq  # noqa: E402
import test_saturation  # noqa: E402
import test_vitis  # noqa: E402


def integer_conv() -> onnx.ModelProto:
    """Aidge's integer export (lower-integer-ops): Q -> Pad -> Conv(int8 w, int32 b) -> Q(divisor) -> Relu."""
    inits = [numpy_helper.from_array(np.array(0.5, np.float32), "s_in"), helper.make_tensor("z", TensorProto.INT8, [], [0]),
             numpy_helper.from_array(np.array([[[[3]]], [[[-2]]]], np.int8), "w"),
             numpy_helper.from_array(np.array([5, -7], np.int32), "b"),
             numpy_helper.from_array(np.array(4.0, np.float32), "S"),
             numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s_in", "z"], ["xq"], name="q_in"),
             helper.make_node("Pad", ["xq", "pads"], ["xp"], name="pad"),
             helper.make_node("Conv", ["xp", "w", "b"], ["acc"], name="conv_int"),
             helper.make_node("QuantizeLinear", ["acc", "S", "z"], ["yq"], name="q_out"),
             helper.make_node("Relu", ["yq"], ["r"], name="relu_int"),
             helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool_int")]
    g = helper.make_graph(nodes, "integer_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 3, 3])],
                          [helper.make_tensor_value_info("p", TensorProto.INT8, [1, 2, 1, 1])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)


def ir2(with_node: bool) -> onnx.ModelProto:
    """A checker-valid model from before opset_import (IR 2: opset 1 implied), as the fuzzer found
    it (issue 25: emit raised it to IR 3 without an opset_import, exit 70): an empty graph, or a Relu."""
    m = onnx.ModelProto()
    m.ir_version = 2
    m.graph.name = "g"
    if with_node:
        m.graph.CopyFrom(helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
                                           [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]))
    return m


STORAGE_TYPES = ["INT8", "UINT8", "INT16", "UINT16", "INT32", "INT4", "UINT4", "INT2", "UINT2", "FLOAT8E4M3FN",
                 "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "FLOAT4E2M1"]


def storage_form(type_name: str, raw: bool) -> onnx.ModelProto:
    """A blocked DequantizeLinear of a `type_name` weight -> MatMul, every tensor in raw_data
    (raw) or in its typed field as onnx.helper.make_tensor writes it (int32_data packing two
    4-bit or four 2-bit values an entry; float_data): each storage form of each type (issue 36)."""
    dt = getattr(TensorProto, type_name)
    rng = np.random.default_rng(dt)
    k, n, block = 32, 4, 16
    if type_name.startswith("FLOAT"):
        w = rng.choice([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5], (k, n)).tolist()
    else:
        lo, hi = {"INT8": (-128, 127), "UINT8": (0, 255), "INT16": (-300, 300), "UINT16": (0, 600), "INT32": (-999, 999),
                  "INT4": (-8, 7), "UINT4": (0, 15), "INT2": (-2, 1), "UINT2": (0, 3)}[type_name]
        w = rng.integers(lo, hi + 1, (k, n)).tolist()
    tensors = [helper.make_tensor("w", dt, [k, n], np.array(w).flatten().tolist()),
               helper.make_tensor("s", TensorProto.FLOAT, [k // block, n], rng.uniform(0.01, 0.1, k // block * n).tolist())]
    inputs = ["w", "s"]
    if not type_name.startswith("FLOAT") and type_name != "INT32":  # float8, float4 and int32: zero point 0 only
        tensors.append(helper.make_tensor("z", dt, [k // block, n], [0] * (k // block * n)))
        inputs.append("z")
    if raw:
        tensors = [numpy_helper.from_array(numpy_helper.to_array(t), t.name) for t in tensors]
    g = helper.make_graph([helper.make_node("DequantizeLinear", inputs, ["W"], "dq", axis=0, block_size=block),
                           helper.make_node("MatMul", ["x", "W"], ["y"], "mm")], "storage",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])], tensors)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 25)], ir_version=13)


def main(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    seeds = {
        "vitis_even": test_vitis.single(-128, 127, 0.05, 0, 1),
        "vitis_emulated": test_vitis.single(-128, 127, 0.05, 0, 2),
        "qonnx": test_qonnx.build("qonnx.custom_op.general", False),
        "qonnx_emulated": test_qonnx.single_quant(4, True, True, "UP", 0.0),
        "fake_quantize": test_fake_quantize.model(-1.28, 1.27, -1.28, 1.27, 256),
        "integer_conv": integer_conv(),
        "ir2_empty_graph": ir2(False),
        "ir2_relu": ir2(True),
        "shared_zero_point": test_saturation.shared_zero_point_model(),  # found by the fuzzer (shift-types, UBSan)
    }
    for type_name in STORAGE_TYPES:  # each storage form of each type (issue 36; external data needs a second file)
        for raw in (False, True):
            seeds[f"storage_{type_name.lower()}_{'raw' if raw else 'typed'}"] = storage_form(type_name, raw)
    wide = storage_form("UINT8", raw=False)  # found by the fuzzer (issue 36): an int32_data entry out of uint8
    next(t for t in wide.graph.initializer if t.name == "w").int32_data[5] = 20785
    seeds["storage_uint8_out_of_range"] = wide
    empty = storage_form("INT4", raw=True)  # found by the fuzzer (issue 36): a blocked DequantizeLinear with no inputs
    del empty.graph.node[0].input[:]
    seeds["invalid_dequantize_without_inputs"] = empty  # dialect_invalid_*: not a valid model (test_onnx_current skips it)
    with tempfile.TemporaryDirectory() as work:
        w = Path(work)
        qdq = str(w / "qdq.onnx")
        models.quantize_qdq(models.small_cnn(), qdq, per_channel=True, activation="uint8", work_dir=work)
        seeds["qdq"] = onnx.load(qdq)
        mlp = str(w / "mlp.onnx")
        models.quantize_qdq(models.mlp(), mlp, per_channel=False, activation="uint8", work_dir=work)
        seeds["qdq_matmul"] = onnx.load(mlp)
        contrib = str(w / "contrib.onnx")
        test_dialects.quantize_contrib("small_cnn", contrib, "uint8", w)
        seeds["com_microsoft_qdq"] = onnx.load(contrib)
        quark = str(w / "quark.onnx")
        test_dialects.as_quark(qdq, quark)
        seeds["quark"] = onnx.load(quark)
        primitive = str(w / "primitive.onnx")
        test_dialects.expand_to_primitives(qdq, primitive)
        seeds["primitive"] = onnx.load(primitive)
        from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
        fsrc, qgemm = str(w / "gemm.onnx"), str(w / "qgemm.onnx")
        onnx.save(test_qgemm.float_gemm_model(), fsrc)
        quantize_static(fsrc, qgemm, models.calibration_reader(test_qgemm.inputs(8, 1)), quant_format=QuantFormat.QOperator,
                        per_channel=False, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        seeds["qgemm"] = onnx.load(qgemm)
        zoo, dyn = str(w / "qop_zoo.onnx"), str(w / "dynamic.onnx")  # unfuse-qop, unfuse-integer-ops
        models.quantize_qop(models.contrib_zoo(), zoo, per_channel=True, activation="uint8", work_dir=work)
        seeds["qop_contrib_zoo"] = onnx.load(zoo)
        models.quantize_dyn(models.mlp(), dyn, work, per_channel=True)
        seeds["dynamic_matmul"] = onnx.load(dyn)
        qdq_zoo = str(w / "qdq_zoo.onnx")  # fuse-contrib
        models.quantize_qdq(models.contrib_zoo(), qdq_zoo, per_channel=True, activation="uint8", work_dir=work)
        seeds["qdq_contrib_zoo"] = onnx.load(qdq_zoo)
        seeds["aidge_float_form"] = test_aidge_float_form.float_form()  # lift-float-form
        gemm_rows = str(w / "gemm_rows.onnx")  # a Gemm gemm-as-conv leaves: QGemm with --contrib
        models.quantize_qdq(test_gemm.gemm_variants((8, 5)), gemm_rows, per_channel=False, activation="uint8", work_dir=work)
        seeds["qdq_gemm_c_per_row"] = onnx.load(gemm_rows)
        for name in ("conv_transpose_per_channel", "gap_channels_last", "reduce_mean", "where"):
            seeds[f"qop_{name}"] = test_qop_to_qdq.CONTRIB_CASES[name]()
    for name, m in sorted(seeds.items()):
        with open(os.path.join(out, f"dialect_{name}.onnx"), "wb") as f:
            f.write(m.SerializeToString())
    print(f"{len(seeds)} dialect seeds in {out}")


if __name__ == "__main__":
    main(sys.argv[1])
