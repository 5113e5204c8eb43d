"""The seeds' own Aidge form (issue 15, deliverable 5), built as seed 001 describes it ("Aidge
quantization", held in float tensors; aidge-quantization 0.10.1's PTQ no longer leaves it, its
graphs are int8 before export, see test_aidge.py):
- the input goes straight into the first Conv (no quantizer at the graph input or output);
- weights are integer-valued float tensors, or sit behind Mul(SF) -> Round;
- biases are integer-valued float tensors;
- each Conv [-> Relu] is followed by a Quantizer Mul(M) -> Round -> Clip.

qconv --format qop makes every Conv a QLinearConv, with QuantizeLinear at the input, int32 biases
at x_s * w_s, scales chained from the input quantizer (s_x = 1, s_w = 1, s_acc = s_x * s_w,
s_y = s_acc / M) and DequantizeLinear at the output. Judged by the reference (the float-form
model itself, on the integer inputs it is made for: within one step, on near ties only), by
onnxruntime (second judge), and by Aidge's own CPU backend running the float-form model."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import reference
from conftest import differing, max_abs_diff, op_counts, ort_agrees, run_qconv

SHAPE = [1, 3, 12, 12]


def integer_inputs(count: int, seed: int) -> list[np.ndarray]:
    """What the form's first conv is made for: int8 integers, held as float."""
    rng = np.random.default_rng(seed)
    return [np.clip(np.round(rng.normal(0, 40, SHAPE)), -128, 127).astype(np.float32) for _ in range(count)]


