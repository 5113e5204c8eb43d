"""Messages (issue 16, deliverable 6): a name or location from the model is shown, never sent.
Control characters come out as \\n, \\xNN, ... (no forged line, no terminal escape), each line is
cut to a bounded length, and a NUL in a location is shown instead of ending the message."""
import os
import stat

import numpy as np
import pytest
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import EXAMPLE, data_file, run_qconv, run_qconv_limited, save_external, session


def dequantize_model(name: str, scale: float = 0.0) -> onnx.ModelProto:
    """One DequantizeLinear named `name`; scale 0 makes validate refuse it, naming the node."""
    inits = [numpy_helper.from_array(np.float32(scale), "s"), numpy_helper.from_array(np.uint8(0), "z")]
    g = helper.make_graph([helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], name=name)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.UINT8, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    return m


def convert_bytes(path: str, tmp_path) -> tuple[int, bytes]:
    import subprocess
    from conftest import qconv_bin
    r = subprocess.run([qconv_bin(), "convert", path, str(tmp_path / "out.onnx"), "--format", "qop"], capture_output=True)
    return r.returncode, r.stderr


def test_control_characters_in_a_node_name_are_shown_not_sent(tmp_path):
    src = str(tmp_path / "evil.onnx")
    onnx.save(dequantize_model("evil\nqconv: error: FAKE\x1b[31m\x07\r\x7f\u009b"), src)
    rc, err = convert_bytes(src, tmp_path)
    assert rc == 3
    assert err.count(b"\n") == 1 and err.startswith(b"qconv: error: ")  # one line: nothing forged
    for raw in (b"\x1b", b"\x07", b"\r", b"\x7f", b"\xc2\x9b"):
        assert raw not in err
    assert b"node 'evil\\nqconv: error: FAKE\\x1b[31m\\x07\\r\\x7f\\u009b' (DequantizeLinear)" in err


def test_a_huge_name_gives_a_bounded_line(tmp_path):
    src = str(tmp_path / "long.onnx")
    onnx.save(dequantize_model("n" * 10_000_000), src)
    rc, err = convert_bytes(src, tmp_path)
    assert rc == 3
    assert len(err) < 4200 and err.count(b"\n") == 1
    assert b" more bytes]" in err


def test_a_nul_in_an_external_location_is_shown(tmp_path):
    m = dequantize_model("dq", 0.5)
    t = m.graph.initializer[0]
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    e = t.external_data.add()
    e.key, e.value = "location", "a\x00b.data"
    src = str(tmp_path / "nul.onnx")
    onnx.save(m, src)
    rc, err = convert_bytes(src, tmp_path)
    assert rc == 3
    assert b"external data location 'a\\x00b.data' contains a NUL byte" in err
    assert b"\x00" not in err


def test_a_bad_flag_value_is_shown_not_sent(tmp_path):
    r = run_qconv("convert", "in.onnx", "out.onnx", "--format", "qop\x1b[2J")
    assert r.returncode == 2
    assert "\x1b" not in r.stderr and "\\x1b[2J" in r.stderr


# ---- usage errors and paths (issue 16, deliverables 3 and 8) ----

def small_model(tmp_path) -> str:
    src = str(tmp_path / "in.onnx")
    onnx.save(dequantize_model("dq", 0.5), src)
    return src


def test_opset_out_of_range_is_a_short_usage_error(tmp_path):
    for value in ("0", "-3", "99"):
        r = run_qconv("convert", small_model(tmp_path), str(tmp_path / "o.onnx"), "--format", "qop", "--opset", value)
        assert r.returncode == 2
        assert r.stderr == f"qconv: error: --opset: Value {value} not in range 1 to 28 ('qconv help' lists the flags)\n"


@pytest.mark.parametrize("data", ["inline", "external"])
def test_an_output_path_naming_a_folder_or_nothing_is_a_usage_error(tmp_path, data):
    """Exit 2 before anything is written: no model, and (an input with external data) no data
    file beside the folder either."""
    (tmp_path / "d").mkdir()
    (tmp_path / "src").mkdir()
    src = small_model(tmp_path / "src") if data == "inline" else save_external(onnx.load(EXAMPLE), tmp_path / "src")
    before = sorted(os.listdir(tmp_path))
    for out in (str(tmp_path / "d") + "/", ".", "..", "", str(tmp_path / "d")):
        r = run_qconv("convert", src, out, "--format", "qop")
        assert r.returncode == 2, (out, r.stderr)
        assert "give a file name" in r.stderr and len(r.stderr) < 300
    assert os.listdir(tmp_path / "d") == [] and sorted(os.listdir(tmp_path)) == before


