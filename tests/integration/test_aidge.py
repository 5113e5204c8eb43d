"""Real Aidge exports (aidge-* 0.10.1 from PyPI) -> standard ONNX, judged by Aidge's own executor.

Aidge's PTQ export (fold_graph=True) and its set_to_qop export run Conv on int8 tensors and
requantize with QuantizeLinear(acc, divisor): no runtime but Aidge's runs them. qconv rebuilds
them as QDQ with scales chained from the input quantizer. The judge is Aidge's CPU backend
running the quantized graph itself; onnxruntime runs qconv's output, which must give the same
int8 values.

By default qconv rebuilds them in integer units (scale 1 on integer inputs, the export's own
QuantizeLinear(acc, S)): bit-exact. With --approximate it chains absolute scales from the input
quantizer instead, and lists each rebuilt conv as an approximation.

Aidge declares opset 28, for which onnxruntime 1.32 has no QuantizeLinear kernel: the tests
convert with --opset 21, which qconv allows because none of the model's operators changed
between 21 and 28 for the types they use."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import models
import reference
from conftest import executed, judge_qop, op_counts, run_qconv, tie_inputs

aidge_core = pytest.importorskip("aidge_core")


def float_cnn(kind: str) -> onnx.ModelProto:
    b = models._Builder(9)
    if kind == "two_convs":
        x = b.conv("input", 3, 8)
        x = b.conv(x, 8, 8, relu=False)
        return b.model("convs", "input", [1, 3, 16, 16], x, [1, 8, 16, 16])
    x = b.conv("input", 3, 8)
    x = b.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = b.conv(x, 8, 16)
    x = b.conv(x, 16, 16, k=1, relu=False, bias=False)
    x = b.op("GlobalAveragePool", [x])
    return b.model("cnn", "input", [1, 3, 16, 16], x, [1, 16, 1, 1])


def topologically_sorted(m: onnx.ModelProto) -> onnx.ModelProto:
    made = {i.name for i in m.graph.input} | {t.name for t in m.graph.initializer} | {""}
    todo, order = list(m.graph.node), []
    while todo:
        n = next(n for n in todo if all(i in made for i in n.input))
        order.append(n)
        made.update(n.output)
        todo.remove(n)
    del m.graph.node[:]
    m.graph.node.extend(order)
    return m


def repair_expanded_export(path: str) -> None:
    """aidge-onnx 0.10.1's export of an expanded graph is not valid ONNX, in two ways the
    checker and onnxruntime both reject: its nodes are not in topological order, and each Pad's
    constant_value is a double where Pad needs x's type (int8). Fix exactly these two."""
    m = onnx.load(path)
    with pytest.raises(onnx.checker.ValidationError, match="topologically sorted"):
        onnx.checker.check_model(m)
    m = topologically_sorted(m)
    for n in m.graph.node:
        if n.op_type == "Constant" and n.output[0].endswith("constant_value_output_0"):
            t = n.attribute[0].t
            assert t.data_type == onnx.TensorProto.DOUBLE
            t.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t).astype(np.int8), t.name))
    onnx.save(m, path)


def quantize_with_aidge(fm: onnx.ModelProto, path: str, *, rescale_inputs: bool, qop: bool, work,
                        fold: bool = True, expand: bool = False):
    """Aidge PTQ (int8 weights and activations, int32 bias), export; returns Aidge's graph.
    fold=False keeps the weight quantizers (QuantizeLinear on float weights in the export);
    expand=True expands the meta-operators first (Mul -> Round -> Add -> Clip -> Cast chains)."""
    import aidge_backend_cpu  # noqa: F401  (registers the CPU kernels)
    import aidge_onnx
    import aidge_quantization as aq
    src = str(work / "float.onnx")
    onnx.save(fm, src)
    g = aidge_onnx.load_onnx(src)
    g.set_backend("cpu")
    g.set_datatype(aidge_core.dtype.float32)
    calib = [aidge_core.Tensor(x) for x in models.sample_inputs(fm, 8, seed=1)]
    aq.auto_assign_node_precision(g, aidge_core.dtype.int8, aidge_core.dtype.int8, aidge_core.dtype.int32)
    aq.quantize_network(g, calib, rescale_inputs=rescale_inputs, fold_graph=fold and not qop)
    if qop:
        aq.set_to_qop(g)
    if expand:
        aidge_core.expand_metaops(g, True, "{2}_{0}", True)
    aidge_onnx.export_onnx(g, path)
    if expand:
        repair_expanded_export(path)
    m = onnx.load(path)
    assert [(o.domain, o.version) for o in m.opset_import] == [("", 28)]  # what Aidge declares
    return g


