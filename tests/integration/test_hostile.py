"""Hostile and broken inputs (issue 4): the committed corpus (tests/hostile/corpus, made by
tests/hostile/make_corpus.py) and every external-data escape, built here on the file system.

For each: the documented exit code, a short message (at most 3 lines) naming the file and the
node or tensor, no crash, no output file, no temporary file left; for the escapes, strace shows
that nothing outside the model's folder was opened."""
import json
import os
import shutil

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import EXAMPLE, ROOT, data_file, run_qconv, run_traced, save_external

CORPUS = os.path.join(ROOT, "tests", "hostile", "corpus")
MANIFEST = json.load(open(os.path.join(CORPUS, "manifest.json")))


def check_refusal(r, src: str, out_dir, code: int, message: str) -> None:
    assert r.returncode == code, r.stderr
    lines = r.stderr.strip().splitlines()
    assert 1 <= len(lines) <= 3, r.stderr
    assert lines[-1].startswith(f"qconv: error: {src}: "), r.stderr
    assert message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "terminate" not in r.stderr


def test_the_corpus_has_25_kinds_or_more():
    assert len(MANIFEST) >= 25


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_corpus_case(name, tmp_path):
    src = str(tmp_path / f"{name}.onnx")
    shutil.copy(os.path.join(CORPUS, f"{name}.onnx"), src)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    r = run_qconv("convert", src, str(out_dir / "out.onnx"), "--format", "qop")
    check_refusal(r, src, out_dir, MANIFEST[name]["exit"], MANIFEST[name]["message"])
    assert os.listdir(out_dir) == []  # no output, no temporary file


@pytest.mark.parametrize("bias, why", [([5000.0, 1.0], "bias of output channel 0 is 5000 and does not fit int32"),
                                       ([float("nan"), 1.0], "bias of output channel 0 is nan")],  # the fuzzer's NaN
                         ids=["int32_overflow", "nan"])
def test_a_bias_qlinearconv_cannot_hold_leaves_the_conv_in_qdq_form(bias, why, tmp_path):
    """Once exit 4 (overflow) and exit 3 (NaN) for the whole model; now a selector condition:
    that conv stays QDQ, refused by name, and the model converts with the same numbers."""
    import sys
    sys.path.insert(0, os.path.join(ROOT, "tests", "hostile"))
    from make_corpus import conv_qdq
    from conftest import judge_qdq
    src, dst = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    onnx.save(conv_qdq(bias), src)
    r = run_qconv("convert", src, dst, "--format", "qop", "-v")
    assert r.returncode == 0, r.stderr
    assert f"qconv: note: {src}: conv_17: not fused: {why}" in r.stderr.splitlines()[0]
    out = onnx.load(dst)
    assert "QLinearConv" not in [n.op_type for n in out.graph.node]
    assert "Conv" in [n.op_type for n in out.graph.node]
    x = np.random.default_rng(0).standard_normal(tuple(d.dim_value for d in out.graph.input[0].type.tensor_type.shape.dim)).astype(np.float32)
    if not np.isnan(bias[0]):
        judge_qdq(src, dst, [x])


# --------------------------------------------------------------------------------------------
# External data escapes. The model's folder is tmp/model; a secret lies beside it in tmp/secret.

def weight_model(entries: dict[str, str]) -> onnx.ModelProto:
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[16])
    w.data_location = TensorProto.EXTERNAL
    for k, v in entries.items():
        w.external_data.add(key=k, value=v)
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    return m


def setup_escape(tmp_path, kind: str):
    model_dir, secret_dir = tmp_path / "model", tmp_path / "secret"
    model_dir.mkdir()
    secret_dir.mkdir()
    secret = secret_dir / "weights.bin"
    secret.write_bytes(np.arange(16, dtype=np.float32).tobytes())
    good = model_dir / "w.bin"
    good.write_bytes(np.arange(16, dtype=np.float32).tobytes())
    entries = {"location": "w.bin"}
    if kind == "absolute":
        entries = {"location": str(secret)}
    elif kind == "dotdot":
        entries = {"location": "../secret/weights.bin"}
    elif kind == "dotdot_inside":
        entries = {"location": "sub/../w.bin"}
        (model_dir / "sub").mkdir()
    elif kind == "symlink_file":
        os.symlink(secret, model_dir / "link.bin")
        entries = {"location": "link.bin"}
    elif kind == "symlink_folder":
        os.symlink(secret_dir, model_dir / "linkdir")
        entries = {"location": "linkdir/weights.bin"}
    elif kind == "hard_link":
        os.link(secret, model_dir / "hard.bin")
        entries = {"location": "hard.bin"}
    elif kind == "missing_file":
        entries = {"location": "nothing.bin"}
    elif kind == "empty_location":
        entries = {"location": ""}
    elif kind == "no_location":
        entries = {"offset": "0"}
    elif kind == "offset_outside":
        entries = {"location": "w.bin", "offset": "4096"}
    elif kind == "length_mismatch":
        entries = {"location": "w.bin", "length": "32"}
    elif kind == "absurd_length":
        entries = {"location": "w.bin", "length": "99999999999999999999"}
    elif kind == "negative_offset":
        entries = {"location": "w.bin", "offset": "-8"}
    elif kind == "fifo":
        os.mkfifo(model_dir / "pipe.bin")
        entries = {"location": "pipe.bin"}
    elif kind == "folder":
        (model_dir / "dir.bin").mkdir()
        entries = {"location": "dir.bin"}
    m = weight_model(entries)
    if kind == "duplicate_key":
        m.graph.initializer[0].external_data.add(key="location", value="../secret/weights.bin")
    src = model_dir / "in.onnx"
    src.write_bytes(m.SerializeToString())
    return str(src), str(secret_dir)


