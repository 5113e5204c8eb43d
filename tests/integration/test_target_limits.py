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
TAKES = {"tensorrt": {"INT8", "FLOAT8E4M3FN"}, "aidge": {"INT8", "UINT8"},
         # measured by running each runtime on typed_model (docs/targets.md, "Element types")
         "onnxruntime": set(TYPES) - {"FLOAT4E2M1"}, "openvino": {"INT8", "UINT8", "INT16", "INT4", "UINT4"},
         "iree": {"INT8", "UINT8", "INT16"}, "tvm": {"INT8", "UINT8", "INT16", "UINT16"}}


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
        assert code == 0 and [f for f in findings if f["kind"] != "saturation"] == [], findings
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


# ---- item 10: the data-movement rule holds for every op qconv writes (Resize on 8-bit data) ----

def upsampling(mode: str):
    """Conv -> Relu -> Resize(x2, `mode`) -> Conv, as YOLOv8's neck and OCR detectors have it."""
    import models
    b = models._Builder(21)
    x = b.conv("input", 3, 8)
    scales = b.init("up_scales", np.array([1, 1, 2, 2], np.float32))
    x = b.op("Resize", [x, "", scales], mode=mode)
    x = b.conv(x, 8, 4, relu=False)
    return b.model("upsampling", "input", [1, 3, 8, 8], x, [1, 4, 16, 16])


def eight_bit_inputs_by_type(path) -> list[tuple[str, str, int]]:
    """(node, op, 8-bit type) of each node that is no Q/DQ/QOp op and reads an 8-bit tensor."""
    m = onnx.shape_inference.infer_shapes(onnx.load(path))
    types = {v.name: v.type.tensor_type.elem_type for v in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output)}
    types.update({t.name: t.data_type for t in m.graph.initializer})
    quant = {"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger"}
    return [(n.name, n.op_type, types.get(n.input[0], 0)) for n in m.graph.node
            if n.op_type not in quant and n.input and types.get(n.input[0], 0) in (T.UINT8, T.INT8)]


@pytest.mark.parametrize("target", ["aidge", "iree"])
def test_a_qop_resize_on_uint8_moves_with_its_group(tmp_path, target):
    """QOp inputs with a Resize on uint8 kept it on uint8 inside a shift chain for --target aidge
    and iree (DQ(int8, 1) -> Q(uint8, 128) -> Resize -> DQ(uint8)), against both profiles' data-
    movement rule; Aidge 0.10.1 then failed ("missing or invalid registrar key [uint8 ...] for
    Resize_Op"). A nearest Resize is data movement: it moves with its group, to int8; the output
    holds the profile's rule, and runs in the runtime within a step of the reference."""
    import models
    import reference
    import runtimes
    from conftest import output_step
    src = str(tmp_path / "qop.onnx")
    models.quantize_qop(upsampling("nearest"), src, per_channel=False, activation="uint8", work_dir=str(tmp_path))
    assert "Resize" in [n.op_type for n in onnx.load(src).graph.node]
    dst = str(tmp_path / "out.onnx")
    r = run_qconv("convert", src, dst, "--target", target)
    assert r.returncode == 0, r.stderr
    onnx.checker.check_model(dst, full_check=True)
    readers = eight_bit_inputs_by_type(dst)
    assert ("Resize" in {op for _, op, _ in readers}), readers
    assert all(t == T.INT8 for _, _, t in readers), readers  # both profiles move data on int8 only
    x = np.random.default_rng(5).normal(0, 1, (1, 3, 8, 8)).astype(np.float32)
    want = reference.outputs(onnx.load(src), [x])[0]
    got = (runtimes.run_aidge if target == "aidge" else runtimes.run_iree)(dst, [x])[0]
    step = output_step(src)
    assert float(np.abs(np.asarray(got).reshape(want.shape) - want).max()) <= 1.01 * step
    assert verify_findings(dst, target)[1] == []  # qconv's own output verifies clean


