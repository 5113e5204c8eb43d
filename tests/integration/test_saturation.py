"""onnxruntime and the CPU (issue 12): qconv says where onnxruntime's x86 u8 x s8 kernels will
not compute the model, and --weight-type / --activation-type give a form they compute exactly.

Judged on any host: the warnings by the reference's emulation of the saturating kernel
(reference.py, emulate_u8s8), node by node; the type shifts by the reference (bit-identical
to the unshifted conversion) and by onnxruntime itself, which must equal the reference on
every output of a u8 x u8 or s8 x s8 model, whatever the CPU."""
import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import models
import reference
from conftest import (QUANT_CASES, SATURATION_ROWS, assert_bit_identical, case_id, differing, max_abs_diff, op_counts,
                      ort_agrees, outputs, output_step, run_qconv, session)

# the per-node notes (-v) of the grouped warning
WARNING = re.compile(r"^qconv: note: [^:]+: (.+): (\d+) of (\d+) weight pairs can saturate onnxruntime's u8 x s8 kernel")


def warned(stderr: str) -> dict[str, int]:
    """Node label -> saturable pairs, from qconv's warnings."""
    return {m.group(1): int(m.group(2)) for m in map(WARNING.match, stderr.splitlines()) if m}


def stress_inputs(name: str) -> list[np.ndarray]:
    """Ordinary inputs and larger ones (activations near the top of their range saturate)."""
    xs = models.sample_inputs(models.FLOAT_MODELS[name](), 4, seed=11)
    return xs + [x * 4 for x in xs]


def node_results(model: onnx.ModelProto, values: dict, node: onnx.NodeProto, emulate: bool) -> np.ndarray:
    """`node` alone under the reference (or its emulation), on the values the whole model gave it."""
    inits = {t.name for t in model.graph.initializer}
    feeds = {n: values[n] for n in node.input if n and n not in inits}
    g = helper.make_graph([node], "one", [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in feeds],
                          [helper.make_tensor_value_info(node.output[0], TensorProto.UNDEFINED, None)],
                          [t for t in model.graph.initializer if t.name in node.input])
    m = helper.make_model(g, opset_imports=list(model.opset_import))
    m.ir_version = model.ir_version
    return reference.run(m, feeds, emulate_u8s8=emulate)[0]


def differing_nodes(path: str, xs: list[np.ndarray]) -> set[str]:
    """Nodes whose output under the emulated saturating kernel differs from the reference, on
    their exact inputs, for any of xs."""
    model = onnx.load(path)
    found = set()
    for x in xs:
        values = reference.run(model, x, intermediate=True)
        values.update({t.name: numpy_helper.to_array(t) for t in model.graph.initializer})
        for n in model.graph.node:
            if n.op_type not in ("QLinearConv", "QLinearMatMul") or n.name in found:
                continue
            if not np.array_equal(node_results(model, values, n, False), node_results(model, values, n, True)):
                found.add(n.name)
    return found


@pytest.mark.parametrize("case", QUANT_CASES, ids=case_id)
def test_every_node_the_saturating_kernel_gets_wrong_is_warned(case, quantized, tmp_path):
    """uint8 models as they are; int8 models with --activation-type uint8 (what onnxruntime's
    own fusion does to them on x86). No node that the emulation computes differently from the
    reference may go unwarned; warned nodes that the inputs did not reach are false alarms."""
    src = quantized(case)
    dst = str(tmp_path / "qop.onnx")
    flags = ["--activation-type", "uint8"] if case[2] == "int8" else []
    r = run_qconv("convert", "-v", src, dst, "--format", "qop", *flags)
    assert r.returncode == 0, r.stderr
    names = warned(r.stderr)
    differ = differing_nodes(dst, stress_inputs(case[0]))
    counts = op_counts(dst)
    SATURATION_ROWS.append((case_id(case), counts.get("QLinearConv", 0) + counts.get("QLinearMatMul", 0), len(names),
                            len(differ), len(set(names) - differ), len(differ - set(names))))
    assert differ <= set(names), f"not warned: {sorted(differ - set(names))}"
    if names:
        assert re.search(r"qconv: warning: .*: \d+ weight pairs in \d+ of \d+ u8 x s8 nodes can saturate onnxruntime's "
                         r"x86 kernels on CPUs without VNNI .*--weight-type uint8", r.stderr)
    # the QDQ form names the same groups: onnxruntime fuses them into the same kernels
    qdq = str(tmp_path / "qdq.onnx")
    r2 = run_qconv("convert", "-v", src, qdq, "--format", "qdq", *flags)
    assert r2.returncode == 0
    assert warned(r2.stderr) == names