def test_only_regular_files_are_replaced(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "null_link.onnx"
    link.symlink_to("/dev/null")
    for out, kind in ((str(fifo), "a FIFO"), (str(link), "a character device")):
        r = run_qconv("convert", small_model(tmp_path), out, "--format", "qop")
        assert r.returncode == 5, r.stderr
        assert f"the output is {kind}, not a regular file; qconv replaces only regular files" in r.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and os.readlink(link) == "/dev/null"
    assert not (tmp_path / "fifo.data").exists() and not (tmp_path / "null_link.onnx.data").exists()
    assert sorted(os.listdir(tmp_path)) == ["fifo", "in.onnx", "null_link.onnx"]


def test_a_fifo_as_input_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "in.onnx"
    os.mkfifo(fifo)
    r = run_qconv("convert", str(fifo), str(tmp_path / "o.onnx"), "--format", "qop")  # no writer: open must not block
    assert r.returncode == 3
    assert "not a regular file (a FIFO); qconv reads models from regular files" in r.stderr


@pytest.mark.skipif("ASAN_OPTIONS" in os.environ, reason="AddressSanitizer reserves terabytes of address space")
def test_memory_exhaustion_is_its_own_exit_code(tmp_path):
    """Under an address-space limit the conversion runs out of memory: exit 6 with a message
    (docs/cli.md), never 70 (a bug), and nothing written. The model: 40 MB of weights, in 40 MB
    of address space with the libraries' mappings."""
    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, (10240, 4096)).astype(np.int8)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.float32(0.01), "s"),
             numpy_helper.from_array(np.int8(0), "z")]
    g = helper.make_graph([helper.make_node("DequantizeLinear", ["w", "s", "z"], ["y"], name="dq")], "g", [],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [10240, 4096])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    src, dst = str(tmp_path / "big.onnx"), str(tmp_path / "out.onnx")
    onnx.save(m, src)
    r = run_qconv_limited(40 << 20, "convert", src, dst, "--format", "qop")
    assert r.returncode == 6, r.stderr
    assert "out of memory: the conversion needs more memory than this process may have" in r.stderr
    assert sorted(os.listdir(tmp_path)) == ["big.onnx"]


# ---- bounded cost (issue 16, deliverable 5) ----