def test_a_linear_resize_on_8_bit_data_is_refused_where_the_runtime_lacks_its_type(tmp_path):
    """A Resize that computes (linear) on uint8 integers is no data movement: for a target that
    moves data on int8 only, it is refused naming the node, never written for a runtime that fails."""
    import models
    src = str(tmp_path / "qop.onnx")
    models.quantize_qop(upsampling("linear"), src, per_channel=False, activation="uint8", work_dir=str(tmp_path))
    if "Resize" not in [n.op_type for n in onnx.load(src).graph.node]:
        pytest.skip("onnxruntime's quantizer left no Resize on the 8-bit tensor")
    r = run_qconv("convert", src, str(tmp_path / "o.onnx"), "--target", "aidge")
    assert r.returncode in (0, 4), r.stderr
    if r.returncode == 0:
        assert all(t == T.INT8 for _, _, t in eight_bit_inputs_by_type(str(tmp_path / "o.onnx")))
    else:
        # the profile's own reason for Resize, not MaxPool's alone (issue 36: messages say what is true)
        assert "Resize on uint8: Aidge 0.10.1 moves 8-bit data on int8 only: it has no uint8 kernel for MaxPool or Resize" \
            in r.stderr, r.stderr


def one_channel_conv(path, readers: int = 1) -> str:
    """Q(x) -> DQ -> Conv(w per channel with one output channel: scale [1], axis 0) -> output, as
    YOLOv8's DFL conv is quantized; with readers > 1, that many convs read the same DQ'd constant."""
    rng = np.random.default_rng(8)
    inits = [nh.from_array(np.float32(0.05), "xs"), nh.from_array(np.int8(0), "xz"),
             nh.from_array(rng.integers(-100, 100, (1, 4, 1, 1)).astype(np.int8), "w"),
             nh.from_array(np.array([0.02], np.float32), "ws"), nh.from_array(np.array([0], np.int8), "wz")]
    nodes = [h.make_node("QuantizeLinear", ["x", "xs", "xz"], ["q"], "q_x"), h.make_node("DequantizeLinear", ["q", "xs", "xz"], ["d"], "dq_x")]
    outs = []
    for i in range(readers):
        nodes += [h.make_node("DequantizeLinear", ["w", "ws", "wz"], [f"wf{i}"], f"dq_w{i}", axis=0),
                  h.make_node("Conv", ["d", f"wf{i}"], [f"y{i}"], f"dfl{i}")]
        outs.append(h.make_tensor_value_info(f"y{i}", T.FLOAT, [1, 1, 4, 4]))
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 4, 4, 4])], outs, inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)], ir_version=7), path)
    return path


