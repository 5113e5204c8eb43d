"""Real Aidge exports (aidge-* 0.10.1 from PyPI) -> standard ONNX, judged by Aidge's own executor.

Aidge's PTQ export (fold_graph=True) and its set_to_qop export run Conv on int8 tensors and
requantize with QuantizeLinear(acc, divisor): no runtime but Aidge's runs them. qconv rebuilds
them as QDQ with scales chained from the input quantizer. The judge is Aidge's CPU backend
running the quantized graph itself; onnxruntime runs qconv's output, which must give the same
int8 values.

Aidge declares opset 28, for which onnxruntime 1.32 has no QuantizeLinear kernel, so the test
declares opset 21 (the same Conv/Relu/MaxPool/GlobalAveragePool/QuantizeLinear semantics for
these types) before converting; qconv keeps a model's declared opset."""
import numpy as np
import onnx
import pytest

import models
from conftest import op_counts, outputs, run_qconv, session

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


def quantize_with_aidge(fm: onnx.ModelProto, path: str, *, rescale_inputs: bool, qop: bool, work):
    """Aidge PTQ (int8 weights and activations, int32 bias), export; returns Aidge's graph."""
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
    aq.quantize_network(g, calib, rescale_inputs=rescale_inputs, fold_graph=not qop)
    if qop:
        aq.set_to_qop(g)
    aidge_onnx.export_onnx(g, path)
    m = onnx.load(path)
    assert [(o.domain, o.version) for o in m.opset_import] == [("", 28)]  # what Aidge declares
    m.opset_import[0].version = 21
    m.ir_version = 10
    onnx.save(m, path)
    return g


def aidge_outputs(g, xs):
    sched = aidge_core.SequentialScheduler(g)
    node, idx = g.get_ordered_outputs()[0]
    got = []
    for x in xs:
        sched.forward(data=[aidge_core.Tensor(x)])
        got.append(np.array(node.get_operator().get_output(idx)).copy())
    return got


@pytest.mark.parametrize("kind", ["two_convs", "cnn"])
@pytest.mark.parametrize("export", ["ptq", "qop"])
def test_aidge_integer_export_matches_aidge(kind, export, tmp_path):
    """rescale_inputs=True: Aidge's own CPU backend has no kernel for a float input into its
    int8 Conv (rescale_inputs=False), so that export has no judge; see the next test."""
    rescale_inputs = True
    fm = float_cnn(kind)
    src = str(tmp_path / "aidge.onnx")
    g = quantize_with_aidge(fm, src, rescale_inputs=rescale_inputs, qop=export == "qop", work=tmp_path)
    convs = op_counts(src)["Conv"]
    xs = models.sample_inputs(fm, 6, seed=44)
    want = aidge_outputs(g, xs)
    assert want[0].dtype == np.int8
    for fmt in ("qdq", "qop"):
        dst = str(tmp_path / f"{fmt}.onnx")
        r = run_qconv("convert", src, dst, "--format", fmt, "-v")
        assert r.returncode == 0, r.stderr
        assert f"{convs} integer conv rebuilt as QDQ" in r.stderr
        out = onnx.load(dst)
        onnx.checker.check_model(out, full_check=True)
        if fmt == "qop":  # every conv reading a quantized input is fused
            assert op_counts(dst).get("QLinearConv", 0) == convs - (0 if rescale_inputs else 1)
        differ = total = 0
        for w, got in zip(want, outputs(session(dst), xs)):
            assert got.dtype == np.int8
            assert int(np.max(np.abs(got.astype(np.int32) - w.astype(np.int32)))) <= 1
            differ += int(np.sum(got != w))
            total += got.size
        # Aidge's executor requantizes by multiplying with 1/S where its export writes
        # QuantizeLinear(acc, S), a division: the two can round apart on near-ties, by one step.
        assert differ <= max(1, total // 100), f"{differ} of {total} values differ from Aidge"
        print(f"aidge {kind} {export} {fmt}: {differ} of {total} values differ from Aidge")


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
        [onnx.helper.make_tensor_value_info(q.output[0], onnx.TensorProto.INT8, None)],
        [t for t in m.graph.initializer if t.name in (conv.input[1], conv.input[2], q.input[1], q.input[2])]),
        opset_imports=m.opset_import)
    probe.ir_version = m.ir_version
    psrc, dst = str(tmp_path / "probe.onnx"), str(tmp_path / "probe_qdq.onnx")
    onnx.save(probe, psrc)
    r = run_qconv("convert", psrc, dst, "--format", "qdq", "-v")
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
    np.testing.assert_array_equal(outputs(session(dst), [x])[0], want)
