"""Issue 25: no flag and no batch item may replace or remove what the user owns.

The rule (pipeline/write_plan.h, docs/robustness.md "What qconv writes and removes"): before
anything is written, every path the run writes or removes (outputs, their data files, the files
the sweep may remove, the report) is resolved to the file it names; the run is refused with
exit 2 when one of them is an input of any item, or a file an input's external data names. The
sweep removes only data files qconv wrote for that output (their bytes hash to their name)."""
from __future__ import annotations

import hashlib
import re
import os
import subprocess
import time

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import data_file, qconv_bin, run_qconv

DATA_LIKE = "0123456789abcdef"  # a tag that is no hash of the bytes the tests put under it


def weight_model(seed: int, n: int = 64) -> onnx.ModelProto:
    """DQ(w) -> MatMul: a weight big enough to go to external data."""
    w = np.random.default_rng(seed).integers(-127, 128, (n, n)).astype(np.int8)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.float32(0.02), "s"),
             numpy_helper.from_array(np.int8(0), "z")]
    nodes = [helper.make_node("DequantizeLinear", ["w", "s", "z"], ["wf"], name="dq"),
             helper.make_node("MatMul", ["x", "wf"], ["y"], name="mm")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    return m


def save(model: onnx.ModelProto, path, location: str | None) -> str:
    """`model` at `path`, its weight `w` in `location` (relative to the model's folder, maybe in
    a subfolder) or inline."""
    path = str(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    model = onnx.ModelProto.FromString(model.SerializeToString())
    if location is not None:
        w = next(t for t in model.graph.initializer if t.name == "w")
        data = os.path.join(os.path.dirname(path), location)
        os.makedirs(os.path.dirname(data), exist_ok=True)
        with open(data, "wb") as f:
            f.write(w.raw_data)
        length = len(w.raw_data)
        w.ClearField("raw_data")
        w.data_location = TensorProto.EXTERNAL
        for k, v in (("location", location), ("offset", "0"), ("length", str(length))):
            e = w.external_data.add()
            e.key, e.value = k, v
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


def digest(folder) -> dict[str, str]:
    """Every file under `folder` (symbolic links as their target's name) with a hash of its bytes."""
    out = {}
    for root, _, files in os.walk(folder):
        for f in files:
            p = os.path.join(root, f)
            rel = os.path.relpath(p, folder)
            if os.path.islink(p):
                out[rel] = "-> " + os.readlink(p)
            else:
                with open(p, "rb") as fh:
                    out[rel] = hashlib.sha256(fh.read()).hexdigest()
    return out


def data_file_of_weights(folder) -> str:
    """The one OUT.<16 hex>.data file in `folder`."""
    (name,) = [f for f in os.listdir(folder) if f.endswith(".data")]
    return os.path.join(str(folder), name)


def loads_and_runs(path: str, n: int = 64) -> None:
    """The model and its external data are whole: onnxruntime loads and runs it (its loader takes
    a location in a subfolder, where onnx.load's checks refuse one)."""
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sess.run(None, {"x": np.ones((1, n), np.float32)})


# ---- the report (findings 1 and 2) ----

@pytest.mark.parametrize("batch", [False, True], ids=["lone", "batch"])
def test_a_report_naming_an_inputs_external_data_is_refused(tmp_path, batch):
    src = save(weight_model(1), tmp_path / "in.onnx", "in.onnx.data")
    report = str(tmp_path / "in.onnx.data")
    before = digest(tmp_path)
    if batch:
        os.mkdir(tmp_path / "d")
        r = run_qconv("convert", "--format", "qdq", "--out-dir", str(tmp_path / "d"), src, "--report", report)
    else:
        r = run_qconv("convert", src, str(tmp_path / "out.onnx"), "--format", "qdq", "--report", report)
    assert r.returncode == 2, r.stderr
    assert f"--report {report}: names an input or an output of this run (the external data file 'in.onnx.data' " \
           f"of input {src})" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert digest(tmp_path) == {**before, **({} if not batch else {})}
    loads_and_runs(src)


@pytest.mark.parametrize("exists", [True, False, "namespace"], ids=["written-before", "not-yet", "namespace"])
def test_a_report_naming_an_outputs_data_file_is_refused(tmp_path, exists):
    """The data file's name is known from an earlier run (or only its pattern): a report there
    would replace the fresh data file, or take the name the output's data file is given. Any
    OUT.<anything>.data is the output's namespace (issue 46: out.onnx.zzz.data)."""
    src = save(weight_model(2), tmp_path / "src" / "m.onnx", "m.onnx.data")
    out = str(tmp_path / "out" / "m.onnx")
    os.mkdir(tmp_path / "out")
    assert run_qconv("convert", src, out, "--format", "qdq").returncode == 0
    report = (data_file(out) if exists is True else str(tmp_path / "out" / f"m.onnx.{DATA_LIKE}.data")
              if exists is False else str(tmp_path / "out" / "m.onnx.zzz.data"))
    if not exists:  # a fresh folder, where the output's data file is still to come
        os.remove(data_file(out))
        os.remove(out)
    before = digest(tmp_path)
    r = run_qconv("convert", src, out, "--format", "qdq", "--report", report)
    assert r.returncode == 2, r.stderr
    assert f"--report {report}: names an input or an output of this run" in r.stderr
    assert digest(tmp_path) == before
    if exists:
        loads_and_runs(out)


# ---- the sweep (finding 3) ----

@pytest.mark.parametrize("order", ["reader-first", "writer-first"])
@pytest.mark.parametrize("kind", ["written-by-qconv", "look-alike"])
def test_a_batch_never_sweeps_a_file_another_item_reads(tmp_path, order, kind):
    """P/x.onnx keeps its weights in P/D/m.onnx.<16 hex>.data, a name the sweep of output P/D/m.onnx
    takes for its own. A data file qconv wrote for P/D/m.onnx (its bytes hash to its name) is one
    the sweep would remove: the batch is refused before anything is written, in either order. A
    file only named like one is never swept: the batch converts, and x's weights stay."""
    x_model = weight_model(3)
    if kind == "written-by-qconv":  # x reads the data file of an earlier P/D/m.onnx
        earlier = save(x_model, tmp_path / "e" / "m.onnx", "m.onnx.data")
        os.makedirs(tmp_path / "P" / "D")
        assert run_qconv("convert", earlier, str(tmp_path / "P" / "D" / "m.onnx"), "--format", "qdq").returncode == 0
        os.remove(tmp_path / "P" / "D" / "m.onnx")
        tag = os.path.basename(data_file_of_weights(tmp_path / "P" / "D"))
        x = str(tmp_path / "P" / "x.onnx")
        m = onnx.load(str(tmp_path / "e" / "m.onnx"), load_external_data=False)  # a model that names that file
        m.graph.initializer[0].external_data[0].value = f"D/{tag}"
        with open(x, "wb") as f:
            f.write(m.SerializeToString())
    else:
        tag = f"m.onnx.{DATA_LIKE}.data"
        x = save(x_model, tmp_path / "P" / "x.onnx", f"D/{tag}")
    m = save(weight_model(4), tmp_path / "src" / "m.onnx", "m.onnx.data")
    before = digest(tmp_path)
    items = [x, m] if order == "reader-first" else [m, x]
    r = run_qconv("convert", "--format", "qdq", "--out-dir", str(tmp_path / "P" / "D"), *items)
    if kind == "written-by-qconv":
        assert r.returncode == 2, r.stderr
        assert f"{tmp_path}/P/D/{tag}: this file is the input or holds its external data; qconv never modifies its " \
               f"input (it is the external data file 'D/{tag}' of input {x}" in r.stderr
        assert digest(tmp_path) == before
    else:
        assert r.returncode == 0, r.stderr
        after = digest(tmp_path)
        assert {k: after[k] for k in before} == before
        loads_and_runs(str(tmp_path / "P" / "D" / "x.onnx"))
        loads_and_runs(str(tmp_path / "P" / "D" / "m.onnx"))
    loads_and_runs(x)


@pytest.mark.parametrize("batch", [False, True], ids=["lone", "batch"])
def test_a_file_named_like_a_data_file_that_qconv_did_not_write_is_never_swept(tmp_path, batch):
    """D/z.onnx, a model of the user's that is no input of the run, keeps its weights in
    D/m.onnx.<16 hex>.data: its bytes do not hash to that name, so the commit of D/m.onnx leaves it."""
    z = save(weight_model(5), tmp_path / "D" / "z.onnx", f"m.onnx.{DATA_LIKE}.data")
    m = save(weight_model(6), tmp_path / "src" / "m.onnx", "m.onnx.data")
    kept = digest(tmp_path / "D")
    if batch:
        r = run_qconv("convert", "--format", "qdq", "--out-dir", str(tmp_path / "D"), m)
    else:
        r = run_qconv("convert", m, str(tmp_path / "D" / "m.onnx"), "--format", "qdq")
    assert r.returncode == 0, r.stderr
    after = digest(tmp_path / "D")
    assert {k: after[k] for k in kept} == kept
    loads_and_runs(z)
    loads_and_runs(str(tmp_path / "D" / "m.onnx"))


def test_the_sweep_removes_the_data_files_qconv_wrote_for_that_output(tmp_path):
    """What the sweep is for: a new output's old data file (another content, another name), and
    one a killed run left unnamed, both go; the new pair stays."""
    out = str(tmp_path / "D" / "m.onnx")
    os.mkdir(tmp_path / "D")
    a = save(weight_model(7), tmp_path / "a" / "m.onnx", "m.onnx.data")
    b = save(weight_model(8), tmp_path / "b" / "m.onnx", "m.onnx.data")
    c = save(weight_model(9), tmp_path / "c" / "m.onnx", "m.onnx.data")
    assert run_qconv("convert", a, out, "--format", "qdq").returncode == 0
    old = data_file(out)
    assert run_qconv("convert", c, out, "--format", "qdq").returncode == 0
    orphan = data_file(out)  # as a run killed between its two renames leaves it: named by no model
    with open(orphan, "rb") as f:
        orphan_bytes = f.read()
    assert run_qconv("convert", a, out, "--format", "qdq").returncode == 0
    with open(orphan, "wb") as f:
        f.write(orphan_bytes)
    assert run_qconv("convert", b, out, "--format", "qdq").returncode == 0
    new = data_file(out)
    assert sorted(os.listdir(tmp_path / "D")) == sorted(["m.onnx", os.path.basename(new)])
    assert new not in (old, orphan)
    loads_and_runs(out)


# ---- a batch output over another item's input (finding 4) ----

@pytest.mark.parametrize("how", ["external-data", "symlink"])
def test_a_batch_output_never_replaces_another_items_input(tmp_path, how):
    if how == "external-data":  # P/x.onnx keeps its weights in P/D/y.onnx; src2/y.onnx goes to P/D
        reader = save(weight_model(10), tmp_path / "P" / "x.onnx", "D/y.onnx")
        other = save(weight_model(11), tmp_path / "src2" / "y.onnx", None)
        out_dir = tmp_path / "P" / "D"
        victim = out_dir / "y.onnx"
        what = f"the external data file 'D/y.onnx' of input {reader}"
    else:  # item S/c.onnx -> ../D/b.onnx, and item src/b.onnx into D
        out_dir = tmp_path / "D"
        save(weight_model(12), out_dir / "b.onnx", None)
        os.makedirs(tmp_path / "S")
        os.symlink("../D/b.onnx", tmp_path / "S" / "c.onnx")
        reader = str(tmp_path / "S" / "c.onnx")
        other = save(weight_model(13), tmp_path / "src" / "b.onnx", None)
        victim = out_dir / "b.onnx"
        what = f"input {reader}"
    before = digest(tmp_path)
    for items in ([reader, other], [other, reader]):
        r = run_qconv("convert", "--format", "qdq", "--out-dir", str(out_dir), *items, "-j", "2")
        assert r.returncode == 2, r.stderr
        assert f"{victim}: " in r.stderr and what in r.stderr and "qconv never modifies its input" in r.stderr
        assert digest(tmp_path) == before
    if how == "external-data":
        loads_and_runs(reader)


# ---- concurrent batches (finding 5) ----

def test_concurrent_batches_leave_no_orphan_data_file(tmp_path):
    """Two batches write the same 12 names into one folder at once, with other weights: every
    commit removes the data file of the model it replaces, so once both have ended each output
    has exactly the data file it names, and nothing else is left."""
    out_dir = tmp_path / "D"
    out_dir.mkdir()
    names = [f"m{i:02d}.onnx" for i in range(12)]
    sets = []
    for v in range(2):
        sets.append([save(weight_model(100 * v + i, 128), tmp_path / f"v{v}" / n, n + ".data") for i, n in enumerate(names)])
    for _ in range(4):
        procs = [subprocess.Popen([qconv_bin(), "convert", "--format", "qdq", "--out-dir", str(out_dir), "-j", "2", *s],
                                  stderr=subprocess.PIPE, text=True) for s in sets]
        for p in procs:
            assert p.wait(timeout=120) == 0, p.stderr.read()
        listing = sorted(os.listdir(out_dir))
        want = sorted(names + [os.path.basename(data_file(str(out_dir / n))) for n in names])
        assert listing == want, sorted(set(listing) - set(want))
    for n in names:
        loads_and_runs(str(out_dir / n), 128)


# ---- exit 70 only for qconv's own bugs (finding 6) ----

@pytest.mark.parametrize("with_node", [False, True], ids=["empty-graph", "relu"])
@pytest.mark.parametrize("fmt", ["qop", "qdq"])
def test_a_model_from_before_opset_import_converts(tmp_path, with_node, fmt):
    """IR 2 had no opset_import (opset 1 implied, as the ONNX checker reads it): a checker-valid
    model of it converts, into a checker-valid model (it was exit 70, found by the fuzzer; the
    fuzz seeds hold both, tests/fuzz/make_seeds.py)."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fuzz"))
    import make_seeds
    src = str(tmp_path / "ir2.onnx")
    model = make_seeds.ir2(with_node)
    onnx.checker.check_model(model)  # (shape inference, full_check's, needs an opset_import)
    with open(src, "wb") as f:
        f.write(model.SerializeToString())
    out = str(tmp_path / "out.onnx")
    r = run_qconv("convert", src, out, "--format", fmt)
    assert r.returncode == 0, r.stderr
    converted = onnx.load(out)
    onnx.checker.check_model(converted, full_check=True)
    if with_node:
        from onnx.reference import ReferenceEvaluator
        x = np.array([-1.5, 2.0], np.float32)
        assert np.array_equal(ReferenceEvaluator(converted).run(None, {"x": x})[0], np.maximum(x, 0))
    else:
        assert converted.ir_version == 2 and len(converted.opset_import) == 0


# ---- verify and inspect read as convert reads (findings 7 and 8) ----

def broken_models(folder) -> dict[str, str]:
    """Models convert calls unreadable, invalid (3) or beyond it at reading (4)."""
    folder = str(folder)
    relu2 = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x", "x"], ["y"], name="relu")], "g",
                                                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                                                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])]),
                              opset_imports=[helper.make_opsetid("", 13)])
    relu2.ir_version = 7
    new = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
                                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])]),
                            opset_imports=[helper.make_opsetid("", 99999)])
    new.ir_version = 7
    paths = {"empty-nodes": hostile_structure(os.path.join(folder, "empty.onnx"), "nodes", 2000),
             "checker-only": os.path.join(folder, "relu2.onnx"), "opset-99999": os.path.join(folder, "new.onnx"),
             "truncated": os.path.join(folder, "cut.onnx"), "missing": os.path.join(folder, "missing.onnx")}
    onnx.save(relu2, paths["checker-only"])
    onnx.save(new, paths["opset-99999"])
    with open(paths["truncated"], "wb") as f:
        f.write(relu2.SerializeToString()[:-7])
    return paths


@pytest.mark.parametrize("case", ["empty-nodes", "checker-only", "opset-99999", "truncated", "missing"])
def test_verify_and_inspect_read_a_model_as_strictly_as_convert(tmp_path, case):
    """The same exit code and message as convert for what it calls unreadable or invalid (3), and
    for verify what it refuses at reading (4); inspect describes a model convert would refuse
    (exit 4 in its dry run) but is exit 3 for one it cannot read. --json is always one object."""
    import json
    path = broken_models(tmp_path)[case]
    c = run_qconv("convert", path, str(tmp_path / "out.onnx"), "--format", "qop")
    assert c.returncode == (4 if case == "opset-99999" else 3), c.stderr
    message = c.stderr.strip()
    assert message.startswith("qconv: error: ") and len(message.splitlines()) == 1
    for json_flag in ([], ["--json"]):
        v = run_qconv("verify", path, *json_flag)
        assert (v.returncode, v.stderr.strip()) == (c.returncode, message)
        i = run_qconv("inspect", path, *json_flag)
        if c.returncode == 3:
            assert (i.returncode, i.stderr.strip()) == (3, message)
        else:
            assert i.returncode == 0 and i.stderr == ""
        if json_flag:
            jv, ji = json.loads(v.stdout), json.loads(i.stdout)
            assert jv == {"qconv_verify": 1, "model": path, "target": None, "exit_code": c.returncode,
                          "error": message.removeprefix("qconv: error: "), "error_node": None, "dialects": [], "quantized_tensors": 0,
                          "fail_on": "error", "ignored": 0, "findings": []}
            if c.returncode == 3:
                assert ji == {"qconv_inspect": 1, "model": path, "exit_code": 3,
                              "error": message.removeprefix("qconv: error: "), "error_node": None}
            else:
                assert (ji["exit_code"], ji["convert"]["exit_code"]) == (0, 4)
                assert ji["convert"]["error"] == message.removeprefix("qconv: error: ")
        elif c.returncode == 3:
            assert v.stdout == "" and i.stdout == ""
    assert not os.path.exists(tmp_path / "out.onnx")


# ---- the memory bound (finding 10) ----

def hostile_structure(path: str, form: str, size: int = 2_000_000) -> str:
    """`size` bytes of the smallest messages protobuf parses, each costing far more in memory than
    on the wire (docs/robustness.md, "Memory"): empty NodeProtos, TensorProtos, ValueInfoProtos,
    AttributeProtos of one node, or Identity nodes naming nothing."""
    def varint(v: int) -> bytes:
        out = b""
        while True:
            b, v = v & 0x7F, v >> 7
            if not v:
                return out + bytes([b])
            out += bytes([b | 0x80])

    n = size // 2
    tail = {"nodes": b"\x0a\x00" * n, "initializers": b"\x2a\x00" * n, "value-infos": b"\x6a\x00" * n}.get(form)
    if form == "attributes":
        relu = helper.make_node("Relu", ["x"], ["y"], name="r").SerializeToString() + b"\x2a\x00" * n
        tail = b"\x0a" + varint(len(relu)) + relu
    if form == "identities":
        tail = b"\x0a\x0a\x22\x08Identity" * (size // 12)
    m = helper.make_model(helper.make_graph([], "g", [], []), opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    graph = m.graph.SerializeToString() + tail
    m.ClearField("graph")
    with open(path, "wb") as f:
        f.write(m.SerializeToString() + b"\x3a" + varint(len(graph)) + graph)
    return path


@pytest.mark.skipif("ASAN_OPTIONS" in os.environ, reason="AddressSanitizer reserves terabytes of address space")
@pytest.mark.parametrize("form", ["nodes", "initializers", "value-infos", "attributes", "identities"])
def test_every_command_stays_within_the_memory_bound(tmp_path, form):
    """The bound docs/robustness.md states: at most 150 bytes of memory per byte of the model file
    (tensor bytes of 1 KiB and more excepted: they stay in the file), plus 64 MiB of address space
    for the process itself. Held as an address-space limit (RLIMIT_AS) on 2 MB of each hostile
    form, for convert, verify and inspect alike: their verdict (3, or 0 for a valid model), never
    6. Empty nodes cost 193 bytes per byte before import refused them at once (issue 25)."""
    from conftest import run_qconv_limited
    path = hostile_structure(str(tmp_path / "m.onnx"), form)
    limit = 150 * os.path.getsize(path) + (64 << 20)
    codes = set()
    for args in (["convert", path, str(tmp_path / "o.onnx"), "--format", "qop", "-q"], ["verify", path], ["inspect", path]):
        r = run_qconv_limited(limit, *args)
        assert r.returncode in (0, 3), (args[0], r.returncode, r.stderr[-300:])
        codes.add(r.returncode)
    assert len(codes) == 1  # one verdict for the three commands


# ---- SIGKILL in a batch (finding 9) ----

def test_what_sigkill_leaves_in_a_batch_is_documented_and_the_next_batch_removes_it(tmp_path):
    """A -j 6 batch of 24 models killed at 30 instants spread over its run (weights alternating, so
    every batch replaces pairs). Each kill leaves every output a whole pair, old or new, and at most
    the documented leftovers: a hidden `.OUT.qconv-PID-N` (killed between the model's link and its
    rename), `.OUT.data.qconv-PID-N` (the same for a data file whose name, so bytes, were there
    already) or an unnamed OUT.<tag>.data (between the rename and the sweep), whose bytes hash to
    its name. The next batch into the folder removes every one of them. bench/bench_kill.py
    measures how often (docs/robustness.md)."""
    import random
    import signal
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
    import bench_kill
    names = [f"m{i:02d}.onnx" for i in range(24)]
    sets = [[save(weight_model(1000 * v + i), tmp_path / f"v{v}" / n, n + ".data") for i, n in enumerate(names)]
            for v in range(2)]
    out = str(tmp_path / "D")
    os.mkdir(out)

    def batch(v, kill_after=None):
        p = subprocess.Popen([qconv_bin(), "convert", "--format", "qdq", "--out-dir", out, "-j", "6", "-q", *sets[v]],
                             stderr=subprocess.PIPE, text=True)
        if kill_after is None:
            assert p.wait(timeout=120) == 0, p.stderr.read()
            return
        time.sleep(kill_after)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=120)

    start = time.time()
    batch(0)
    whole = time.time() - start
    rng = random.Random(25)
    for k in range(30):
        batch((k + 1) % 2, rng.uniform(0, whole))
        keep = bench_kill.named(out, names)
        for f in os.listdir(out):
            if f in names:
                loads_and_runs(os.path.join(out, f))  # a whole pair, old or new
            elif f not in keep:
                assert re.fullmatch(r"\.m\d\d\.onnx(\.data)?\.qconv-\d+-\d+", f) or \
                    re.fullmatch(r"m\d\d\.onnx\.[0-9a-f]{16}\.data", f), f
        batch(k % 2)
        keep = bench_kill.named(out, names)
        assert sorted(os.listdir(out)) == sorted(names + list(keep))


# ---- round 3 (issue 36, item 2): a copied model keeps its data; the plan binds the rename ----

@pytest.mark.parametrize("batch", [False, True], ids=["lone", "batch"])
def test_a_copied_model_keeps_its_data(tmp_path, batch):
    """`cp out.onnx keep.onnx` (the model file only: both name out.onnx.<hash>.data), then a new
    conversion into out.onnx: the sweep leaves a data file another model of the folder names
    (docs/robustness.md), and removes it once no model names it."""
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    a = save(weight_model(21), tmp_path / "a" / "m.onnx", "m.onnx.data")
    b = save(weight_model(22), tmp_path / "b" / "m.onnx", "m.onnx.data")
    out = str(out_dir / "m.onnx")

    def convert(src, *flags):
        args = ["convert", "--out-dir", str(out_dir), src] if batch else ["convert", src, out]
        r = run_qconv(*args, "--format", "qdq", *flags)
        assert r.returncode == 0, r.stderr

    convert(a)
    first = data_file(out)
    keep = str(out_dir / "keep.onnx")
    with open(out, "rb") as f, open(keep, "wb") as g:
        g.write(f.read())
    convert(b, "--fsync")  # other input, other flags: a new data file
    assert data_file(out) != first
    assert os.path.exists(first), "the sweep removed the data file keep.onnx names"
    loads_and_runs(keep)
    loads_and_runs(out)
    os.remove(keep)  # now no model names it: the next commit to m.onnx sweeps it
    convert(a)
    assert not os.path.exists(first) or data_file(out) == first
    assert sorted(os.listdir(out_dir)) == sorted(["m.onnx", os.path.basename(data_file(out))])


def test_an_output_folder_swapped_for_a_link_to_the_input_folder_is_not_followed(tmp_path):
    """The write plan opens the output's folder once and the commit renames relative to it
    (openat/renameat): the folder swapped for a symbolic link to the input's folder while the
    conversion runs does not let the output replace the input. The window is made certain:
    strace holds the output's fallocate (the write, after the plan) for 3 s, and the swap is made
    once the trace shows it was entered."""
    src_dir, out_dir = tmp_path / "in", tmp_path / "out"
    src = save(weight_model(23, 96), src_dir / "m.onnx", None)
    out_dir.mkdir()
    before = digest(src_dir)
    trace = str(tmp_path / "trace")
    p = subprocess.Popen(["strace", "-f", "-qq", "-o", trace, "-e", "trace=fallocate", "-e",
                          "inject=fallocate:delay_exit=3000000", qconv_bin(), "convert", src, str(out_dir / "m.onnx"),
                          "--format", "qop"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "ASAN_OPTIONS": "detect_leaks=0"})
    deadline = time.time() + 60
    while time.time() < deadline and not (os.path.exists(trace) and "fallocate(" in open(trace).read()):
        time.sleep(0.02)
    assert "fallocate(" in open(trace).read(), "the conversion never reached its write"
    os.rename(out_dir, tmp_path / "out.orig")
    os.symlink(src_dir, out_dir)  # out/ now leads to the input's folder
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert digest(src_dir) == before, "the input was replaced"
    written = str(tmp_path / "out.orig" / "m.onnx")  # where the plan checked it would go
    assert sorted(os.listdir(tmp_path / "out.orig")) == ["m.onnx"]
    loads_and_runs(written, 96)