@pytest.mark.parametrize("approximate", [False, True], ids=["exact", "approximate"])
def test_one_channel_is_per_tensor_for_aidge(tmp_path, approximate):
    """--target aidge --approximate left a one-channel per-channel DequantizeLinear (scale [1],
    axis 0: YOLOv8's DFL conv), which Aidge imports as a GenericOperator (29f6ac7). One channel is
    per tensor in its numbers: its scale becomes a scalar, exactly, with or without the flag."""
    import reference
    import runtimes
    src = one_channel_conv(str(tmp_path / "m.onnx"))
    dst = str(tmp_path / "o.onnx")
    r = run_qconv("convert", src, dst, "--target", "aidge", *(["--approximate"] if approximate else []))
    assert r.returncode == 0, r.stderr
    assert "approximation" not in r.stderr  # the same numbers
    m = onnx.load(dst)
    onnx.checker.check_model(m, full_check=True)
    dims = {t.name: list(t.dims) for t in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear"):
            assert dims.get(n.input[1], []) == [], (n.name, dims.get(n.input[1]))
            assert "axis" not in [a.name for a in n.attribute]
    x = np.random.default_rng(1).normal(0, 1, (1, 4, 4, 4)).astype(np.float32)
    want = reference.outputs(onnx.load(src), [x])
    np.testing.assert_array_equal(reference.outputs(m, [x])[0], want[0])
    got = runtimes.run_aidge(dst, [x])[0]
    np.testing.assert_allclose(np.asarray(got).reshape(want[0].shape), want[0], rtol=1e-5, atol=1e-5)
    assert verify_findings(dst, "aidge")[1] == []


def test_a_constant_read_by_many_dequantizers_is_requantized_once(tmp_path):
    """Issue 36, items 3 and 10: a per-channel weight read by several DequantizeLinears with the same
    parameters was refused for Aidge ('its constant has other readers'); they now share one
    requantized constant, listed once."""
    rng = np.random.default_rng(8)
    path = one_channel_conv(str(tmp_path / "m.onnx"), readers=3)
    m = onnx.load(path)  # two channels: a real requantization
    for t in m.graph.initializer:
        if t.name == "w":
            t.CopyFrom(nh.from_array(rng.integers(-100, 100, (2, 4, 1, 1)).astype(np.int8), "w"))
        if t.name == "ws":
            t.CopyFrom(nh.from_array(np.array([0.02, 0.005], np.float32), "ws"))
        if t.name == "wz":
            t.CopyFrom(nh.from_array(np.array([0, 0], np.int8), "wz"))
    for o in m.graph.output:
        o.type.tensor_type.shape.dim[1].dim_value = 2
    onnx.save(m, path)
    dst = str(tmp_path / "o.onnx")
    r = run_qconv("convert", path, dst, "--target", "aidge", "--approximate")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("requantized per tensor at scale") == 1, r.stderr
    out = onnx.load(dst)
    int8 = [t for t in out.graph.initializer if t.data_type == T.INT8 and list(t.dims) == [2, 4, 1, 1]]
    assert len(int8) == 1  # one requantized constant, shared
    onnx.checker.check_model(out, full_check=True)


FORMS_TO_VERIFY = [("qop", []), ("qdq", []), ("qop", ["--weight-type", "uint8"]), ("qdq", ["--activation-type", "int8"]),
                   (None, ["--target", "aidge", "--approximate"]), (None, ["--target", "tensorrt", "--approximate"]),
                   (None, ["--target", "openvino"]), (None, ["--target", "iree"]), (None, ["--target", "tvm"])]


@pytest.mark.parametrize("model", ["small_cnn", "mlp"])
@pytest.mark.parametrize("fmt,flags", FORMS_TO_VERIFY, ids=[f"{f or ''}{'_'.join(x.strip('-') for x in fl)}" for f, fl in FORMS_TO_VERIFY])
def test_what_qconv_writes_verifies_clean(tmp_path, model, fmt, flags):
    """qconv's own verify warned on qconv's own outputs: 'bias-scale' on every conv --approximate
    requantized, 'two representations' on a shift chain (29f6ac7). What qconv writes verifies
    clean; with --approximate only the listed approximations differ (and saturation, a property
    of the host's kernels, is set aside)."""
    import models
    src = str(tmp_path / "in.onnx")
    models.quantize_qdq(getattr(models, model)(), src, per_channel=True, activation="uint8", work_dir=str(tmp_path))
    dst = str(tmp_path / "out.onnx")
    r = run_qconv("convert", src, dst, *(["--format", fmt] if fmt else []), *flags)
    assert r.returncode == 0, r.stderr
    target = flags[flags.index("--target") + 1] if "--target" in flags else None
    args = ["verify", dst, "--json", "--ignore", "saturation", *(["--target", target] if target else [])]
    v = run_qconv(*args)
    assert json.loads(v.stdout)["findings"] == [], v.stdout
    assert v.returncode == 0


@pytest.mark.parametrize("target", ["tensorrt", "aidge"])
def test_approximate_says_the_list_is_per_tensor_and_how_to_avoid_it(tmp_path, target):
    """Issue 36, items 8 and 10: each listed tensor was within about a step while the output moved
    12 to 74 steps; the run now says the list is per tensor and advises quantizing at the source."""
    import models
    src = str(tmp_path / "in.onnx")
    models.quantize_qdq(models.small_cnn(), src, per_channel=True, activation="uint8", work_dir=str(tmp_path))
    r = run_qconv("convert", src, str(tmp_path / "o.onnx"), "--target", target, "--approximate")
    assert r.returncode == 0, r.stderr
    advice = {"tensorrt": "requantized symmetrically: each is within the steps listed, of its own old scale, but the errors "
                          "add up through the layers",
              "aidge": "requantized per tensor: each is within the steps listed, of a channel's own scale, but the errors "
                       "add up through the layers"}[target]
    assert advice in r.stderr, r.stderr
    assert ("ActivationSymmetric" if target == "tensorrt" else "per_channel=False") in r.stderr


@pytest.mark.parametrize("flags", [["--target", "aidge"], ["--target", "iree"], ["--format", "qop", "--activation-type", "int8"],
                                   ["--format", "qdq", "--activation-type", "int8"]], ids=["aidge", "iree", "qop-int8", "qdq-int8"])
def test_a_converted_8_bit_input_and_output_keep_one_representation(tmp_path, flags):
    """A uint8 graph input and output keep their type through exact converters, DQ -> Q. They read
    at scale 1, a second representation of the tensor: verify, where representation is now an
    error, refused qconv's own output. They read at the tensor's own scale now: bit-identical, and
    clean."""
    import reference
    rng = np.random.default_rng(0)
    inits = [nh.from_array(np.float32(0.05), "xs"), nh.from_array(np.uint8(128), "xz"),
             nh.from_array(rng.integers(-100, 100, (4, 3, 1, 1)).astype(np.int8), "w"), nh.from_array(np.float32(0.01), "ws"),
             nh.from_array(np.int8(0), "wz"), nh.from_array(np.float32(0.1), "ys"), nh.from_array(np.uint8(128), "yz")]
    nodes = [h.make_node("DequantizeLinear", ["x", "xs", "xz"], ["d"], "dq_x"), h.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], "dq_w"),
             h.make_node("Conv", ["d", "wf"], ["c"], "conv"), h.make_node("QuantizeLinear", ["c", "ys", "yz"], ["y"], "q_y")]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.UINT8, [1, 3, 4, 4])],
                     [h.make_tensor_value_info("y", T.UINT8, [1, 4, 4, 4])], inits)
    src, dst = str(tmp_path / "m.onnx"), str(tmp_path / "o.onnx")
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)], ir_version=7), src)
    r = run_qconv("convert", src, dst, *flags)
    assert r.returncode == 0, r.stderr
    target = flags[1] if flags[0] == "--target" else None
    v = run_qconv("verify", dst, "--json", "--ignore", "saturation", *(["--target", target] if target else []))
    assert v.returncode == 0 and json.loads(v.stdout)["findings"] == [], v.stdout
    x = rng.integers(0, 256, (1, 3, 4, 4)).astype(np.uint8)
    a, b = reference.outputs(onnx.load(src), [x])[0], reference.outputs(onnx.load(dst), [x])[0]
    assert a.dtype == b.dtype == np.uint8 and np.array_equal(a, b)