def test_depthwise_convs_are_never_warned(quantized, tmp_path):
    """onnxruntime runs a depthwise conv (one input, one output channel per group) without
    pairs: mobilenet_style's three depthwise convs are exact under the emulation, and unwarned."""
    src = quantized(("mobilenet_style", True, "uint8"))
    dst = str(tmp_path / "qop.onnx")
    r = run_qconv("convert", "-v", src, dst, "--format", "qop")
    g = onnx.load(dst).graph
    depthwise = [n.name for n in g.node if n.op_type == "QLinearConv" and
                 next((a.i for a in n.attribute if a.name == "group"), 1) > 1]
    assert len(depthwise) == 3
    assert not set(depthwise) & set(warned(r.stderr))
    assert not set(depthwise) & differing_nodes(dst, stress_inputs("mobilenet_style"))


@pytest.mark.parametrize("fmt", ["qop", "qdq"])
@pytest.mark.parametrize("case", QUANT_CASES, ids=case_id)
def test_uint8_weights_make_onnxruntime_exact_on_every_cpu(case, fmt, quantized, tmp_path):
    """--weight-type uint8 (and so uint8 activations): the reference gives the unshifted
    conversion's numbers bit for bit, and onnxruntime, its fusion on, equals the reference
    within one step on every output, on any CPU. Without the flag the emulated saturating
    host gets the same u8 x s8 models wrong wherever qconv warned."""
    src = quantized(case)
    plain, shifted = str(tmp_path / "plain.onnx"), str(tmp_path / "u8.onnx")
    r = run_qconv("convert", "-v", src, plain, "--format", fmt)
    assert r.returncode == 0, r.stderr
    r2 = run_qconv("convert", "-v", src, shifted, "--format", fmt, "--weight-type", "uint8")
    assert r2.returncode == 0, r2.stderr
    assert not warned(r2.stderr)
    again = str(tmp_path / "again.onnx")
    assert run_qconv("convert", "-v", src, again, "--format", fmt, "--weight-type", "uint8").returncode == 0
    assert open(again, "rb").read() == open(shifted, "rb").read()  # deterministic
    onnx.checker.check_model(onnx.load(shifted), full_check=True)
    m = onnx.load(shifted)
    inits = {t.name: t for t in m.graph.initializer}
    int8 = [n for n in m.graph.node if any(i in inits and inits[i].data_type == TensorProto.INT8 for i in n.input)]
    assert not int8, f"int8 tensors left at {[n.name for n in int8]}"
    assert m.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT  # boundaries keep their types

    xs = stress_inputs(case[0])
    want = reference.outputs(plain, xs)
    assert_bit_identical(want, reference.outputs(shifted, xs))
    step = output_step(src)
    level = "disable" if fmt == "qop" else "extended"
    got = outputs(session(shifted, level), xs)
    assert max_abs_diff(got, want) <= step * 1.0001
    if fmt == "qop" and case[2] == "uint8":  # u8 x s8 without the flag: warned, and wrong on that host
        assert warned(r.stderr)
        n, total = differing(reference.outputs(plain, xs, emulate_u8s8=True), want)
        assert n > 0
        print(f"{case_id(case)}: without --weight-type uint8, {n} of {total} outputs differ under the emulation")


