"""--report FILE.json and batches (`convert --out-dir DIR IN... -j N`): issue 17, lines 4 and 5.

The report's schema is in docs/cli.md ("--report"); these tests hold its keys to that list.
A batch's outputs are judged against lone conversions of the same inputs: byte for byte."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import data_file, op_counts, qconv_bin, run_qconv, saturating_convs, save_external

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLE = os.path.join(ROOT, "test_data", "examples", "small_cnn_qdq.onnx")
NNCF = os.path.join(ROOT, "test_data", "nncf", "two_conv_fq.onnx")

REPORT_KEYS = ["qconv_report", "command", "format", "target", "exit_code", "ms", "items"]
ITEM_KEYS = ["input", "output", "data_file", "exit_code", "error", "error_node", "summary", "dialects", "quantized_tensors", "rewritten", "refusals", "approximations",
             "warnings", "notes", "nodes", "graph", "output_nodes", "counts", "stages"]


def read_report(path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def refused_model(folder) -> str:
    """A valid model qconv refuses (exit 4): an operator with no standard form."""
    node = helper.make_node("BFPQuantizeDequantize", ["x"], ["y"], domain="com.amd.quark", name="bfp_1")
    g = helper.make_graph([node], "bfp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.amd.quark", 1)])
    m.ir_version = 7
    path = os.path.join(folder, "refused.onnx")
    onnx.save(m, path)
    return path


def external_model(folder) -> str:
    """A QDQ weight kept as external data."""
    rng = np.random.default_rng(3)
    w = rng.integers(-127, 128, (64, 64)).astype(np.int8)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.float32(0.02), "s"),
             numpy_helper.from_array(np.int8(0), "z")]
    nodes = [helper.make_node("DequantizeLinear", ["w", "s", "z"], ["wf"], name="dq"),
             helper.make_node("MatMul", ["x", "wf"], ["y"], name="mm")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    return save_external(m, folder, name="ext.onnx", location="ext.onnx.data")


# ---- --report on a lone conversion ----

def test_each_node_of_the_input_is_in_the_output_or_absorbed_by_the_group_that_took_it(tmp_path):
    """A rewritten group names the nodes its action removed besides the one it was found at
    (`absorbed`): a fused Conv's DequantizeLinears and QuantizeLinear, move-on-int8's Q/DQ pair. So
    every node of the input is in the output under its name, or the root or an absorbed node of a
    group: what a per-node view of the conversion reads (issue 50)."""
    out, rep = str(tmp_path / "out.onnx"), str(tmp_path / "r.json")
    r = run_qconv("convert", EXAMPLE, out, "--format", "qop", "--report", rep, "-q")
    assert r.returncode == 0, r.stderr
    [item] = read_report(rep)["items"]
    assert all(list(g) == ["pass", "node", "op", "kept", "became", "absorbed"] for g in item["rewritten"])
    absorbed = [a for g in item["rewritten"] for a in g["absorbed"]]
    assert len(absorbed) == len(set(absorbed))  # each went once
    removed_roots = {g["node"] for g in item["rewritten"] if not g["kept"]}
    kept = {n.name for n in onnx.load(out).graph.node}
    for n in onnx.load(EXAMPLE).graph.node:
        assert (n.name in kept) != (n.name in absorbed), n.name
    for g in item["rewritten"]:
        assert not set(g["absorbed"]) & kept and g["node"] not in g["absorbed"]
        if g["pass"] == "fuse-qlinear-conv":  # x, w (and b) DequantizeLinears, the QuantizeLinear after
            ops = sorted(a.rsplit("_", 1)[1] for a in g["absorbed"])
            assert ops.count("QuantizeLinear") == 1 and ops.count("DequantizeLinear") >= 2, g
    assert removed_roots <= kept  # a fused Conv's QLinearConv took its name


def test_the_report_of_a_conversion_lists_groups_refusals_and_stages(tmp_path):
    out, rep = str(tmp_path / "out.onnx"), str(tmp_path / "r.json")
    r = run_qconv("convert", EXAMPLE, out, "--format", "qop", "--report", rep, "-v")
    assert r.returncode == 0, r.stderr
    j = read_report(rep)
    assert list(j) == REPORT_KEYS
    assert (j["qconv_report"], j["command"], j["format"], j["exit_code"]) == (1, "convert", "qop", 0)
    [item] = j["items"]
    assert list(item) == ITEM_KEYS
    assert (item["input"], item["output"], item["exit_code"], item["error"], item["data_file"]) == (
        EXAMPLE, out, 0, None, None)
    convs = [n.name for n in onnx.load(EXAMPLE).graph.node if n.op_type == "Conv"]
    fused = [g for g in item["rewritten"] if g["pass"] == "fuse-qlinear-conv"]
    assert len(fused) == op_counts(out)["QLinearConv"] == len(convs)
    assert all(g["op"] == "Conv" and g["became"] == ["QLinearConv"] and not g["kept"] for g in fused)
    [moved] = [g for g in item["rewritten"] if g["pass"] == "move-on-int8"]
    assert (moved["op"], moved["kept"], moved["became"]) == ("MaxPool", True, [])
    assert {g["node"] for g in fused} == {n.name for n in onnx.load(out).graph.node if n.op_type == "QLinearConv"}
    # each refusal as stderr says it with -v: "qconv: note: <input>: <node>: <reason>"
    assert item["refusals"], item
    for f in item["refusals"]:
        assert f"qconv: note: {EXAMPLE}: {f['node']}: {f['reason']}" in r.stderr.splitlines()
        assert f["kind"] in ("refused", "unconvertible") and f["pass"]
    assert [w["node"] for w in item["warnings"]
            if w["pass"] == "check-saturation" and w["node"] != EXAMPLE] == saturating_convs(EXAMPLE) != []
    stages = [s["name"] for s in item["stages"]]
    assert stages[:2] == ["read", "import"] and stages[-4:] == ["emit", "write", "check", "commit"]
    assert "fuse-qlinear-conv" in stages
    assert all(s["ms"] >= 0 for s in item["stages"])
    assert item["counts"]["QLinearConv"] == len(convs)


def test_the_report_lists_each_approximation(tmp_path):
    out, rep = str(tmp_path / "out.onnx"), str(tmp_path / "r.json")
    r = run_qconv("convert", NNCF, out, "--format", "qdq", "--approximate", "--report", rep)
    assert r.returncode == 0, r.stderr
    [item] = read_report(rep)["items"]
    approx = item["approximations"]
    assert len(approx) >= 1
    meta = {p.key: p.value for p in onnx.load(out).metadata_props}["qconv.approximations"].splitlines()
    assert [f"{a['node']}: {a['what']}" for a in approx] == meta
    assert all(a["pass"] == "lower-fake-quantize" for a in approx)


@pytest.mark.parametrize("case", ["unreadable", "refused"])
def test_a_failed_conversion_is_reported_with_its_exit_code(tmp_path, case):
    if case == "unreadable":
        src = str(tmp_path / "junk.onnx")
        with open(src, "wb") as f:
            f.write(b"junk")
        code = 3
    else:
        src, code = refused_model(str(tmp_path)), 4
    out, rep = str(tmp_path / "out.onnx"), str(tmp_path / "r.json")
    r = run_qconv("convert", src, out, "--format", "qdq", "--report", rep)
    assert r.returncode == code
    j = read_report(rep)
    assert j["exit_code"] == code
    [item] = j["items"]
    assert item["exit_code"] == code
    assert f"qconv: error: {item['error']}" in r.stderr.splitlines()
    assert item["error"].startswith(src)
    assert not os.path.exists(out)


def test_a_report_that_cannot_be_written_is_exit_5_and_the_output_stays(tmp_path):
    out = str(tmp_path / "out.onnx")
    r = run_qconv("convert", EXAMPLE, out, "--format", "qop", "--report", str(tmp_path / "no" / "r.json"))
    assert r.returncode == 5
    assert "r.json" in r.stderr
    assert os.path.exists(out)


@pytest.mark.parametrize("which", ["input", "output", "batch-output"])
def test_a_report_naming_an_input_or_output_is_a_usage_error(tmp_path, which):
    src = str(tmp_path / "in.onnx")
    shutil.copy(EXAMPLE, src)
    with open(src, "rb") as f:
        original = f.read()
    out = str(tmp_path / "out.onnx")
    if which == "batch-output":
        os.makedirs(tmp_path / "d")
        r = run_qconv("convert", "--format", "qop", "--out-dir", str(tmp_path / "d"), src,
                      "--report", str(tmp_path / "d" / "in.onnx"))
    else:
        r = run_qconv("convert", src, out, "--format", "qop", "--report", src if which == "input" else out)
    assert r.returncode == 2
    assert "names an input or an output of this run" in r.stderr
    with open(src, "rb") as f:
        assert f.read() == original
    assert not os.path.exists(out) and not os.path.exists(tmp_path / "d" / "in.onnx")


def test_the_report_is_deterministic_but_for_times(tmp_path):
    def strip(j):
        j.pop("ms")
        for it in j["items"]:
            it.pop("stages")
        return j
    a, b = str(tmp_path / "a.json"), str(tmp_path / "b.json")
    for rep in (a, b):
        assert run_qconv("convert", EXAMPLE, str(tmp_path / "o.onnx"), "--format", "qop", "--report", rep).returncode == 0
    assert strip(read_report(a)) == strip(read_report(b))


# ---- batches ----

def lone(src: str, folder: str, *flags: str) -> str:
    os.makedirs(folder, exist_ok=True)
    out = os.path.join(folder, os.path.basename(src))
    r = run_qconv("convert", src, out, *flags)
    assert r.returncode == 0, r.stderr
    return out


def same_pair(a: str, b: str) -> None:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        assert fa.read() == fb.read(), (a, b)
    da, db = data_file(a), data_file(b)
    assert (da is None) == (db is None)
    if da:
        assert os.path.basename(da) == os.path.basename(db)
        with open(da, "rb") as fa, open(db, "rb") as fb:
            assert fa.read() == fb.read()


@pytest.mark.parametrize("jobs", ["1", "3"])
def test_a_batch_writes_what_lone_conversions_write_and_goes_on_past_bad_models(tmp_path, quantized, jobs):
    ins = tmp_path / "in"
    ins.mkdir()
    good = [EXAMPLE, NNCF, external_model(str(ins))]
    for case in [("small_cnn", True, "relu"), ("resnet_style", False, "relu")]:
        dst = str(ins / (os.path.basename(quantized(case))))
        shutil.copy(quantized(case), dst)
        good.append(dst)
    junk = str(ins / "junk.onnx")
    with open(junk, "wb") as f:
        f.write(b"\x08\x07junk")
    refused = refused_model(str(ins))
    inputs = [good[0], junk, *good[1:3], refused, *good[3:]]
    out_dir, rep = tmp_path / "out", str(tmp_path / "batch.json")
    out_dir.mkdir()
    r = run_qconv("convert", "--format", "qop", "--out-dir", str(out_dir), "-j", jobs, "--report", rep, *inputs)
    assert r.returncode == 4, r.stderr  # the greatest of 0, 3 and 4
    for src in good:
        same_pair(str(out_dir / os.path.basename(src)), lone(src, str(tmp_path / "lone"), "--format", "qop"))
    assert not (out_dir / "junk.onnx").exists() and not (out_dir / "refused.onnx").exists()
    assert sorted(os.listdir(out_dir)) == sorted([os.path.basename(s) for s in good] +
                                                 [os.path.basename(data_file(str(out_dir / "ext.onnx")))])
    j = read_report(rep)
    assert j["exit_code"] == 4
    assert [i["input"] for i in j["items"]] == inputs
    assert [i["exit_code"] for i in j["items"]] == [0, 3, 0, 0, 4, 0, 0]
    assert j["items"][3]["data_file"] == data_file(str(out_dir / "ext.onnx"))
    # every line of a batch names its input
    errors = [line for line in r.stderr.splitlines()
              if line.startswith("qconv: error: ") and not line.startswith("qconv: error: batch: ")]
    assert sorted(errors) == sorted([f"qconv: error: {i['error']}" for i in j["items"] if i["error"]])
    assert all(line.startswith(f"qconv: error: {junk}: ") or line.startswith(f"qconv: error: {refused}: ")
               for line in errors)
    for line in r.stderr.splitlines()[:-1]:
        assert any(line.split(": ", 2)[2].startswith(src + ": ") for src in inputs), line
    assert r.stderr.splitlines()[-1] == f"qconv: error: batch: 5 of 7 models converted into {out_dir}, 2 failed (exit 4)"


def test_a_batch_exit_code_is_the_greatest_of_its_items(tmp_path):
    junk = str(tmp_path / "junk.onnx")
    with open(junk, "wb") as f:
        f.write(b"junk")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    r = run_qconv("convert", "--format", "qop", "--out-dir", str(out_dir), EXAMPLE, junk)
    assert r.returncode == 3
    r = run_qconv("convert", "--format", "qop", "--out-dir", str(out_dir), EXAMPLE, NNCF)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("case", ["same-name", "no-folder", "dump", "no-input", "three-without-out-dir"])
def test_a_batch_that_cannot_start_is_a_usage_error_and_writes_nothing(tmp_path, case):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    other = tmp_path / "other"
    other.mkdir()
    twin = str(other / os.path.basename(EXAMPLE))
    shutil.copy(EXAMPLE, twin)
    args = {
        "same-name": ["--out-dir", str(out_dir), EXAMPLE, twin],
        "no-folder": ["--out-dir", str(tmp_path / "missing"), EXAMPLE],
        "dump": ["--out-dir", str(out_dir), "--dump", EXAMPLE],
        "no-input": ["--out-dir", str(out_dir)],
        "three-without-out-dir": [EXAMPLE, NNCF, str(out_dir / "x.onnx")],
    }[case]
    r = run_qconv("convert", "--format", "qop", *args)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("qconv: error: ")
    expected = {
        "same-name": f"{EXAMPLE} and {twin} would both be written to {out_dir}/small_cnn_qdq.onnx",
        "no-folder": f"{tmp_path / 'missing'}: --out-dir names no folder",
        "dump": "--dump prints one conversion's IR: it does not go with --out-dir",
        "no-input": "",
        "three-without-out-dir": "convert takes IN OUT, or --out-dir DIR IN...",
    }[case]
    assert expected in r.stderr
    assert os.listdir(out_dir) == []


def test_a_signal_never_leaves_a_batch_output_between_its_renames(tmp_path):
    """SIGTERM at ten instants of a -j 2 batch of 30 models: the process dies of the signal, and
    each output there is whole, byte-identical to a lone conversion; no temporary is left."""
    ins = tmp_path / "in"
    ins.mkdir()
    srcs = []
    for i in range(30):
        dst = str(ins / f"m{i:02d}.onnx")
        shutil.copy(EXAMPLE if i % 2 else NNCF, dst)
        srcs.append(dst)
    want = {os.path.basename(s): lone(s, str(tmp_path / "lone"), "--format", "qop") for s in srcs[:2]}
    # the instants spread over an uncut batch's time on this host (fixed ones missed it on a fast one)
    (tmp_path / "whole").mkdir()
    start = time.time()
    subprocess.run([qconv_bin(), "convert", "--format", "qop", "-q", "--out-dir", str(tmp_path / "whole"), "-j", "2",
                    *srcs], check=True)
    whole = time.time() - start
    written = []
    for k in range(10):
        out_dir = tmp_path / f"out{k}"
        out_dir.mkdir()
        p = subprocess.Popen([qconv_bin(), "convert", "--format", "qop", "-q", "--out-dir", str(out_dir), "-j", "2",
                              *srcs], stderr=subprocess.PIPE)
        time.sleep(whole * (k + 0.5) / 10)
        p.send_signal(signal.SIGTERM)
        p.communicate()
        assert p.returncode in (-signal.SIGTERM, 0)
        written.append(len(os.listdir(out_dir)))
        for name in os.listdir(out_dir):
            assert name.endswith(".onnx") and not name.startswith("."), name
            i = int(name[1:3])
            with open(out_dir / name, "rb") as f, open(want[os.path.basename(srcs[i % 2])], "rb") as g:
                assert f.read() == g.read(), name
    assert any(0 < n < 30 for n in written), written  # some runs were stopped mid-batch


def test_a_batch_removes_the_old_data_files_of_its_outputs_only(tmp_path):
    """The batch lists DIR once for the data files earlier outputs left (not once per output):
    each output's stale OUT.<16 hex>.data goes, other files stay."""
    ins = tmp_path / "in"
    ins.mkdir()
    ext = external_model(str(ins))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    # the data file an earlier ext.onnx of other weights left (qconv's: its bytes hash to its name)
    earlier = onnx.load(ext)
    earlier.graph.initializer[0].raw_data = bytes(reversed(earlier.graph.initializer[0].raw_data))
    earlier_dir = tmp_path / "earlier"
    earlier_dir.mkdir()
    earlier_src = save_external(earlier, str(earlier_dir), name="ext.onnx", location="ext.onnx.data")
    assert run_qconv("convert", "--format", "qdq", "--out-dir", str(out_dir), earlier_src).returncode == 0
    stale = Path(data_file(str(out_dir / "ext.onnx")))
    os.remove(out_dir / "ext.onnx")  # named by no model now, as a killed run leaves it
    # files that only look like data files, or are another output's: not the sweep's
    others = [out_dir / "other.onnx.0123456789abcdef.data", out_dir / "ext.onnx.0123456789abcdef.data",
              out_dir / "ext.onnx.data", out_dir / "notes.txt"]
    for f in others:
        f.write_bytes(b"keep")
    r = run_qconv("convert", "--format", "qdq", "--out-dir", str(out_dir), ext, EXAMPLE)
    assert r.returncode == 0, r.stderr
    assert not stale.exists()
    assert all(f.exists() for f in others)
    new = data_file(str(out_dir / "ext.onnx"))
    assert new and os.path.exists(new)
    same_pair(str(out_dir / "ext.onnx"), lone(ext, str(tmp_path / "lone"), "--format", "qdq"))
