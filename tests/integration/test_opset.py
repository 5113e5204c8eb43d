"""--opset N: declare another ai.onnx opset in the output, only where no operator in the model
changed in between (lib/qconv/passes/common/opset_history.inc, generated from the onnx package's schemas).
The judge is onnxruntime: the re-declared model loads and computes what the original does."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import models
import reference
from conftest import executed, run_qconv

USAGE, UNSUPPORTED = 2, 4


def error_line(stderr: str) -> str:
    lines = [l for l in stderr.splitlines() if l.startswith("qconv: error:")]
    assert len(lines) == 1, stderr
    return lines[0]


def qdq_model(tmp_path, opset: int, *, axis: bool = False, clip: bool = False) -> str:
    """x -> Q -> DQ -> [Clip(0, 6)] -> y, per tensor or (axis=1) per channel."""
    s = np.array([0.05, 0.1, 0.2], np.float32) if axis else np.array(0.05, np.float32)
    z = np.zeros(s.shape, np.int8)
    inits = [onnx.numpy_helper.from_array(s, "s"), onnx.numpy_helper.from_array(z, "z")]
    kw = {"axis": 1} if axis else {}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="quant", **kw),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], name="dequant", **kw)]
    out = "d"
    if clip:
        inits += [onnx.numpy_helper.from_array(np.array(0, np.float32), "lo"),
                  onnx.numpy_helper.from_array(np.array(6, np.float32), "hi")]
        nodes.append(helper.make_node("Clip", ["d", "lo", "hi"], ["y"], name="clip6"))
        out = "y"
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 3, 4, 4])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    path = str(tmp_path / f"qdq{opset}.onnx")
    onnx.save(m, path)
    return path


def declared(path: str) -> int:
    return next(o.version for o in onnx.load(path).opset_import if o.domain in ("", "ai.onnx"))


@pytest.mark.parametrize("src_opset,target", [(13, 21), (21, 13), (13, 10)])
def test_opset_is_redeclared_when_no_operator_changed(tmp_path, src_opset, target):
    src = qdq_model(tmp_path, src_opset)
    dst = str(tmp_path / "out.onnx")
    r = run_qconv("convert", src, dst, "--format", "qdq", "--opset", str(target))
    assert r.returncode == 0, r.stderr
    assert declared(dst) == target
    xs = [np.random.default_rng(3).normal(0, 3, (1, 3, 4, 4)).astype(np.float32)]
    np.testing.assert_array_equal(executed(dst, xs)[0], reference.outputs(src, xs)[0])


def test_an_attribute_the_older_version_lacks_is_refused_by_name(tmp_path):
    src = qdq_model(tmp_path, 13, axis=True)
    dst = str(tmp_path / "out.onnx")
    r = run_qconv("convert", src, dst, "--format", "qdq", "--opset", "10")
    assert r.returncode == UNSUPPORTED
    assert error_line(r.stderr) == (
        f"qconv: error: {src}: quant: cannot declare opset 10 (the model declares 13): "
        "QuantizeLinear version 13 is in the way: the node sets attribute axis, which it added")
    assert not (tmp_path / "out.onnx").exists()


def test_a_changed_operator_is_refused_by_name(tmp_path):
    src = qdq_model(tmp_path, 13, clip=True)
    r = run_qconv("convert", src, str(tmp_path / "out.onnx"), "--format", "qdq", "--opset", "10")
    assert r.returncode == UNSUPPORTED
    assert "clip6: cannot declare opset 10 (the model declares 13): Clip version 11 is in the way: " \
           "attribute max removed; attribute min removed" in error_line(r.stderr)


def test_an_operator_younger_than_the_target_is_refused(tmp_path):
    src = qdq_model(tmp_path, 13)
    r = run_qconv("convert", src, str(tmp_path / "out.onnx"), "--format", "qdq", "--opset", "9")
    assert r.returncode == UNSUPPORTED
    assert "quant: cannot declare opset 9 (the model declares 13): QuantizeLinear does not exist at opset 9" \
           in error_line(r.stderr)


def resize_model(tmp_path, opset: int, *, sizes: bool, mode: str = "asymmetric") -> str:
    """x -> Q -> DQ -> Resize(nearest, x2) -> y as onnxruntime's quantizer leaves YOLO's upsampling
    at opset 11: an empty roi, and scales [1, 1, 2, 2] (or, sizes=True, an empty scales and sizes)."""
    f = onnx.numpy_helper.from_array
    inits = [f(np.array(0.05, np.float32), "s"), f(np.array(0, np.int8), "z"), f(np.zeros(0, np.float32), "roi")]
    if sizes:
        inits += [f(np.zeros(0, np.float32), "scales"), f(np.array([1, 3, 8, 8], np.int64), "sizes")]
    else:
        inits += [f(np.array([1, 1, 2, 2], np.float32), "scales")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="quant"),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], name="dequant"),
             helper.make_node("Resize", ["d", "roi", "scales"] + (["sizes"] if sizes else []), ["y"], name="up",
                              mode="nearest", coordinate_transformation_mode=mode, nearest_mode="floor")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    path = str(tmp_path / f"resize{opset}{'_sizes' if sizes else ''}.onnx")
    onnx.save(m, path)
    return path


@pytest.mark.parametrize("sizes", [False, True], ids=["scales", "sizes"])
def test_a_resize_crosses_version_13_both_ways_computing_the_same(tmp_path, sizes):
    """Version 13 made roi and scales optional and takes one of scales and sizes: raised, an empty
    scales beside sizes is dropped; lowered back, absent ones become empty tensors (11 needs them)."""
    src = resize_model(tmp_path, 11, sizes=sizes)
    xs = [np.random.default_rng(5).normal(0, 3, (1, 3, 4, 4)).astype(np.float32)]
    want = reference.outputs(src, xs)[0]
    up, down = str(tmp_path / "up.onnx"), str(tmp_path / "down.onnx")
    for a, b, opset in ((src, up, 13), (up, down, 11)):
        r = run_qconv("convert", a, b, "--format", "qdq", "--opset", str(opset))
        assert r.returncode == 0, r.stderr
        assert declared(b) == opset
        onnx.checker.check_model(onnx.load(b), full_check=True)
        np.testing.assert_array_equal(reference.outputs(b, xs)[0], want)
        np.testing.assert_array_equal(executed(b, xs)[0], want)
    resize = next(n for n in onnx.load(up).graph.node if n.op_type == "Resize")
    assert list(resize.input)[2:] == (["", "sizes"] if sizes else ["scales"])
    resize = next(n for n in onnx.load(down).graph.node if n.op_type == "Resize")
    assert all(resize.input[:3]), resize.input


def test_a_resize_in_a_mode_version_13_removed_is_refused_by_name(tmp_path):
    src = resize_model(tmp_path, 11, sizes=False, mode="tf_half_pixel_for_nn")
    r = run_qconv("convert", src, str(tmp_path / "out.onnx"), "--format", "qdq", "--opset", "13")
    assert r.returncode == UNSUPPORTED
    assert error_line(r.stderr) == (
        f"qconv: error: {src}: up: cannot declare opset 13 (the model declares 11): Resize version 13 is in the way: "
        "the node's coordinate_transformation_mode is tf_half_pixel_for_nn, which version 13 removed")
    assert not (tmp_path / "out.onnx").exists()


@pytest.mark.parametrize("value", ["99", "0", "x"])
def test_an_opset_qconv_does_not_know_is_a_usage_error(tmp_path, value):
    src = qdq_model(tmp_path, 13)
    r = run_qconv("convert", src, str(tmp_path / "out.onnx"), "--format", "qdq", "--opset", value)
    assert r.returncode == USAGE
    assert "opset" in error_line(r.stderr)
    assert not (tmp_path / "out.onnx").exists()


def test_the_whole_history_is_generated_from_the_schemas():
    """The table qconv checks against is what the onnx package says, version by version."""
    import os
    from conftest import ROOT
    text = open(os.path.join(ROOT, "lib", "qconv", "passes", "common", "opset_history.inc")).read()
    rows = [l for l in text.splitlines() if l.startswith("QCONV_OP_VERSION(")]
    want = {(s.name, s.since_version) for s in onnx.defs.get_all_schemas_with_history() if s.domain in ("", "ai.onnx")}
    got = {(l.split('"')[1], int(l.split(",")[1])) for l in rows}
    assert got == want
    assert 'QCONV_OP_VERSION("QuantizeLinear", 21, "", -1, -1, "block_size,output_dtype", "int16,int4,uint16,uint4")' in rows