def qlinear_conv_model(x_type, w: np.ndarray, x_zp: int) -> onnx.ModelProto:
    """One QLinearConv with 8-bit graph input and output (a QOp model's boundary)."""
    m = w.shape[0]
    inits = [numpy_helper.from_array(np.float32(0.02), "xs"), numpy_helper.from_array(np.array(x_zp, x_type), "xz"),
             numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.full(m, 0.01, np.float32), "ws"),
             numpy_helper.from_array(np.zeros(m, w.dtype), "wz"), numpy_helper.from_array(np.float32(0.5), "ys"),
             numpy_helper.from_array(np.array(x_zp, x_type), "yz")]
    t = TensorProto.UINT8 if x_type == np.uint8 else TensorProto.INT8
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"], name="qconv_1",
                            pads=[1, 1, 1, 1])
    g = helper.make_graph([node], "one", [helper.make_tensor_value_info("x", t, [1, w.shape[1], 8, 8])],
                          [helper.make_tensor_value_info("y", t, [1, m, 8, 8])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    return model


def saturating_weights(m=16, c=4) -> np.ndarray:
    rng = np.random.default_rng(5)
    return rng.choice(np.array([-127, -90, 90, 127], np.int8), size=(m, c, 3, 3))


def test_onnxruntime_equals_the_reference_or_its_emulation(tmp_path):
    """The emulation is onnxruntime's u8 x s8 kernel as this kind of host runs it: on a single
    QLinearConv with weights built to saturate, onnxruntime equals either the reference (a CPU
    with VNNI, or not x86) or the emulation (x86 without VNNI), exactly."""
    path = str(tmp_path / "one.onnx")
    onnx.save(qlinear_conv_model(np.uint8, saturating_weights(), 128), path)
    x = np.random.default_rng(1).integers(200, 256, (1, 4, 8, 8)).astype(np.uint8)
    exact = reference.outputs(path, [x])[0]
    emulated = reference.outputs(path, [x], emulate_u8s8=True)[0]
    assert not np.array_equal(exact, emulated)  # the weights do saturate the emulated kernel
    got = outputs(session(path), [x])[0]
    assert np.array_equal(got, exact) or np.array_equal(got, emulated)


def test_graph_inputs_and_outputs_keep_their_types(tmp_path):
    """A QOp model whose graph input and output are uint8: --activation-type int8 (and so int8
    weights, already) moves the tensors inside; the boundaries keep uint8 through a converter,
    and every number is the same."""
    src, dst = str(tmp_path / "u8.onnx"), str(tmp_path / "s8.onnx")
    onnx.save(qlinear_conv_model(np.uint8, saturating_weights(), 100), src)
    r = run_qconv("convert", "-v", src, dst, "--format", "qop", "--activation-type", "int8")
    assert r.returncode == 0, r.stderr
    out = onnx.load(dst)
    onnx.checker.check_model(out, full_check=True)
    assert out.graph.input[0].type.tensor_type.elem_type == TensorProto.UINT8
    assert out.graph.output[0].type.tensor_type.elem_type == TensorProto.UINT8
    conv = next(n for n in out.graph.node if n.op_type == "QLinearConv")
    zps = {t.name: numpy_helper.to_array(t) for t in out.graph.initializer}
    assert zps[conv.input[2]].dtype == np.int8 and int(zps[conv.input[2]]) == 100 - 128
    xs = [np.random.default_rng(s).integers(0, 256, (1, 4, 8, 8)).astype(np.uint8) for s in range(3)]
    assert_bit_identical(reference.outputs(src, xs), reference.outputs(dst, xs))
    assert_bit_identical(reference.outputs(src, xs), outputs(session(dst), xs))  # s8 x s8: exact everywhere
    assert not warned(r.stderr)


def test_int8_activations_with_uint8_weights_is_a_usage_error(quantized, tmp_path):
    dst = str(tmp_path / "out.onnx")
    r = run_qconv("convert", "-v", quantized(("small_cnn", False, "uint8")), dst, "--format", "qop",
                  "--activation-type", "int8", "--weight-type", "uint8")
    assert r.returncode == 2
    assert r.stderr.strip() == ("qconv: error: --activation-type int8 with --weight-type uint8: no onnxruntime kernel "
                                "takes int8 activations with uint8 weights")
    assert not (tmp_path / "out.onnx").exists()
    r = run_qconv("convert", "-v", quantized(("small_cnn", False, "uint8")), dst, "--format", "qop", "--weight-type", "int4")
    assert r.returncode == 2 and "--weight-type" in r.stderr


def test_a_reader_without_zero_point_gets_the_old_type_back(tmp_path):
    """An int8 QOp model whose output is also read by a Cast: --weight-type uint8 moves weights
    and activations to uint8; the graph input and output keep int8, and so does what the Cast
    reads (a converter before it). Every number is the same; onnxruntime runs it exactly."""
    src, dst = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    m = qlinear_conv_model(np.int8, saturating_weights(), -20)
    m.graph.node.append(helper.make_node("Cast", ["y"], ["yf"], name="cast_1", to=TensorProto.FLOAT))
    m.graph.output.append(helper.make_tensor_value_info("yf", TensorProto.FLOAT, [1, 16, 8, 8]))
    onnx.save(m, src)
    r = run_qconv("convert", "-v", src, dst, "--format", "qop", "--weight-type", "uint8")
    assert r.returncode == 0, r.stderr
    out = onnx.load(dst)
    onnx.checker.check_model(out, full_check=True)
    conv = next(n for n in out.graph.node if n.op_type == "QLinearConv")
    types = {t.name: t.data_type for t in out.graph.initializer}
    assert [types[conv.input[i]] for i in (2, 3, 5, 7)] == [TensorProto.UINT8] * 4
    assert [o.type.tensor_type.elem_type for o in out.graph.output] == [TensorProto.INT8, TensorProto.FLOAT]
    xs = [np.random.default_rng(s).integers(-128, 128, (1, 4, 8, 8)).astype(np.int8) for s in range(3)]
    sess = session(dst)
    for x in xs:
        want = reference.run(src, x)
        assert_bit_identical(want, reference.run(dst, x))
        assert_bit_identical(want, sess.run(None, {"x": x}))  # u8 x u8: exact on every CPU
    assert not warned(r.stderr)


@pytest.mark.parametrize("flags", [("--activation-type", "int8"), ("--activation-type", "uint8"),
                                   ("--weight-type", "int8", "--activation-type", "uint8")], ids="_".join)
@pytest.mark.parametrize("fmt", ["qop", "qdq"])
@pytest.mark.parametrize("case", [("mobilenet_style", True, "uint8"), ("resnet_style", False, "int8"),
                                  ("mlp", True, "int8")], ids=case_id)
def test_every_type_combination_keeps_the_numbers(case, fmt, flags, quantized, tmp_path):
    """Each shift, in each format, on uint8 and int8 models: bit-identical to the unshifted
    conversion under the reference; onnxruntime agrees (exactly for s8 x s8 QOp, where no
    saturating kernel runs; else the reference or its emulation)."""
    src = quantized(case)
    plain, shifted = str(tmp_path / "plain.onnx"), str(tmp_path / "shifted.onnx")
    assert run_qconv("convert", "-v", src, plain, "--format", fmt).returncode == 0
    r = run_qconv("convert", "-v", src, shifted, "--format", fmt, *flags)
    assert r.returncode == 0, r.stderr
    onnx.checker.check_model(onnx.load(shifted), full_check=True)
    xs = stress_inputs(case[0])
    got = reference.outputs(shifted, xs)
    assert_bit_identical(reference.outputs(plain, xs), got)
    step = output_step(src)
    if fmt == "qop" and flags == ("--activation-type", "int8"):
        assert not warned(r.stderr)
        assert max_abs_diff(outputs(session(shifted), xs), got) <= step * 1.0001
    else:
        ort_agrees(shifted, xs, step, got)


def test_no_saturation_check_skips_the_count(quantized, tmp_path):
    src = quantized(("small_cnn", True, "uint8"))
    r = run_qconv("convert", "-v", src, str(tmp_path / "a.onnx"), "--format", "qop")
    assert len(warned(r.stderr)) == 3
    r = run_qconv("convert", "-v", src, str(tmp_path / "b.onnx"), "--format", "qop", "--no-saturation-check")
    assert r.returncode == 0 and not warned(r.stderr) and "saturate" not in r.stderr
    assert open(tmp_path / "a.onnx", "rb").read() == open(tmp_path / "b.onnx", "rb").read()  # an analysis only


def shared_zero_point_model() -> onnx.ModelProto:
    """A uint8 constant that is both data and a zero point, as fuzzing found: z is the zero point
    of x's QuantizeLinear and DequantizeLinear, the data of a DequantizeLinear with another zero
    point, and both the data and the zero point of a third."""
    s = numpy_helper.from_array(np.array(0.25, np.float32), "s")
    z = numpy_helper.from_array(np.array(131, np.uint8), "z")
    z2 = numpy_helper.from_array(np.array(7, np.uint8), "z2")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="quant"),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y1"], name="dq_x"),
             helper.make_node("DequantizeLinear", ["z", "s", "z2"], ["y2"], name="dq_z"),
             helper.make_node("DequantizeLinear", ["z", "s", "z"], ["y3"], name="dq_zz")]
    graph = helper.make_graph(nodes, "shared", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, d) for y, d in (("y1", [1, 3, 4, 4]), ("y2", []), ("y3", []))],
                              [s, z, z2])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