ESCAPES = {
    "absolute": "external data location '{secret}/weights.bin' is an absolute path",
    "dotdot": "external data location '../secret/weights.bin' contains '..'",
    "dotdot_inside": "external data location 'sub/../w.bin' contains '..'",
    "symlink_file": "external data location 'link.bin' is or passes through a symbolic link",
    "symlink_folder": "external data location 'linkdir/weights.bin' is or passes through a symbolic link",
    "hard_link": "external data location 'hard.bin' has 2 hard links",
    "missing_file": "external data location 'nothing.bin' cannot be opened: No such file or directory",
    "empty_location": "external data location '' is empty",
    "no_location": "external data has no location",
    "offset_outside": "external data range [4096, 4160) lies outside 'w.bin' (64 bytes)",
    "length_mismatch": "external data length 32 is not the 64 bytes the tensor's type and dims need",
    "absurd_length": "external data length '99999999999999999999' is not a non-negative decimal number",
    "negative_offset": "external data offset '-8' is not a non-negative decimal number",
    "duplicate_key": "external data lists the key 'location' twice",
    "fifo": "external data location 'pipe.bin' is not a regular file",
    "folder": "external data location 'dir.bin' is not a regular file",
}


@pytest.mark.parametrize("kind", sorted(ESCAPES))
def test_external_data_escape_is_refused_without_reading_outside(kind, tmp_path):
    src, secret_dir = setup_escape(tmp_path, kind)
    before = sorted(os.listdir(os.path.dirname(src)))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    trace = str(tmp_path / "trace")
    r = run_traced(trace, "open,openat,openat2", "convert", src, str(out_dir / "out.onnx"), "--format", "qop",
                   timeout=60)
    check_refusal(r, src, out_dir, 3, "initializer 'w': " + ESCAPES[kind].format(secret=secret_dir))
    assert os.listdir(out_dir) == []
    with open(trace) as f:
        opened = f.read()
    assert "secret" not in opened, opened  # nothing outside the model's folder was opened
    assert sorted(os.listdir(os.path.dirname(src))) == before  # nothing added beside the input


def test_writing_never_follows_a_symlink_at_the_output(tmp_path):
    """An output path that is a symlink to a file elsewhere: the link is replaced, its target
    is not written; the data file beside the output (a symlink at its name too) is made the same
    way, and a symlink named as an old data file of the output is neither followed nor removed."""
    target = tmp_path / "elsewhere.onnx"
    target.write_bytes(b"keep me")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    src = save_external(onnx.load(EXAMPLE), tmp_path)
    out = str(out_dir / "out.onnx")
    assert run_qconv("convert", src, out, "--format", "qop").returncode == 0
    data = os.path.basename(data_file(out))  # the name the same conversion writes again
    for name in os.listdir(out_dir):
        os.remove(out_dir / name)
    for name in ("out.onnx", data, "out.onnx.00000000000000ff.data"):
        os.symlink(target, out_dir / name)
    r = run_qconv("convert", src, out, "--format", "qop")
    assert r.returncode == 0, r.stderr
    assert target.read_bytes() == b"keep me"
    assert not os.path.islink(out_dir / "out.onnx") and not os.path.islink(out_dir / data)
    assert os.path.islink(out_dir / "out.onnx.00000000000000ff.data")
    assert sorted(os.listdir(out_dir)) == sorted(["out.onnx", data, "out.onnx.00000000000000ff.data"])