RUNS = {"onnxruntime": "run_onnxruntime", "openvino": "run_openvino", "iree": "run_iree", "tvm": "run_tvm"}


@pytest.mark.parametrize("target", sorted(RUNS))
def test_each_type_a_profile_takes_runs_in_its_runtime(tmp_path, target):
    """The element types each profile accepts were measured by running the runtime (docs/targets.md);
    this holds them to it: every type convert --target writes runs in that runtime and equals the
    ONNX reference on the input (OpenVINO in f32: its bf16 default depends on the host)."""
    import reference
    import runtimes
    run = getattr(runtimes, RUNS[target])
    x = np.array([0.3, -1.2, 2.5, 0.05], np.float32)
    for type_name in sorted(TAKES[target]):
        src = typed_model(str(tmp_path / f"{type_name}.onnx"), type_name)
        dst = str(tmp_path / f"{type_name}_{target}.onnx")
        r = run_qconv("convert", src, dst, "--target", target)
        assert r.returncode == 0, (type_name, r.stderr)
        want = reference.outputs(onnx.load(src), [x])[0]
        got = run(dst, [x], f32=True) if target == "openvino" else run(dst, [x])
        np.testing.assert_allclose(np.asarray(got[0]).reshape(want.shape), want, rtol=0, atol=1e-6, err_msg=type_name)