def aidge_outputs(g, xs):
    sched = aidge_core.SequentialScheduler(g)
    node, idx = g.get_ordered_outputs()[0]
    got = []
    for x in xs:
        sched.forward(data=[aidge_core.Tensor(x)])
        got.append(np.array(node.get_operator().get_output(idx)).copy())
    return got


def differences(want, got) -> tuple[int, int]:
    """(values that differ, values) between Aidge's int8 outputs and onnxruntime's: none by more
    than one step."""
    differ = total = 0
    for w, g in zip(want, got):
        assert g.dtype == np.int8
        assert int(np.max(np.abs(g.astype(np.int32) - w.astype(np.int32)))) <= 1
        differ += int(np.sum(g != w))
        total += g.size
    return differ, total


def approximations(path: str) -> list[str]:
    props = {p.key: p.value for p in onnx.load(path).metadata_props}
    return props.get("qconv.approximations", "").splitlines()


@pytest.mark.parametrize("kind", ["two_convs", "cnn"])
@pytest.mark.parametrize("export", ["ptq", "qop", "ptq-unfolded"])
@pytest.mark.parametrize("mode", ["exact", "approximate"])
def test_aidge_integer_export_matches_aidge(kind, export, mode, tmp_path):
    """rescale_inputs=True: Aidge's own CPU backend has no kernel for a float input into its
    int8 Conv (rescale_inputs=False), so that export has no judge; see the next test.
    ptq-unfolded: fold_graph=False, Aidge's QuantizeLinear on float weights (scale 1/SF)."""
    rescale_inputs = True
    fm = float_cnn(kind)
    src = str(tmp_path / "aidge.onnx")
    g = quantize_with_aidge(fm, src, rescale_inputs=rescale_inputs, qop=export == "qop", work=tmp_path,
                            fold=export != "ptq-unfolded")
    convs = op_counts(src)["Conv"]
    xs = models.sample_inputs(fm, 6, seed=44)
    want = aidge_outputs(g, xs)
    assert want[0].dtype == np.int8
    flags = ["--approximate"] if mode == "approximate" else []
    for fmt in ("qdq", "qop"):
        dst = str(tmp_path / f"{fmt}.onnx")
        r = run_qconv("convert", src, dst, "--format", fmt, "--opset", "21", "-v", *flags)
        assert r.returncode == 0, r.stderr
        assert f"{convs} integer conv rebuilt as QDQ" in r.stderr
        out = onnx.load(dst)
        onnx.checker.check_model(out, full_check=True)
        assert [(o.domain, o.version) for o in out.opset_import] == [("", 21)]
        listed = approximations(dst)
        if mode == "exact":
            assert listed == []
        else:  # each rebuilt conv is listed
            assert sum("rebuilt with absolute scales" in a for a in listed) == convs, listed
        if fmt == "qop":  # every conv reading a quantized input is fused
            assert op_counts(dst).get("QLinearConv", 0) == convs - (0 if rescale_inputs else 1)
        differ, total = differences(want, executed(dst, xs))
        # Aidge's executor requantizes by multiplying with 1/S where its export writes
        # QuantizeLinear(acc, S), a division: the two can round apart on near-ties, by one step.
        assert differ <= max(1, total // 100), f"{differ} of {total} values differ from Aidge"
        print(f"aidge {kind} {export} {mode} {fmt}: {differ} of {total} values differ from Aidge")


def test_aidge_export_without_input_rescaling_converts_to_runnable_onnx(tmp_path):
    """rescale_inputs=False: the first Conv reads the float input with int8 weights. Aidge cannot
    run it; qconv's rebuild (s_x = 1) must give the same int8 output as the rescaled export's
    first layer would on integer-valued inputs: the float Conv of x with the int8 weights plus the
    int32 bias, divided by the divisor. Checked here against that formula in numpy."""
    fm = float_cnn("two_convs")
    src = str(tmp_path / "aidge.onnx")
    quantize_with_aidge(fm, src, rescale_inputs=False, qop=False, work=tmp_path)
    m = onnx.load(src)
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    conv = m.graph.node[0]
    assert conv.op_type == "Conv" and conv.input[0] == m.graph.input[0].name
    w, b = inits[conv.input[1]].astype(np.float64), inits[conv.input[2]].astype(np.float64)
    q = next(n for n in m.graph.node if n.op_type == "QuantizeLinear")
    divisor = np.float32(inits[q.input[1]])
    # a probe model: the first layer only (Conv -> QuantizeLinear), as qconv converts it
    probe = onnx.helper.make_model(onnx.helper.make_graph(
        [m.graph.node[0], q], "first", [m.graph.input[0]],
        [onnx.helper.make_tensor_value_info(q.output[0], onnx.TensorProto.INT8, [1, 8, 16, 16])],
        [t for t in m.graph.initializer if t.name in (conv.input[1], conv.input[2], q.input[1], q.input[2])]),
        opset_imports=m.opset_import)
    probe.ir_version = m.ir_version
    psrc, dst = str(tmp_path / "probe.onnx"), str(tmp_path / "probe_qdq.onnx")
    onnx.save(probe, psrc)
    r = run_qconv("convert", psrc, dst, "--format", "qdq", "--opset", "21", "-v")
    assert r.returncode == 0, r.stderr
    assert "1 integer conv rebuilt as QDQ" in r.stderr
    x = np.round(np.random.default_rng(5).normal(0, 20, (1, 3, 16, 16))).astype(np.float32)  # integer-valued
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    acc = np.zeros((1, 8, 16, 16))
    for i in range(3):
        for j in range(3):
            acc += np.einsum("nchw,oc->nohw", xp[:, :, i:i + 16, j:j + 16], w[:, :, i, j])
    acc += b.reshape(1, -1, 1, 1)
    want = np.clip(np.round(acc.astype(np.float32) / divisor), -128, 127).astype(np.int8)
    np.testing.assert_array_equal(executed(dst, [x])[0], want)


@pytest.mark.parametrize("kind", ["two_convs", "cnn"])
def test_aidge_expanded_export_matches_aidge(kind, tmp_path):
    """Expanded meta-operators: every quantizer is Mul(SF) -> Round -> Add(0) -> Clip -> Cast(int8),
    padding a separate Pad on int8, the Conv on int8. Exact by default: the integer Convs are
    rebuilt in integer units and, in qdq, the Mul chains stay as the float ops they are (x * SF has
    no QuantizeLinear form); identical to Aidge. In qop (one step promised) and with --approximate
    the Mul chains become QuantizeLinear(1 / SF) (listed with --approximate), and in qop every
    conv is fused."""
    fm = float_cnn(kind)
    src = str(tmp_path / "aidge.onnx")
    g = quantize_with_aidge(fm, src, rescale_inputs=True, qop=False, work=tmp_path, fold=False, expand=True)
    assert op_counts(src)["Pad"] >= 1 and op_counts(src)["Round"] >= 3
    convs = op_counts(src)["Conv"]
    xs = models.sample_inputs(fm, 6, seed=44)
    want = aidge_outputs(g, xs)
    for mode, flags in (("exact", []), ("approximate", ["--approximate"])):
        for fmt in ("qdq", "qop"):
            dst = str(tmp_path / f"{mode}_{fmt}.onnx")
            r = run_qconv("convert", src, dst, "--format", fmt, "--opset", "21", *flags)
            assert r.returncode == 0, r.stderr
            onnx.checker.check_model(onnx.load(dst), full_check=True)
            counts = op_counts(dst)
            assert "Pad" not in counts  # folded into the Conv's pads
            listed = approximations(dst)
            if mode == "exact" and fmt == "qdq":
                assert listed == [] and counts["Round"] >= 1 and "QLinearConv" not in counts
            elif mode == "exact":  # qop's promise is one step: the Mul chains become Q, counted, not listed
                assert listed == [] and "Round" not in counts
                assert f"{convs + 1} quantizer x * M written as QuantizeLinear(x, 1/M) (--format qop" in r.stderr
            else:
                assert sum("written as QuantizeLinear" in a for a in listed) == convs + 1  # input and each conv
            if fmt == "qop":
                assert counts.get("QLinearConv", 0) == convs
            differ, total = differences(want, executed(dst, xs))
            if mode == "exact" and kind == "two_convs":
                assert differ == 0  # Aidge's executor and the export agree here: bit-identical
            assert differ <= max(1, total // 100), f"{differ} of {total} values differ from Aidge"
            print(f"aidge expanded {kind} {mode} {fmt}: {differ} of {total} values differ from Aidge")


def test_an_integer_conv_qconv_cannot_rebuild_stops_the_conversion(tmp_path):
    """Conv on int8 runs nowhere but in Aidge: one that cannot be rebuilt is a refusal (exit 4)
    naming the node and the requirement, with no output, never a model onnxruntime rejects."""
    fm = float_cnn("two_convs")
    src = str(tmp_path / "aidge.onnx")
    quantize_with_aidge(fm, src, rescale_inputs=True, qop=False, work=tmp_path)
    m = onnx.load(src)
    conv = next(n for n in m.graph.node if n.op_type == "Conv")
    bias = next(t for t in m.graph.initializer if t.name == conv.input[2])
    bias.CopyFrom(onnx.numpy_helper.from_array(np.clip(onnx.numpy_helper.to_array(bias), -128, 127).astype(np.int8), bias.name))
    onnx.save(m, src)
    dst = tmp_path / "out.onnx"
    r = run_qconv("convert", src, str(dst), "--format", "qop", "--opset", "21")
    assert r.returncode == 4
    errors = [l for l in r.stderr.splitlines() if l.startswith("qconv: error:")]
    assert errors == [f"qconv: error: {src}: {conv.name}: integer Conv not rebuilt (standard Conv takes no int8 input): "
                      "its bias is not a constant int32"]
    assert not dst.exists()


def aidge_qop_model(path: str) -> None:
    """The form of aidge-onnx 0.10.1's QLinearConv exporter (node_export/aidge_converters/
    qlinearconv.py), written by hand because set_to_qop(qdq_needed=True) raises in
    aidge-quantization 0.10.1: QuantizeLinear -> per-tensor QLinearConv (0-d scale and zero
    point initializers named <node>_x_scale ...; weights from QuantizeLinear(float w, 1/SF);
    an int32 bias Constant) -> DequantizeLinear, at opset 21."""
    rng = np.random.default_rng(5)
    sf = np.float32(53.0)  # Aidge's weight scaling factor: w_q = round(w * SF)
    w = (rng.integers(-127, 128, (6, 3, 3, 3)) / sf).astype(np.float32)
    scalar = lambda name, v, t: helper.make_tensor(name, t, [], [v])  # noqa: E731
    inits = [numpy_helper.from_array(w, "w_f"), scalar("w_inv_sf", 1 / sf, TensorProto.FLOAT),
             scalar("w_zp", 0, TensorProto.INT8), scalar("x_scale", 0.02, TensorProto.FLOAT),
             scalar("x_zp", 0, TensorProto.INT8), scalar("conv_x_scale", 0.02, TensorProto.FLOAT),
             scalar("conv_x_zero_point", 0, TensorProto.INT8), scalar("conv_w_scale", float(1 / sf), TensorProto.FLOAT),
             scalar("conv_w_zero_point", 0, TensorProto.INT8), scalar("conv_y_scale", 0.05, TensorProto.FLOAT),
             scalar("conv_y_zero_point", 0, TensorProto.INT8)]
    bias = numpy_helper.from_array(rng.integers(-3000, 3000, 6).astype(np.int32), "b")
    nodes = [helper.make_node("Constant", [], ["b_q"], value=bias),
             helper.make_node("QuantizeLinear", ["w_f", "w_inv_sf", "w_zp"], ["w_q"], name="w_quantizer"),
             helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zp"], ["x_q"], name="input_quantizer"),
             helper.make_node("QLinearConv", ["x_q", "conv_x_scale", "conv_x_zero_point", "w_q", "conv_w_scale",
                                              "conv_w_zero_point", "conv_y_scale", "conv_y_zero_point", "b_q"],
                              ["y_q"], name="conv", dilations=[1, 1], group=1, kernel_shape=[3, 3],
                              strides=[1, 1], pads=[1, 1, 1, 1]),
             helper.make_node("DequantizeLinear", ["y_q", "conv_y_scale", "conv_y_zero_point"], ["y"],
                              name="output_dequantizer")]
    g = helper.make_graph(nodes, "aidge_qop", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 8, 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)


@pytest.mark.parametrize("fmt", ["qdq", "qop"])
def test_aidge_qlinearconv_export_form_is_kept_and_its_weights_folded(fmt, tmp_path):
    src, dst = str(tmp_path / "aidge_qop.onnx"), str(tmp_path / f"out_{fmt}.onnx")
    aidge_qop_model(src)
    r = run_qconv("convert", src, dst, "--format", fmt, "-v")
    assert r.returncode == 0, r.stderr
    out = onnx.load(dst)
    onnx.checker.check_model(out, full_check=True)
    counts = op_counts(dst)
    # the weight quantizer and the bias Constant become int8 / int32 initializers; with --format
    # qop the QLinearConv, standard ONNX, stays as it is; with --format qdq it becomes
    # DQ(x), DQ(w), DQ(b) -> Conv -> Q (unfuse-qop)
    if fmt == "qop":
        assert counts == {"QuantizeLinear": 1, "QLinearConv": 1, "DequantizeLinear": 1}, counts
    else:
        assert counts == {"QuantizeLinear": 2, "Conv": 1, "DequantizeLinear": 4}, counts
    kinds = {t.name: t.data_type for t in out.graph.initializer}
    assert kinds["w_q"] == TensorProto.INT8 and kinds["b_q"] == TensorProto.INT32
    xs = tie_inputs(11, 0.02, (1, 3, 8, 8), spread=100)
    if fmt == "qop":
        for got, want in zip(executed(dst, xs), reference.outputs(src, xs)):
            np.testing.assert_array_equal(got, want)
    else:  # the QDQ form computes in float32: within one step of the QLinearConv, on near ties
        judge_qop(src, dst, xs)