def float_form(input_quantizer: bool = False, inner_quantizer: bool = False) -> onnx.ModelProto:
    """Four convs as seed 001 describes Aidge's float form. conv_a's weights sit behind Mul(SF) ->
    Round, the others are integer floats; conv_a and conv_c end in Relu and Clip(0, 127); conv_d
    has no bias. Each M is set from the accumulator's range on sample inputs. With
    `input_quantizer`, the input goes through the same Mul(M) -> Round -> Clip as every layer (the
    input then holds real values); with `inner_quantizer`, conv_b's output goes through a float
    Mul(0.5) and a fresh quantizer before conv_c."""
    rng = np.random.default_rng(7)
    nodes, inits = [], []
    x = "input"
    calib = integer_inputs(4, 1)
    if input_quantizer:
        inits += [numpy_helper.from_array(np.float32(1 / 0.37), "in_m"), numpy_helper.from_array(np.float32(-128), "in_lo"),
                  numpy_helper.from_array(np.float32(127), "in_hi")]
        nodes += [helper.make_node("Mul", ["input", "in_m"], ["in_scaled"], name="in_quant_mul"),
                  helper.make_node("Round", ["in_scaled"], ["in_rounded"], name="in_quant_round"),
                  helper.make_node("Clip", ["in_rounded", "in_lo", "in_hi"], ["in_q"], name="in_quant_clip")]
        x = "in_q"
        calib = [c * np.float32(0.37) for c in calib]
    layers = [("conv_a", 3, 8, True, True, True), ("conv_b", 8, 8, False, True, False),
              ("conv_c", 8, 16, True, True, False), ("conv_d", 16, 4, False, False, False)]
    for name, cin, cout, relu, bias, behind_mul in layers:
        w = rng.normal(0, 0.3, (cout, cin, 3, 3)).astype(np.float32)
        sf = np.float32(127 / np.abs(w).max())
        w_int = np.round(w * sf).astype(np.float32)
        conv_in = [x]
        if behind_mul:  # Mul(SF) -> Round on the float weights
            inits += [numpy_helper.from_array(w, f"{name}_wf"), numpy_helper.from_array(sf, f"{name}_sf")]
            nodes += [helper.make_node("Mul", [f"{name}_wf", f"{name}_sf"], [f"{name}_ws"], name=f"{name}_wmul"),
                      helper.make_node("Round", [f"{name}_ws"], [f"{name}_w"], name=f"{name}_wround")]
        else:
            inits.append(numpy_helper.from_array(w_int, f"{name}_w"))
        conv_in.append(f"{name}_w")
        if bias:
            inits.append(numpy_helper.from_array(np.round(rng.normal(0, 300, cout)).astype(np.float32), f"{name}_b"))
            conv_in.append(f"{name}_b")
        nodes.append(helper.make_node("Conv", conv_in, [f"{name}_acc"], name=name, pads=[1, 1, 1, 1]))
        acc = f"{name}_acc"
        if relu:
            nodes.append(helper.make_node("Relu", [acc], [f"{name}_relu"], name=f"{name}_relu"))
            acc = f"{name}_relu"
        # M from the accumulator's range so far (the PTQ's calibration)
        probe = helper.make_model(helper.make_graph(nodes, "p", [helper.make_tensor_value_info("input", TensorProto.FLOAT, SHAPE)],
                                                    [helper.make_tensor_value_info(acc, TensorProto.FLOAT, None)], inits),
                                  opset_imports=[helper.make_opsetid("", 13)])
        top = max(float(np.abs(reference.run(probe, c)[0]).max()) for c in calib)
        lo = 0 if relu else -128
        inits += [numpy_helper.from_array(np.float32(110 / top), f"{name}_m"),
                  numpy_helper.from_array(np.float32(lo), f"{name}_lo"), numpy_helper.from_array(np.float32(127), f"{name}_hi")]
        nodes += [helper.make_node("Mul", [acc, f"{name}_m"], [f"{name}_scaled"], name=f"{name}_quant_mul"),
                  helper.make_node("Round", [f"{name}_scaled"], [f"{name}_rounded"], name=f"{name}_quant_round"),
                  helper.make_node("Clip", [f"{name}_rounded", f"{name}_lo", f"{name}_hi"], [f"{name}_q"], name=f"{name}_quant_clip")]
        x = f"{name}_q"
        if inner_quantizer and name == "conv_b":
            inits += [numpy_helper.from_array(np.float32(0.5), "half"), numpy_helper.from_array(np.float32(0.8), "inner_m"),
                      numpy_helper.from_array(np.float32(-128), "inner_lo"), numpy_helper.from_array(np.float32(127), "inner_hi")]
            nodes += [helper.make_node("Mul", [x, "half"], ["halved"], name="inner_float_mul"),
                      helper.make_node("Mul", ["halved", "inner_m"], ["inner_scaled"], name="inner_quant_mul"),
                      helper.make_node("Round", ["inner_scaled"], ["inner_rounded"], name="inner_quant_round"),
                      helper.make_node("Clip", ["inner_rounded", "inner_lo", "inner_hi"], ["inner_q"], name="inner_quant_clip")]
            x = "inner_q"
    g = helper.make_graph(nodes, "aidge_float_form", [helper.make_tensor_value_info("input", TensorProto.FLOAT, SHAPE)],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 4, 12, 12])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.checker.check_model(m, full_check=True)
    return m


def aidge_outputs(path: str, xs: list[np.ndarray]) -> list[np.ndarray]:
    """Aidge's own CPU backend running the float-form model (its executor, float32)."""
    aidge_core = pytest.importorskip("aidge_core")
    import aidge_backend_cpu  # noqa: F401  (registers the CPU kernels)
    import aidge_onnx
    g = aidge_onnx.load_onnx(path)
    g.set_backend("cpu")
    g.set_datatype(aidge_core.dtype.float32)
    sched = aidge_core.SequentialScheduler(g)
    node, idx = g.get_ordered_outputs()[0]
    got = []
    for x in xs:
        sched.forward(data=[aidge_core.Tensor(x)])
        got.append(np.array(node.get_operator().get_output(idx)).copy().reshape(x.shape[0], 4, 12, 12))
    return got


def initializer(m: onnx.ModelProto, name: str) -> np.ndarray:
    return numpy_helper.to_array(next(t for t in m.graph.initializer if t.name == name))


@pytest.fixture(scope="module")
def form(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("aidge_float") / "form.onnx")
    onnx.save(float_form(), path)
    return path