@pytest.mark.skipif("ASAN_OPTIONS" in os.environ, reason="AddressSanitizer reserves terabytes of address space")
def test_folding_never_builds_a_tensor_much_larger_than_its_inputs(tmp_path):
    """A 128 KB model whose Mul of constants broadcasts [16384, 1] x [1, 16384] (1 GiB of floats):
    fold-producers leaves it (said with -vv) instead of computing it, so the conversion runs in
    200 MB of address space."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.normal(0, 1, (16384, 1)).astype(np.float32), "a"),
             numpy_helper.from_array(rng.normal(0, 1, (1, 16384)).astype(np.float32), "b")]
    nodes = [helper.make_node("Mul", ["a", "b"], ["ab"], name="outer"),
             helper.make_node("Add", ["x", "ab"], ["y"], name="add")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16384, 16384])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16384, 16384])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    src, dst = str(tmp_path / "bomb.onnx"), str(tmp_path / "out.onnx")
    onnx.save(m, src)
    r = run_qconv_limited(200 << 20, "convert", src, dst, "--format", "qdq", "-vv")
    assert r.returncode == 0, r.stderr
    assert "outer: not folded: the result (268435456 values) would be larger than its inputs (65536 bytes at most)" in r.stderr
    assert [n.op_type for n in onnx.load(dst).graph.node] == ["Mul", "Add"]


# ---- validation sees the values the passes will see (issue 16, deliverable 7) ----

def scale_model(scale_tensor: onnx.TensorProto | None, constant_node: bool) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.uint8(0), "z")]
    nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], name="dq")]
    if constant_node:
        nodes.insert(0, helper.make_node("Constant", [], ["s"], name="scale_const", value=scale_tensor))
    else:
        inits.append(scale_tensor)
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.UINT8, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT if scale_tensor.data_type == 1 else
                                                         scale_tensor.data_type, [2])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m


@pytest.mark.parametrize("value", [0.0, float("nan")])
@pytest.mark.parametrize("where", ["constant_node", "float16", "bfloat16"])
def test_a_zero_or_nan_scale_is_bad_input_wherever_it_comes_from(value, where, tmp_path):
    if where == "constant_node":
        t, const = numpy_helper.from_array(np.float32(value), "s"), True
    elif where == "float16":
        t, const = numpy_helper.from_array(np.float16(value), "s"), False
    else:
        t = helper.make_tensor("s", TensorProto.BFLOAT16, [], [value])
        const = False
    src = str(tmp_path / "in.onnx")
    onnx.save(scale_model(t, const), src)
    r = run_qconv("convert", src, str(tmp_path / "out.onnx"), "--format", "qop")
    assert r.returncode == 3, r.stderr
    assert "node 'dq' (DequantizeLinear): scale " in r.stderr and "is not positive and finite" in r.stderr
    assert not (tmp_path / "out.onnx").exists()


@pytest.mark.parametrize("elem,name,version", [(TensorProto.INT2, "int2", 25), (TensorProto.UINT2, "uint2", 25),
                                               (TensorProto.FLOAT4E2M1, "float4e2m1", 23)])
@pytest.mark.parametrize("op", ["QuantizeLinear", "DequantizeLinear"])
def test_opset_redeclaration_judges_element_types_too(elem, name, version, op, tmp_path):
    """Q/DQ on int2, uint2 or float4e2m1 need opset 25 / 23: declaring 21 is refused (exit 4),
    naming the type. These types are newer than the ONNX 1.12 protobuf classes qconv links."""
    s = numpy_helper.from_array(np.float32(0.5), "s")
    if op == "QuantizeLinear":
        node = helper.make_node(op, ["x", "s"], ["y"], name="n", output_dtype=elem)
        ins, outs, inits = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])], [
            helper.make_tensor_value_info("y", elem, [4])], [s]
        role = "y"
    else:
        node = helper.make_node(op, ["x", "s", "z"], ["y"], name="n")
        x = helper.make_tensor("x", elem, [4], [1, 0, 1, 0])
        ins, outs, inits = [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [x, s, helper.make_tensor("z", elem, [], [0])]
        role = "x"
    m = helper.make_model(helper.make_graph([node], "g", ins, outs, inits), opset_imports=[helper.make_opsetid("", 25)])
    m.ir_version = 13
    src = str(tmp_path / "in.onnx")
    onnx.save(m, src)
    assert run_qconv("convert", src, str(tmp_path / "same.onnx"), "--format", "qdq").returncode == 0
    r = run_qconv("convert", src, str(tmp_path / "out.onnx"), "--format", "qdq", "--opset", "21")
    assert r.returncode == 4, r.stderr
    assert f"{op} version {version} is in the way: '{role}' is {name}, accepted on one side only" in r.stderr
    assert not (tmp_path / "out.onnx").exists()


@pytest.mark.parametrize("name", ["m.onnx.data", "m.onnx.0123456789abcdef.data"])
def test_the_output_data_file_never_replaces_or_removes_the_input(tmp_path, name):
    """An input model named m.onnx.data (the name an output's data file once had), or named as
    a data file of m.onnx's, converted to m.onnx: the output's data file has a name of its own,
    and the input is neither replaced nor removed as a stale data file."""
    src = save_external(onnx.load(EXAMPLE), tmp_path, name=name, location="w.bin")
    before = {p: (tmp_path / p).read_bytes() for p in (name, "w.bin")}
    out = str(tmp_path / "m.onnx")
    r = run_qconv("convert", src, out, "--format", "qop")
    assert r.returncode == 0, r.stderr
    assert {p: (tmp_path / p).read_bytes() for p in (name, "w.bin")} == before
    assert sorted(os.listdir(tmp_path)) == sorted([name, "w.bin", "m.onnx", os.path.basename(data_file(out))])
    session(out)


@pytest.mark.parametrize("fmt", ["qop", "qdq"])
def test_no_standard_qdq_is_written_below_opset_10(fmt, tmp_path):
    """Found by the fuzzer: a com.microsoft DequantizeLinear in an opset-5 model was lowered to the
    standard op, which opset 5 does not have. Below opset 10 it stays, said why."""
    inits = [numpy_helper.from_array(np.float32(0.5), "s"), numpy_helper.from_array(np.uint8(3), "z")]
    nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["f"], domain="com.microsoft", name="ms_dq"),
             helper.make_node("Relu", ["f"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.UINT8, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 5), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 7
    src, dst = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    onnx.save(m, src)
    r = run_qconv("convert", src, dst, "--format", fmt, "-v")
    assert r.returncode == 0, r.stderr
    assert "ms_dq: stays com.microsoft: the standard DequantizeLinear needs opset 10, the model has 5" in r.stderr
    out = onnx.load(dst)
    assert [(n.domain, n.op_type) for n in out.graph.node] == [("com.microsoft", "DequantizeLinear"), ("", "Relu")]
    onnx.checker.check_model(out)


# ---- issue 36, item 6: messages say what is true ----

def test_an_empty_target_is_named_as_such(tmp_path):
    for args in (["convert", EXAMPLE, str(tmp_path / "o.onnx")], ["verify", EXAMPLE], ["inspect", EXAMPLE]):
        r = run_qconv(*args, "--target", "")
        assert r.returncode == 2, r.stderr
        assert r.stderr.startswith("qconv: error: --target '': no such target; qconv knows onnxruntime, tensorrt,"), r.stderr
        assert "give --format" not in r.stderr


@pytest.mark.parametrize("args", [["verify", EXAMPLE, "--frob"], ["verify", EXAMPLE, "--ignore", "bogus"], ["verify"],
                                  ["verify", EXAMPLE, EXAMPLE], ["inspect", EXAMPLE, "--frob"], ["inspect"],
                                  ["verify", EXAMPLE, "--target", ""], ["verify", EXAMPLE, "--target", "bogus"]],
                         ids=["verify-unknown-flag", "verify-ignore-bogus", "verify-no-model", "verify-two-models",
                              "inspect-unknown-flag", "inspect-no-model", "verify-empty-target", "verify-unknown-target"])
def test_json_usage_errors_are_one_object_too(args):
    """--json printed nothing on stdout for some usage errors and an object for others (29f6ac7)."""
    import json
    r = run_qconv(*args, "--json")
    assert r.returncode == 2, r.stderr
    j = json.loads(r.stdout)
    assert j[f"qconv_{args[0]}"] == 1 and j["exit_code"] == 2
    assert j["error"] == r.stderr.strip().removeprefix("qconv: error: ")


def per_channel_and_blocked(path) -> str:
    """A per-channel weight DequantizeLinear and a blocked one (opset 21), each feeding a MatMul."""
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.integers(-100, 100, (4, 4)).astype(np.int8), "w"),
             numpy_helper.from_array(np.full(4, 0.02, np.float32), "ws"),
             numpy_helper.from_array(rng.integers(-100, 100, (32, 4)).astype(np.int8), "b"),
             numpy_helper.from_array(np.full((2, 4), 0.02, np.float32), "bs")]
    nodes = [helper.make_node("DequantizeLinear", ["w", "ws"], ["wf"], "dq_channel", axis=1),
             helper.make_node("MatMul", ["x", "wf"], ["h"], "mm1"),
             helper.make_node("DequantizeLinear", ["b", "bs"], ["bf"], "dq_blocked", axis=0, block_size=16),
             helper.make_node("MatMul", ["x32", "bf"], ["y"], "mm2")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
                                       helper.make_tensor_value_info("x32", TensorProto.FLOAT, [1, 32])],
                          [helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, 4]),
                           helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10), path)
    return path


def test_aidge_refusals_name_blocks_as_blocks_and_suggest_approximate_only_where_it_helps(tmp_path):
    src = per_channel_and_blocked(str(tmp_path / "m.onnx"))
    r = run_qconv("verify", src, "--target", "aidge")
    assert "dq_blocked: error: target: not run by --target aidge: it dequantizes in blocks: Aidge" in r.stdout, r.stdout
    assert "dq_channel: error: target: not run by --target aidge: it dequantizes per channel (--approximate requantizes" in r.stdout
    r = run_qconv("convert", src, str(tmp_path / "o.onnx"), "--target", "aidge", "--approximate", "-v")
    assert r.returncode == 4, r.stderr
    assert "dq_blocked: not run by --target aidge: it dequantizes in blocks" in r.stderr, r.stderr
    assert "--approximate requantizes" not in r.stderr  # it was given