@pytest.mark.parametrize("flags", [("--activation-type", "int8"), ("--weight-type", "uint8"),
                                   ("--weight-type", "int8", "--activation-type", "uint8")], ids="_".join)
@pytest.mark.parametrize("fmt", ["qop", "qdq"])
def test_a_constant_that_is_data_and_zero_point_keeps_the_numbers(fmt, flags, tmp_path):
    """Each zero point moves with the data it describes, and only with it: z moves where it is
    data of a moving group or the zero point of one, and keeps its type and value elsewhere
    (--weight-type int8 --activation-type uint8 moves the weights dq_z and dq_zz read, not x's)."""
    src, dst = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    onnx.save(shared_zero_point_model(), src)
    r = run_qconv("convert", "-v", src, dst, "--format", fmt, *flags)
    assert r.returncode == 0, r.stderr
    out = onnx.load(dst)
    onnx.checker.check_model(out, full_check=True)
    x = np.random.default_rng(0).uniform(-40, 40, (1, 3, 4, 4)).astype(np.float32)
    want = reference.run(src, x)
    assert [float(y) for y in want[1:]] == [(131 - 7) * 0.25, 0.0]
    assert_bit_identical(want, reference.run(dst, x))
    types = {t.name: t.data_type for t in out.graph.initializer}
    quant = next(n for n in out.graph.node if n.name == "quant")
    x_type = TensorProto.INT8 if "int8" == flags[-1] else TensorProto.UINT8
    assert types[quant.input[2]] == x_type
    w_type = TensorProto.INT8 if "int8" in flags else TensorProto.UINT8
    for name in ("dq_z", "dq_zz"):
        dq = next(n for n in out.graph.node if n.name == name)
        assert [types[dq.input[i]] for i in (0, 2)] == [w_type, w_type]
