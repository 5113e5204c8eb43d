"""Issue 36, item 4: verify and convert agree, and each target refuses the element types its
runtime lacks. verify --target reports what convert --target refuses (both from convert's own
passes), and a refusal quotes the model's own values."""
import json
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper as h, numpy_helper as nh

from conftest import run_qconv


def uint8_at_zero(path) -> str:
    """uint8 activations at zero point 0 (a ReLU output's usual form) and an int8 weight."""
    n = 8
    rng = np.random.default_rng(0)
    inits = [nh.from_array(rng.integers(-127, 128, (n, n)).astype(np.int8), "w"), nh.from_array(np.float32(0.01), "ws"),
             nh.from_array(np.int8(0), "wz"), nh.from_array(np.float32(0.05), "xs"), nh.from_array(np.uint8(0), "xz")]
    nodes = [h.make_node("QuantizeLinear", ["x", "xs", "xz"], ["q"], "q_x"), h.make_node("DequantizeLinear", ["q", "xs", "xz"], ["d"], "dq_x"),
             h.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], "dq_w"), h.make_node("MatMul", ["d", "wf"], ["y"], "mm")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, n])], [h.make_tensor_value_info("y", T.FLOAT, [1, n])], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)], ir_version=7), path)
    return path


def verify_findings(path, target):
    r = run_qconv("verify", path, "--target", target, "--json")
    return r.returncode, json.loads(r.stdout)["findings"]


def test_tensorrt_refusal_quotes_the_models_zero_point_and_verify_says_it(tmp_path):
    """verify said 'no findings' where convert refused quoting 'zero point is -128', a value not
    in the model (29f6ac7)."""
    src = uint8_at_zero(str(tmp_path / "m.onnx"))
    r = run_qconv("convert", src, str(tmp_path / "o.onnx"), "--target", "tensorrt")
    assert r.returncode == 4, r.stderr
    said = "q_x: its zero point is 0 on uint8, which is -128 stored as int8: TensorRT takes symmetric quantization only"
    assert said in r.stderr
    code, findings = verify_findings(src, "tensorrt")
    assert code == 1
    target = [f for f in findings if f["kind"] == "target"]
    assert any(f["node"] == "q_x" and said.split(": ", 1)[1] in f["message"] for f in target), findings
    assert all(f["severity"] == "error" for f in target)
    # with --approximate convert writes it (requantized symmetrically, listed); verify knows no flag for that
    r = run_qconv("convert", src, str(tmp_path / "a.onnx"), "--target", "tensorrt", "--approximate")
    assert r.returncode == 0 and "approximation" in r.stderr


TYPES = ["INT8", "UINT8", "INT16", "UINT16", "INT4", "UINT4", "INT2", "UINT2", "FLOAT8E4M3FN", "FLOAT8E5M2", "FLOAT4E2M1"]
# what each runtime quantizes to (targets/target.cpp): the rest is refused, naming node and type
TAKES = {"tensorrt": {"INT8", "FLOAT8E4M3FN"}, "aidge": {"INT8", "UINT8"}}


def typed_model(path, type_name: str) -> str:
    """An activation quantized to `type_name` (QuantizeLinear -> DequantizeLinear) added to a weight
    of that type (DequantizeLinear of a constant): opset 25, checker-valid."""
    dt = getattr(T, type_name)
    is_float = type_name.startswith("FLOAT")
    inits = [h.make_tensor("s", T.FLOAT, [], [0.05]), h.make_tensor("z", dt, [], [0.0 if is_float else 0]),
             h.make_tensor("w", dt, [4], [1.0, 0.5, 0.0, 1.0] if is_float else [1, 0, 1, 0])]
    nodes = [h.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], "q_x"), h.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], "dq_x"),
             h.make_node("DequantizeLinear", ["w", "s", "z"], ["wf"], "dq_w"), h.make_node("Add", ["d", "wf"], ["y"], "add")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [4])], [h.make_tensor_value_info("y", T.FLOAT, [4])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 25)], ir_version=13)
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)
    return path


@pytest.mark.parametrize("target", sorted(TAKES))
@pytest.mark.parametrize("type_name", TYPES)
def test_each_target_refuses_the_types_its_runtime_lacks(tmp_path, target, type_name):
    """--target tensorrt wrote int16 and int2 Q/DQ unchanged, --target aidge int16, uint16, int2,
    float8 and float4, with exit 0 (29f6ac7)."""
    src = typed_model(str(tmp_path / "m.onnx"), type_name)
    dst = str(tmp_path / "o.onnx")
    r = run_qconv("convert", src, dst, "--target", target)
    code, findings = verify_findings(src, target)
    if type_name in TAKES[target]:
        assert r.returncode == 0, r.stderr
        assert code == 0 and findings == [], findings
        onnx.checker.check_model(dst, full_check=True)
        return
    assert r.returncode == 4, r.stderr
    assert not os.path.exists(dst)
    low = type_name.lower()
    assert f"q_x: not run by --target {target}: it is {low}" in r.stderr or "zero point" in r.stderr, r.stderr
    assert code == 1 and any(f["kind"] == "target" and f["node"] == "q_x" for f in findings), findings


