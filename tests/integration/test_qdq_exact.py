"""--format qdq: canonical QDQ with the input's numbers, bit for bit, under the ONNX reference
(and in onnxruntime, optimizations off and on: the same kernels on both sides).
Producer subgraphs (float weights behind QuantizeLinear, Div -> Round -> Cast(int32) biases
behind Constant scales) are folded into integer initializers without changing one bit."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import models
from conftest import QUANT_CASES, assert_bit_identical, case_id, judge_qdq, op_counts, outputs, run_qconv, session


def with_producer_subgraphs(src: str, dst: str, seed: int) -> int:
    """Rewrite weights as float initializers behind QuantizeLinear, and int32 biases as
    Cast(Round(Div(float_bias, Constant(scale)))), with values on and off rounding ties.
    Returns how many producer subgraphs were made."""
    m = onnx.load(src)
    rng = np.random.default_rng(seed)
    inits = {t.name: t for t in m.graph.initializer}
    made, front = 0, []
    for n in m.graph.node:
        if n.op_type != "DequantizeLinear" or n.input[0] not in inits:
            continue
        q = numpy_helper.to_array(inits[n.input[0]])
        scale = numpy_helper.to_array(inits[n.input[1]])
        zp = numpy_helper.to_array(inits[n.input[2]]) if len(n.input) > 2 and n.input[2] else np.zeros_like(scale)
        axis = next((a.i for a in n.attribute if a.name == "axis"), 1)
        shape = [1] * q.ndim
        if scale.ndim == 1 and scale.size > 1:
            shape[axis] = scale.size
        s = scale.reshape(shape).astype(np.float32)
        z = zp.reshape(shape).astype(np.float32)
        offsets = rng.choice(np.array([-0.5, -0.3, 0.0, 0.3, 0.5], np.float32), size=q.shape)
        real = ((q.astype(np.float32) - z + offsets) * s).astype(np.float32)
        name = n.input[0]
        m.graph.initializer.remove(inits[name])
        m.graph.initializer.append(numpy_helper.from_array(real, name + "_float"))
        if q.dtype == np.int32:  # a bias: the PyTorch / onnxruntime-optimizer shape
            front.append(helper.make_node("Constant", [], [name + "_const_scale"], name=name + "_const",
                                          value=numpy_helper.from_array(scale, name + "_scale_value")))
            front.append(helper.make_node("Div", [name + "_float", name + "_const_scale"], [name + "_div"]))
            front.append(helper.make_node("Round", [name + "_div"], [name + "_round"]))
            front.append(helper.make_node("Cast", [name + "_round"], [name], to=TensorProto.INT32))
        else:
            inputs = [name + "_float", n.input[1]] + ([n.input[2]] if len(n.input) > 2 else [])
            front.append(helper.make_node("QuantizeLinear", inputs, [name], name=name + "_quantize",
                                          **({"axis": axis} if scale.size > 1 else {})))
        made += 1
    nodes = front + list(m.graph.node)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    onnx.checker.check_model(m)
    onnx.save(m, dst)
    return made


@pytest.mark.parametrize("case", QUANT_CASES, ids=case_id)
def test_qdq_output_is_bit_identical(case, quantized, tmp_path):
    src = quantized(case)
    dst = str(tmp_path / "qdq.onnx")
    r = run_qconv("convert", src, dst, "--format", "qdq")
    assert r.returncode == 0, r.stderr
    onnx.checker.check_model(onnx.load(dst), full_check=True)
    xs = models.sample_inputs(models.FLOAT_MODELS[case[0]](), 6, seed=99)
    judge_qdq(src, dst, xs)
    # onnxruntime fuses both the same way, saturating or not: the same numbers either way
    assert_bit_identical(outputs(session(src, "extended"), xs), outputs(session(dst, "extended"), xs))


@pytest.mark.parametrize("case", [c for c in QUANT_CASES if c[2] == "uint8"], ids=case_id)
def test_producer_subgraphs_fold_bit_exactly(case, quantized, tmp_path):
    src = str(tmp_path / "producers.onnx")
    made = with_producer_subgraphs(quantized(case), src, seed=7)
    assert made > 0
    before = op_counts(src)
    dst = str(tmp_path / "folded.onnx")
    r = run_qconv("convert", src, dst, "--format", "qdq")
    assert r.returncode == 0, r.stderr
    after = op_counts(dst)
    for op in ("Constant", "Div", "Round", "Cast"):
        assert after.get(op, 0) == 0, f"{op} left"
    weights = sum(1 for n in onnx.load(src).graph.node if n.op_type == "QuantizeLinear" and n.name.endswith("_quantize"))
    assert after["QuantizeLinear"] == before["QuantizeLinear"] - weights
    xs = models.sample_inputs(models.FLOAT_MODELS[case[0]](), 6, seed=5)
    judge_qdq(src, dst, xs)

    # and the same producers convert to QOp with every target fused
    qop = str(tmp_path / "qop.onnx")
    r = run_qconv("convert", src, qop, "--format", "qop")
    assert r.returncode == 0, r.stderr
    target, expected = models.TARGET_COUNTS[case[0]]
    assert op_counts(qop).get("QLinearConv" if target == "Conv" else "QLinearMatMul", 0) == expected