def test_qop_fuses_every_conv_with_scales_chained_from_the_input(form, tmp_path):
    dst = str(tmp_path / "qop.onnx")
    r = run_qconv("convert", form, dst, "--format", "qop", "-v")
    assert r.returncode == 0, r.stderr
    counts = op_counts(dst)
    assert counts.get("QLinearConv") == 4 and "Conv" not in counts and "Mul" not in counts and "Round" not in counts
    m = onnx.load(dst)
    onnx.checker.check_model(m, full_check=True)
    assert m.graph.node[0].op_type == "QuantizeLinear" and m.graph.node[0].input[0] == "input"
    assert m.graph.node[-1].op_type == "DequantizeLinear" and m.graph.node[-1].output[0] == m.graph.output[0].name
    assert float(initializer(m, m.graph.node[0].input[1])) == 1.0  # s_x = 1 at the input
    # the scales chain: x_s of each conv is the y_s of the one before; y_s = x_s * w_s / M
    src = onnx.load(form)
    ms = [float(initializer(src, f"{c}_m")) for c in ("conv_a", "conv_b", "conv_c", "conv_d")]
    convs = [n for n in m.graph.node if n.op_type == "QLinearConv"]
    x_s = 1.0
    for conv, mult in zip(convs, ms):
        assert float(initializer(m, conv.input[1])) == np.float32(x_s)
        assert float(initializer(m, conv.input[4])) == 1.0  # s_w = 1
        y_s = float(initializer(m, conv.input[6]))
        assert y_s == np.float32(np.float32(x_s) * np.float32(1 / np.float32(mult))) or abs(y_s * mult / x_s - 1) < 1e-6
        if len(conv.input) > 8:
            assert initializer(m, conv.input[8]).dtype == np.int32  # the bias, at x_s * w_s
        x_s = y_s
    # reported: the input taken as integers, and each multiplier written as a division
    assert f"warning: {form}: input: taken to hold int8 integers" in r.stderr
    assert "4 conv lifted from the float Aidge form" in r.stderr
    assert "4 quantizer x * M written as QuantizeLinear(x, 1/M) (--format qop: one step on near ties)" in r.stderr
    props = {p.key: p.value for p in m.metadata_props}
    assert props.get("qconv.approximations", "") == ""

    xs = integer_inputs(5, 3)
    want = reference.outputs(form, xs)  # the float-form model itself
    got = reference.outputs(dst, xs)
    assert max_abs_diff(want, got) <= 1.0  # one step: the form's integer units
    n, total = differing(want, got)
    assert n <= max(1, total // 100), f"{n} of {total} differ"
    ort_agrees(dst, xs, 1.0, got)  # onnxruntime, the second judge
    aidge = aidge_outputs(form, xs)  # Aidge's executor
    assert max_abs_diff(aidge, got) <= 1.0
    n_aidge, _ = differing(aidge, got)
    print(f"aidge float form qop: {n} of {total} values differ from the reference, {n_aidge} from Aidge's backend")


def test_qdq_keeps_its_promise_and_lifts_only_with_approximate(form, tmp_path):
    exact, approx = str(tmp_path / "exact.onnx"), str(tmp_path / "approx.onnx")
    r = run_qconv("convert", form, exact, "--format", "qdq", "-v")
    assert r.returncode == 0, r.stderr
    assert ("conv_a: not lifted from the float Aidge form: --format qdq promises the same bits, and this form's "
            "quantizers x * M become x / s only with --approximate") in r.stderr
    xs = integer_inputs(3, 4)
    assert np.array_equal(np.stack(reference.outputs(form, xs)), np.stack(reference.outputs(exact, xs)))
    r = run_qconv("convert", form, approx, "--format", "qdq", "--approximate", "-v")
    assert r.returncode == 0, r.stderr
    listed = {p.key: p.value for p in onnx.load(approx).metadata_props}["qconv.approximations"].splitlines()
    assert sum("lifted with chained scales" in a for a in listed) == 4
    counts = op_counts(approx)
    assert counts["Conv"] == 4 and counts["DequantizeLinear"] >= 4 + 4 + 3 + 1
    assert max_abs_diff(reference.outputs(form, xs), reference.outputs(approx, xs)) <= 1.0


@pytest.mark.parametrize("value", [300.0, 1e24])  # 1e24: no int64 holds it (the fuzzer, issue 28's CI)
def test_a_conv_that_breaks_the_chain_stays_and_says_why(value, tmp_path):
    """A weight outside int8 is not the form: the conv stays as it is, named."""
    m = float_form()
    w = next(t for t in m.graph.initializer if t.name == "conv_b_w")
    big = numpy_helper.to_array(w).copy()
    big[0, 0, 0, 0] = value
    w.CopyFrom(numpy_helper.from_array(big, "conv_b_w"))
    src, dst = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    onnx.save(m, src)
    r = run_qconv("convert", src, dst, "--format", "qop", "-v")
    assert r.returncode == 0, r.stderr
    assert "conv_b: not lifted from the float Aidge form: its weight holds integers outside int8's [-128, 127]" in r.stderr
    # conv_c's chain starts again at conv_b's quantizer (its scale 1/M, zero point 0)
    assert op_counts(dst).get("QLinearConv") == 3 and op_counts(dst).get("Conv") == 1
    if value < 2**31:  # onnx.reference's QuantizeLinear casts x / scale to int32 before it saturates: 1e24 wraps
        xs = integer_inputs(3, 5)
        assert max_abs_diff(reference.outputs(src, xs), reference.outputs(dst, xs)) <= 1.0


def deep_form(depth: int) -> onnx.ModelProto:
    """`depth` 1x1 convs of integer weights, each followed by Mul(M) -> Round -> Clip: each 1/M
    (about 400 here) multiplies into the chained scale, which would pass float's range by the
    15th conv with s_w = 1."""
    rng = np.random.default_rng(11)
    nodes, inits, x = [], [], "input"
    calib = integer_inputs(2, 2)
    for k in range(depth):
        c_in = 3 if k == 0 else 4
        inits.append(numpy_helper.from_array(np.clip(np.round(rng.normal(0, 40, (4, c_in, 1, 1))), -127, 127).astype(np.float32), f"w{k}"))
        nodes.append(helper.make_node("Conv", [x, f"w{k}"], [f"acc{k}"], name=f"conv{k}"))
        probe = helper.make_model(helper.make_graph(nodes, "p", [helper.make_tensor_value_info("input", TensorProto.FLOAT, SHAPE)],
                                                    [helper.make_tensor_value_info(f"acc{k}", TensorProto.FLOAT, None)], inits),
                                  opset_imports=[helper.make_opsetid("", 13)])
        top = max(float(np.abs(reference.run(probe, c)[0]).max()) for c in calib)
        inits += [numpy_helper.from_array(np.float32(100 / top), f"m{k}"), numpy_helper.from_array(np.float32(-128), f"lo{k}"),
                  numpy_helper.from_array(np.float32(127), f"hi{k}")]
        nodes += [helper.make_node("Mul", [f"acc{k}", f"m{k}"], [f"s{k}"]), helper.make_node("Round", [f"s{k}"], [f"r{k}"]),
                  helper.make_node("Clip", [f"r{k}", f"lo{k}", f"hi{k}"], [f"q{k}"])]
        x = f"q{k}"
    g = helper.make_graph(nodes, "deep", [helper.make_tensor_value_info("input", TensorProto.FLOAT, SHAPE)],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 4, 12, 12])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    return m