def test_tensorrt_takes_int4_for_weights_only(tmp_path):
    src = typed_model(str(tmp_path / "m.onnx"), "INT4")
    r = run_qconv("convert", src, str(tmp_path / "o.onnx"), "--target", "tensorrt")
    assert r.returncode == 4
    assert "q_x: not run by --target tensorrt: it is int4, not a weight" in r.stderr
    assert "dq_w" not in r.stderr.split("(and")[0]  # the weight's DequantizeLinear is not what is refused


# ---- foreign ops: kept where the runtime was measured to run them, each refusal the op's own ----

def lstm_dynamic(folder) -> str:
    """An LSTM quantized by onnxruntime's quantize_dynamic: com.microsoft DynamicQuantizeLSTM (as in
    ddddocr's shipped OCR model)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    hid, inp = 16, 8
    rng = np.random.default_rng(1)
    inits = [nh.from_array(rng.normal(0, 0.3, (1, 4 * hid, inp)).astype(np.float32), "W"),
             nh.from_array(rng.normal(0, 0.3, (1, 4 * hid, hid)).astype(np.float32), "R"),
             nh.from_array(rng.normal(0, 0.1, (1, 8 * hid)).astype(np.float32), "B")]
    g = h.make_graph([h.make_node("LSTM", ["x", "W", "R", "B"], ["y"], "lstm", hidden_size=hid)], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [5, 1, inp])], [h.make_tensor_value_info("y", T.FLOAT, [5, 1, 1, hid])],
                     inits)
    src, dst = os.path.join(folder, "lstm.onnx"), os.path.join(folder, "lstm_q.onnx")
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)], ir_version=7), src)
    quantize_dynamic(src, dst, weight_type=QuantType.QInt8)
    assert [n.op_type for n in onnx.load(dst).graph.node] == ["DynamicQuantizeLSTM"]
    return dst


def test_openvino_keeps_dynamic_quantize_lstm_which_it_runs(tmp_path):
    """--target openvino refused ddddocr's DynamicQuantizeLSTM quoting QLinearAveragePool's reason,
    while OpenVINO reads and runs it (29f6ac7). Measured here: within 0.3% of onnxruntime's output
    (which quantizes the activations too)."""
    import onnxruntime as ort
    import runtimes
    src = lstm_dynamic(str(tmp_path))
    dst = str(tmp_path / "o.onnx")
    r = run_qconv("convert", src, dst, "--target", "openvino")
    assert r.returncode == 0, r.stderr
    x = np.random.default_rng(2).normal(0, 1, (5, 1, 8)).astype(np.float32)
    want = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = runtimes.run_openvino(dst, [x], f32=True)[0]  # bf16 on hosts with avx512_bf16 otherwise
    assert float(np.abs(got - want).max()) <= 0.01 * float(np.abs(want).max())
    assert verify_findings(src, "openvino")[1] == []
    r = run_qconv("convert", src, str(tmp_path / "i.onnx"), "--target", "iree")
    assert r.returncode == 4
    assert "lstm_quant: not run by --target iree: IREE 3.13 (torch-mlir's importer) was not measured running com.microsoft " \
           "DynamicQuantizeLSTM" in r.stderr, r.stderr


def test_each_com_microsoft_refusal_quotes_its_own_op(tmp_path):
    """The OpenVINO refusal of any com.microsoft op quoted QLinearAveragePool's reason (29f6ac7)."""
    for op, said in (("QLinearAdd", "OpenVINO 2026.4's com.microsoft QLinearAdd wraps around instead of saturating"),
                     ("QLinearSoftmax", "OpenVINO 2026.4 was not measured running com.microsoft QLinearSoftmax")):
        node = h.make_node(op, ["a"], ["y"], "op", domain="com.microsoft")
        g = h.make_graph([node], "g", [h.make_tensor_value_info("a", T.UINT8, [2])], [h.make_tensor_value_info("y", T.UINT8, [2])])
        path = str(tmp_path / f"{op}.onnx")
        onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13), h.make_opsetid("com.microsoft", 1)], ir_version=7), path)
        code, findings = verify_findings(path, "openvino")
        assert any(f["kind"] == "target" and f["node"] == "op" and said in f["message"] for f in findings), findings
        assert "QLinearAveragePool" not in json.dumps(findings)
