"""float16 / bfloat16 scales in --format qop (issue 15, deliverable 6): a QDQ Conv or MatMul
whose scales are float16 is fused, its scales written as float, widened exactly (QLinearConv
takes float scales only; QLinearMatMul-21 would take float16, but onnxruntime's kernels take
float). Judged by the reference: within one step of the QDQ input, which computes in float16,
different only where float16's own rounding of the result is within its precision of a tie;
onnxruntime runs the output. bfloat16 scales are named, not fused."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import reference
from conftest import op_counts, run_qconv, session


def half_model(op: str, scale_type: int) -> onnx.ModelProto:
    """x u8 -> DQ -> Conv(DQ(w), DQ(b int32)) | MatMul(DQ(w)) -> Q -> DQ -> y, every scale of `scale_type`."""
    rng = np.random.default_rng(61)
    np_type = helper.tensor_dtype_to_np_dtype(scale_type)

    def scale(name, v):
        return helper.make_tensor(name, scale_type, [len(v)] if len(v) > 1 else [],
                                  np.asarray(v, np.float32).astype(np_type).tobytes() if scale_type == TensorProto.FLOAT16
                                  else np.asarray(v, np.float32).astype(np_type).view(np.uint16).tobytes(), raw=True)

    conv = op == "Conv"
    w = rng.integers(-60, 61, (4, 3, 3, 3) if conv else (8, 4)).astype(np.int8)
    inits = [scale("x_s", [0.05]), numpy_helper.from_array(np.uint8(128), "x_z"), numpy_helper.from_array(w, "w"),
             scale("w_s", [0.01, 0.02, 0.005, 0.0125] if conv else [0.01]), numpy_helper.from_array(np.zeros(4 if conv else 1, np.int8).reshape(-1) if conv else np.int8(0), "w_z"),
             scale("y_s", [0.1]), numpy_helper.from_array(np.uint8(120), "y_z")]
    nodes = [helper.make_node("DequantizeLinear", ["x", "x_s", "x_z"], ["xf"], name="dq_x"),
             helper.make_node("DequantizeLinear", ["w", "w_s", "w_z"], ["wf"], name="dq_w", **({"axis": 0} if conv else {}))]
    if conv:
        inits += [numpy_helper.from_array(np.array([100, -50, 20, 0], np.int32), "b"), scale("b_s", [0.0005, 0.001, 0.00025, 0.000625])]
        nodes += [helper.make_node("DequantizeLinear", ["b", "b_s"], ["bf"], name="dq_b", axis=0),
                  helper.make_node("Conv", ["xf", "wf", "bf"], ["yf"], name="conv", pads=[1, 1, 1, 1])]
        shape, out_shape = [1, 3, 5, 5], [1, 4, 5, 5]
    else:
        nodes.append(helper.make_node("MatMul", ["xf", "wf"], ["yf"], name="matmul"))
        shape, out_shape = [2, 8], [2, 4]
    nodes += [helper.make_node("QuantizeLinear", ["yf", "y_s", "y_z"], ["yq"], name="q_y"),
              helper.make_node("DequantizeLinear", ["yq", "y_s", "y_z"], ["y"], name="dq_y")]
    g = helper.make_graph(nodes, "half", [helper.make_tensor_value_info("x", TensorProto.UINT8, shape)],
                          [helper.make_tensor_value_info("y", scale_type, out_shape)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m


@pytest.mark.parametrize("op", ["Conv", "MatMul"])
def test_bfloat16_scales_are_named_not_fused(op, tmp_path):
    """bfloat16 rounds every dequantized value to 8 bits: no QLinear op reproduces that, even
    within a step on near ties only, so the group stays in QDQ form, named."""
    src, dst = str(tmp_path / "qdq.onnx"), str(tmp_path / "qop.onnx")
    onnx.save(half_model(op, TensorProto.BFLOAT16), src)
    r = run_qconv("convert", src, dst, "--format", "qop", "-v")
    assert r.returncode == 0, r.stderr
    assert f"{op.lower()}: not fused: " in r.stderr and "scale is bfloat16: the QDQ form rounds" in r.stderr
    assert op_counts(dst).get(op) == 1


@pytest.mark.parametrize("op", ["Conv", "MatMul"])
@pytest.mark.parametrize("scale_type", [TensorProto.FLOAT16], ids=["float16"])
def test_half_scales_are_fused_as_float(op, scale_type, tmp_path):
    src, dst = str(tmp_path / "qdq.onnx"), str(tmp_path / "qop.onnx")
    onnx.save(half_model(op, scale_type), src)
    r = run_qconv("convert", src, dst, "--format", "qop", "-v")
    assert r.returncode == 0, r.stderr
    fused = "QLinearConv" if op == "Conv" else "QLinearMatMul"
    assert op_counts(dst).get(fused) == 1, r.stderr
    out = onnx.load(dst)
    node = next(n for n in out.graph.node if n.op_type == fused)
    types = {t.name: t.data_type for t in out.graph.initializer}
    assert all(types[node.input[k]] == TensorProto.FLOAT for k in (1, 4, 6))
    rng = np.random.default_rng(5)
    shape = [d.dim_value for d in out.graph.input[0].type.tensor_type.shape.dim]
    xs = [rng.integers(0, 256, shape).astype(np.uint8) for _ in range(4)]
    # the integers the output DequantizeLinear reads: within one step, and different only where
    # the QDQ form's own float16/bfloat16 result (relative precision 2^-11 / 2^-8) is that close
    # to a tie, so that its rounding, not the math, decides
    precision = 2.0 ** (-11 if scale_type == TensorProto.FLOAT16 else -8)
    y_s = float(numpy_helper.to_array(next(t for t in onnx.load(src).graph.initializer if t.name == "y_s")).astype(np.float32))
    differ = total = 0
    for x in xs:
        every = reference.run(src, x, intermediate=True)
        want, got = every["yq"].astype(np.int64), reference.run(dst, x, intermediate=True)["yq"].astype(np.int64)
        assert np.max(np.abs(want - got)) <= 1
        steps = every["yf"].astype(np.float64) / y_s
        distance = np.abs(np.abs(steps - np.floor(steps)) - 0.5)
        assert np.all((distance <= precision * np.abs(steps) + 1e-3)[want != got]), "a difference off a near tie"
        differ, total = differ + int(np.count_nonzero(want != got)), total + want.size
    print(f"{differ} of {total} differ")
    if scale_type == TensorProto.FLOAT16:  # onnxruntime runs the fused model (bfloat16 DQ has no CPU kernel)
        for x in xs:
            want = reference.run(dst, x)[0].astype(np.float64)
            assert np.max(np.abs(session(dst).run(None, {"x": x})[0].astype(np.float64) - want)) <= 0.1 * 1.01


def test_half_scales_in_a_contrib_group_are_written_as_float(tmp_path):
    """--contrib: a QDQ Add with float16 scales becomes QLinearAdd with float scales (onnxruntime's
    contrib kernels take float only), the same values widened; within one step of the QDQ form."""
    def scale(name, v):
        return helper.make_tensor(name, TensorProto.FLOAT16, [], np.float16(v).tobytes(), raw=True)

    inits = [scale("a_s", 0.05), scale("b_s", 0.02), scale("y_s", 0.1),
             numpy_helper.from_array(np.uint8(128), "z"), numpy_helper.from_array(np.uint8(120), "y_z")]
    nodes = [helper.make_node("DequantizeLinear", ["a", "a_s", "z"], ["af"], name="dq_a"),
             helper.make_node("DequantizeLinear", ["b", "b_s", "z"], ["bf"], name="dq_b"),
             helper.make_node("Add", ["af", "bf"], ["yf"], name="add"),
             helper.make_node("QuantizeLinear", ["yf", "y_s", "y_z"], ["y"], name="q_y")]
    g = helper.make_graph(nodes, "half_add", [helper.make_tensor_value_info(n, TensorProto.UINT8, [2, 8]) for n in "ab"],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, [2, 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    src, dst = str(tmp_path / "qdq.onnx"), str(tmp_path / "qop.onnx")
    onnx.save(m, src)
    r = run_qconv("convert", src, dst, "--format", "qop", "--contrib", "-v")
    assert r.returncode == 0, r.stderr
    out = onnx.load(dst)
    add = next(n for n in out.graph.node if n.op_type == "QLinearAdd")
    inits_out = {t.name: t for t in out.graph.initializer}
    for k, v in ((1, 0.05), (4, 0.02), (6, 0.1)):
        t = inits_out[add.input[k]]
        assert t.data_type == TensorProto.FLOAT and numpy_helper.to_array(t) == np.float32(np.float16(v))
    rng = np.random.default_rng(8)
    for _ in range(4):
        feeds = {n: rng.integers(0, 256, (2, 8)).astype(np.uint8) for n in "ab"}
        want = reference.run(src, feeds)[0].astype(np.int64)
        got = reference.run(dst, feeds)[0].astype(np.int64)
        assert np.max(np.abs(want - got)) <= 1
        assert np.max(np.abs(session(dst).run(None, feeds)[0].astype(np.int64) - got)) <= 1