@pytest.mark.parametrize("args", [["--format", "qop"], ["--format", "qdq"], ["--target", "iree"]])
def test_a_weight_without_its_type_is_bad_input_not_a_crash(tmp_path, args):
    """Found by the fuzzer (issue 27): the float Aidge form with one weight's data_type cleared and
    absurd dims crashed libonnx's Conv shape inference when qconv declared the output's types.
    Types are now inferred only from well-formed inputs; the checker then calls the model
    invalid (exit 3)."""
    import test_aidge_float_form
    m = test_aidge_float_form.float_form()
    w = next(t for t in m.graph.initializer if t.name == "conv_b_w")
    w.data_type = TensorProto.UNDEFINED
    del w.dims[:]
    w.dims.extend([135094518981458933])
    src, dst = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    with open(src, "wb") as f:
        f.write(m.SerializeToString())
    r = run_qconv("convert", src, dst, *args)
    assert r.returncode == 3, r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith(f"qconv: error: {src}: invalid model: ")
    assert not os.path.exists(dst)


def test_a_conv_whose_weight_rank_is_not_its_inputs_is_no_crash(tmp_path):
    """Found by the fuzzer (issue 27): a rank-3 x under a rank-4 Conv weight, which the ONNX checker
    accepts, crashed libonnx's Conv shape inference when qconv declared the output's types; such a
    node's outputs now get no inferred shape (pipeline/declare_types.cpp, safeToInfer)."""
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node("Conv", ["xd", "w"], ["c"], name="conv"),
             helper.make_node("Relu", ["c"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(np.float32(0.1), "s"), numpy_helper.from_array(np.uint8(128), "z"),
                           numpy_helper.from_array(np.ones((2, 1, 1, 1), np.float32), "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    src, dst = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    onnx.save(m, src)
    for fmt in ("qop", "qdq"):
        r = run_qconv("convert", src, dst, "--format", fmt)
        assert r.returncode in (0, 3), r.stderr  # no signal: bad input at worst, never a crash


def test_a_contrib_pool_without_its_data_input_stays_named(tmp_path):
    """Found by the fuzzer (issue 28's CI, UBSan): unfuse-qop read the rank of an absent input."""
    from onnx import TensorProto, helper
    gap = helper.make_node("QLinearGlobalAveragePool", ["", "x_zp", "y_s", "y_zp"], ["y"], name="op", domain="com.microsoft",
                           channels_last=1)
    g = helper.make_graph([gap], "g", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 3, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 3, 1, 1])],
                          [helper.make_tensor("y_s", TensorProto.FLOAT, [], [0.1]), helper.make_tensor("x_zp", TensorProto.UINT8, [], [0]),
                           helper.make_tensor("y_zp", TensorProto.UINT8, [], [0])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 7
    src = str(tmp_path / "in.onnx")
    onnx.save(m, src)
    r = run_qconv("convert", src, str(tmp_path / "out.onnx"), "--format", "qdq", "-v")
    assert r.returncode == 0, r.stderr
    assert "op: stays com.microsoft QLinearGlobalAveragePool: channels_last is set and the input's rank is not known" in r.stderr


def test_a_bias_longer_than_the_weight_scales_is_read_within_them(tmp_path):
    """Found by the fuzzer (issue 47's CI, ASan): verify's bias check, run on the output, read a
    weight scale per bias value past the weight's two. The checker and onnxruntime's loader accept
    this model; the conv stays QDQ, refused by name, and verify reads within the scales."""
    w = numpy_helper.from_array(np.ones((2, 3, 1, 1), np.int8), "w")
    inits = [w, numpy_helper.from_array(np.array([1.0, 2.0, 3.0], np.float32), "b"),
             numpy_helper.from_array(np.float32(0.1), "sx"), numpy_helper.from_array(np.uint8(0), "zx"),
             numpy_helper.from_array(np.array([0.01, 0.02], np.float32), "sw"),
             numpy_helper.from_array(np.zeros(2, np.int8), "zw"),
             numpy_helper.from_array(np.float32(0.1), "sy"), numpy_helper.from_array(np.uint8(0), "zy")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"], name="qx"),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"], name="dqx"),
             helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wd"], name="dqw", axis=0),
             helper.make_node("Conv", ["xd", "wd", "b"], ["c"], name="conv_3"),
             helper.make_node("QuantizeLinear", ["c", "sy", "zy"], ["cq"], name="qy"),
             helper.make_node("DequantizeLinear", ["cq", "sy", "zy"], ["y"], name="dqy")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    src, dst = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    onnx.save(m, src)
    r = run_qconv("convert", src, dst, "--format", "qop", "-v")
    assert r.returncode == 0, r.stderr
    assert f"qconv: note: {src}: conv_3: not fused: bias does not have 2 values (one per output channel)" in r.stderr
    for args in (("convert", src, dst, "--format", "qdq"), ("verify", src), ("verify", dst)):
        r = run_qconv(*args)
        assert r.returncode == 0, r.stderr