def test_a_deep_chain_keeps_its_scales_inside_float_range(tmp_path):
    src, dst = str(tmp_path / "deep.onnx"), str(tmp_path / "qop.onnx")
    onnx.save(deep_form(24), src)
    r = run_qconv("convert", src, dst, "--format", "qop", "-v")
    assert r.returncode == 0, r.stderr
    assert op_counts(dst).get("QLinearConv") == 24
    m = onnx.load(dst)
    scales = [float(initializer(m, n.input[k])) for n in m.graph.node if n.op_type == "QLinearConv" for k in (1, 4, 6)]
    assert all(np.isfinite(s) and 2.0 ** -70 < s < 2.0 ** 70 for s in scales)
    w_scales = {float(initializer(m, n.input[4])) for n in m.graph.node if n.op_type == "QLinearConv"}
    assert w_scales != {1.0} and all(np.log2(s).is_integer() for s in w_scales)  # powers of two, exact
    xs = integer_inputs(3, 6)
    got = reference.outputs(dst, xs)
    assert max_abs_diff(reference.outputs(src, xs), got) <= 1.0
    ort_agrees(dst, xs, 1.0, got)


@pytest.mark.parametrize("where", ["input", "inner"])
def test_the_chain_starts_at_any_quantizer(where, tmp_path):
    """Issue 28: an input quantizer (the same Mul(M) -> Round -> Clip as every layer), or a fresh one
    inside the graph after a float op: every conv fuses, within one step of the form itself."""
    m = float_form(input_quantizer=where == "input", inner_quantizer=where == "inner")
    src, dst = str(tmp_path / "in.onnx"), str(tmp_path / "qop.onnx")
    onnx.save(m, src)
    r = run_qconv("convert", src, dst, "--format", "qop", "-v")
    assert r.returncode == 0, r.stderr
    assert "not lifted" not in r.stderr, r.stderr
    counts = op_counts(dst)
    assert counts.get("QLinearConv") == 4 and "Conv" not in counts, counts
    onnx.checker.check_model(onnx.load(dst), full_check=True)
    xs = integer_inputs(5, 3)
    if where == "input":
        xs = [x * np.float32(0.37) for x in xs]  # real values; the input quantizer makes them integers
        assert "taken to hold int8 integers" not in r.stderr  # the model's own quantizer starts the chain
    want, got = reference.outputs(src, xs), reference.outputs(dst, xs)
    assert max_abs_diff(want, got) <= 1.0
    n, total = differing(want, got)
    assert n <= max(1, total // 100), f"{n} of {total} differ"
    ort_agrees(dst, xs, 1.0, got)


def test_layers_quantized_to_either_8_bit_type_all_fuse(tmp_path):
    """Issue 36, item 7: the held-out form behind an input quantizer fused 3 of 4 convs; the last
    stayed, its output int8 while its input was uint8 ("QLinearConv kernels take y of x's type").
    Here the Relu layers clip to [0, 255] (uint8) and the others to [-128, 127] (int8), so every
    conv's x and y differ in type: each y is stored in its x's type, zero points moved by 128 (the
    same tensor), and all four fuse, within one step of the form."""
    m = float_form(input_quantizer=True)
    for t in m.graph.initializer:
        if t.name in ("conv_a_hi", "conv_c_hi"):
            t.CopyFrom(numpy_helper.from_array(np.float32(255), t.name))
        if t.name in ("conv_a_m", "conv_c_m"):
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * np.float32(2), t.name))
    src, dst = str(tmp_path / "in.onnx"), str(tmp_path / "qop.onnx")
    onnx.save(m, src)
    r = run_qconv("convert", src, dst, "--format", "qop", "-v")
    assert r.returncode == 0, r.stderr
    assert "not fused" not in r.stderr, r.stderr
    assert r.stderr.count("(its zero points moved by 128)") >= 2, r.stderr
    counts = op_counts(dst)
    assert counts.get("QLinearConv") == 4 and "Conv" not in counts, counts
    onnx.checker.check_model(onnx.load(dst), full_check=True)
    for n in onnx.load(dst).graph.node:  # each QLinearConv's y in its x's type
        if n.op_type == "QLinearConv":
            types = {t.name: t.data_type for t in onnx.load(dst).graph.initializer}
            assert types[n.input[2]] == types[n.input[7]], n.name
    xs = [x * np.float32(0.37) for x in integer_inputs(5, 3)]
    want, got = reference.outputs(src, xs), reference.outputs(dst, xs)
    assert max_abs_diff(want, got) <= 1.0
    n, total = differing(want, got)
    assert n <= max(1, total // 100), f"{n} of {total} differ"
    ort_agrees(dst, xs, 1.0, got)
