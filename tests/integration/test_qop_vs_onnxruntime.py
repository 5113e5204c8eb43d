"""QDQ -> QOp on onnxruntime-quantized models: every Conv/MatMul fused; under the ONNX
reference, the QOp output is within one quantization step of the QDQ input (on near ties only,
and the test counts them); onnxruntime runs it and agrees (conftest.ort_agrees)."""
import onnx
import pytest

import models
from conftest import FUSION_ROWS, QUANT_CASES, case_id, judge_qop, op_counts, ort_offline_fusion_counts, run_qconv


@pytest.mark.parametrize("case", QUANT_CASES, ids=case_id)
def test_qop_matches_onnxruntime_fusion(case, quantized, tmp_path):
    src = quantized(case)
    dst = str(tmp_path / "qop.onnx")
    r = run_qconv("convert", src, dst, "--format", "qop")
    assert r.returncode == 0, r.stderr
    assert "not fused" not in r.stderr

    target, expected = models.TARGET_COUNTS[case[0]]
    fused_op = "QLinearConv" if target == "Conv" else "QLinearMatMul"
    counts = op_counts(dst)
    assert counts.get(fused_op, 0) == expected
    assert counts.get(target, 0) == 0
    assert op_counts(src).get(target, 0) == expected
    onnx.checker.check_model(onnx.load(dst), full_check=True)
    if case[0] == "mobilenet_style":
        # a chain of 8 convs: between fused convs the Q -> DQ is gone, integers flow directly
        g = onnx.load(dst).graph
        producer = {o: n for n in g.node for o in n.output}
        chained = [n for n in g.node if n.op_type == "QLinearConv" and n.input[0] in producer
                   and producer[n.input[0]].op_type == "QLinearConv"]
        assert len(chained) == 7

    # The judge: the ONNX reference on the QDQ input and on qconv's output.
    xs = models.sample_inputs(models.FLOAT_MODELS[case[0]](), 8, seed=2024)
    worst, n, total = judge_qop(src, dst, xs)

    peer = ort_offline_fusion_counts(src, str(tmp_path / "ort_fused.onnx")).get(fused_op, 0)
    FUSION_ROWS.append((case_id(case), target, expected, counts[fused_op], peer, worst, f"{n}/{total}"))
