"""The qconv package, installed from the wheel (issue 37): the API writes what the CLI writes,
byte for byte, takes and gives ModelProto, raises one exception class per exit code, prints
nothing, works through paths for external data, and runs from several threads at once."""
from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import sysconfig
import threading
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import qconv
from wheel_env import EXAMPLE, ROOT, build_cli, run_cli, wheel_cli


def cli_error(stderr: str) -> str:
    """The CLI's last error line, without its `qconv: error: ` prefix."""
    lines = [line for line in stderr.splitlines() if line.startswith("qconv: error: ")]
    return lines[-1][len("qconv: error: "):] if lines else ""


def cli_summary(stderr: str) -> str:
    for line in stderr.splitlines():
        if line.startswith("qconv: info: ") and ": wrote " in line:
            return line.split(": wrote ", 1)[1].split(": ", 1)[1]
    return ""


# ---- the package is the wheel's --------------------------------------------------------------


def test_the_package_and_the_command_are_the_installed_wheels():
    site = sysconfig.get_path("platlib")
    assert os.path.realpath(qconv.__file__).startswith(os.path.realpath(site)), qconv.__file__
    assert not os.path.realpath(qconv.__file__).startswith(os.path.realpath(ROOT) + "/python")
    assert os.path.isfile(wheel_cli())
    r = run_cli("--version")
    assert r.returncode == 0
    assert r.stdout.splitlines()[0] == f"qconv {qconv.__version__} (commit {qconv.__commit__})"
    assert r.stdout.splitlines()[1] == f"built with {qconv.built_with}"
    assert qconv.onnx_version == "1.23.2" and qconv.__version__ == "0.1.0"


# ---- the CLI: the same command -----------------------------------------------------------------

CLI_CASES = [
    ["--version"], ["targets"], ["passes"], ["help", "convert"], ["convert"], ["convert", "--format", "qpo", "a", "b"],
    ["verify", EXAMPLE, "--json"], ["inspect", EXAMPLE], ["inspect", "/nonexistent.onnx", "--json"], ["frobnicate"],
]


@pytest.mark.parametrize("args", CLI_CASES, ids=lambda a: " ".join(a)[:40] or "none")
def test_the_command_and_python_m_qconv_are_the_built_command(args):
    """`qconv` (the wheel's script) and `python -m qconv` print what build/tools/qconv prints,
    with its exit code."""
    built = subprocess.run([build_cli(), *args], capture_output=True, text=True)
    for command in ([wheel_cli()], [sys.executable, "-m", "qconv"]):
        r = subprocess.run([*command, *args], capture_output=True, text=True)
        assert (r.returncode, r.stdout, r.stderr) == (built.returncode, built.stdout, built.stderr), command


def test_the_command_converts_as_the_built_one(tmp_path):
    outs = []
    for i, command in enumerate(([build_cli()], [wheel_cli()], [sys.executable, "-m", "qconv"])):
        out = tmp_path / f"o{i}.onnx"
        r = subprocess.run([*command, "convert", EXAMPLE, str(out), "--target", "openvino"], capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2]


# ---- the API writes what the CLI writes --------------------------------------------------------


def configs() -> list[tuple[list[str], dict]]:
    """Both directions and every target: (the CLI's flags, the API's keywords)."""
    c = [(["--format", "qop"], {"format": "qop"}), (["--format", "qdq"], {"format": "qdq"}),
         (["--format", "qop", "--contrib"], {"format": "qop", "contrib": True})]
    c += [(["--target", t.name], {"target": t.name}) for t in qconv.targets()]
    return c


def test_api_output_bytes_equal_the_clis_over_the_corpus(corpus, tmp_path):
    """For the bundled example, the hostile corpus and a model of every dialect, in both
    directions and for every target: the API's file (output a path) and its in-memory model
    (from the path and from the bytes) are the CLI's output byte for byte; where the CLI fails,
    the API raises the class of its exit code with its message."""
    mismatches, converted, refused = [], 0, 0
    for model in corpus:
        data = open(model, "rb").read()
        for flags, kw in configs():
            cli_out, api_out = str(tmp_path / "cli.onnx"), str(tmp_path / "api.onnx")
            for p in (cli_out, api_out):
                if os.path.exists(p):
                    os.remove(p)
            r = run_cli("convert", model, cli_out, *flags)
            label = f"{os.path.basename(model)} {' '.join(flags)}"
            try:
                res = qconv.convert(model, api_out, **kw)
            except qconv.QconvError as e:
                refused += 1
                if (e.exit_code, e.message) != (r.returncode, cli_error(r.stderr)):
                    mismatches.append(f"{label}: API {e.exit_code} {e.message!r}, CLI {r.returncode} "
                                      f"{cli_error(r.stderr)!r}")
                if type(e) is not qconv._BY_CODE[r.returncode]:
                    mismatches.append(f"{label}: {type(e).__name__} for exit {r.returncode}")
                continue
            if r.returncode != 0:
                mismatches.append(f"{label}: API converted, CLI exit {r.returncode}")
                continue
            converted += 1
            cli_bytes = open(cli_out, "rb").read()
            if open(api_out, "rb").read() != cli_bytes:
                mismatches.append(f"{label}: the API's file differs")
            if res.summary != cli_summary(r.stderr):
                mismatches.append(f"{label}: summary {res.summary!r} vs {cli_summary(r.stderr)!r}")
            if res.report["items"][0]["data_file"] is not None:
                continue  # external data: in memory, every tensor inline (test_external_data_*)
            for given in (model, data):
                mem = qconv.convert(given, **kw)
                if mem.model_bytes != cli_bytes:
                    mismatches.append(f"{label}: in memory from {'bytes' if given is data else 'the path'} differs")
    print(f"corpus: {len(corpus)} models x {len(configs())} configurations: {converted} converted, {refused} refused")
    assert not mismatches, "\n".join(mismatches[:20])
    assert converted >= 300 and refused >= 100, (converted, refused)  # both paths were exercised


def test_model_proto_in_and_out_runs_in_onnxruntime(tmp_path):
    import onnxruntime as ort

    proto = onnx.load(EXAMPLE)
    res = qconv.convert(proto, target="onnxruntime", weight_type="uint8")
    assert isinstance(res.model, onnx.ModelProto)
    assert res.output is None and res.model.SerializeToString() == res.model_bytes
    assert {n.op_type for n in res.model.graph.node} >= {"QLinearConv"}
    out = tmp_path / "cli.onnx"
    r = run_cli("convert", EXAMPLE, str(out), "--target", "onnxruntime", "--weight-type", "uint8")
    assert r.returncode == 0 and out.read_bytes() == res.model_bytes
    onnx.checker.check_model(res.model)
    sess = ort.InferenceSession(res.model_bytes, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal([d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim],
                                                 dtype=np.float32)
    assert sess.run(None, {proto.graph.input[0].name: x})[0].shape[0] == x.shape[0]
    # and back: QOp in, QDQ out
    back = qconv.convert(res.model, format="qdq")
    assert "QLinearConv" not in {n.op_type for n in back.model.graph.node}


def test_the_report_is_what_the_cli_writes(tmp_path):
    out, rep = tmp_path / "o.onnx", tmp_path / "r.json"
    res = qconv.convert(EXAMPLE, str(out), format="qop", report=str(rep), verbose=1)
    written = json.loads(rep.read_text())
    strip = lambda r: {**r, "ms": 0, "items": [{**i, "stages": []} for i in r["items"]]}  # noqa: E731 (timings)
    assert strip(res.report) == strip(written)
    r = subprocess.run([wheel_cli(), "convert", EXAMPLE, str(tmp_path / "c.onnx"), "--format", "qop", "--report",
                        str(tmp_path / "c.json")], capture_output=True, text=True)
    cli = json.loads((tmp_path / "c.json").read_text())
    cli["items"][0]["output"] = str(out)
    assert strip(cli) == strip(res.report)
    assert res.report["items"][0]["rewritten"] and any(m.level == "note" for m in res.messages)


def test_every_flag_of_convert_has_its_keyword():
    """Each flag `qconv help convert` lists is a keyword of qconv.convert (dashes as
    underscores; -q/-v as quiet/verbose, --out-dir's inputs as the model list)."""
    import inspect as pyinspect

    import re

    r = run_cli("help", "convert")
    flags = {m.group(1).replace("-", "_") for m in re.finditer(r"^\s+(?:-\w,)?--([a-z-]+)", r.stdout, re.M)}
    flags -= {"help"}
    assert len(flags) >= 20 and "no_saturation_check" in flags
    params = set(pyinspect.signature(qconv.convert).parameters)
    assert flags and flags <= params, flags - params


def test_help_and_docstrings():
    doc = qconv.convert.__doc__ or ""
    for word in ("format", "target", "weight_type", "ModelProto", "GIL", "QconvError"):
        assert word in doc
    buf = io.StringIO()
    sys.stdout, saved = buf, sys.stdout
    try:
        help(qconv.convert)
    finally:
        sys.stdout = saved
    assert "Convert a quantized ONNX model" in buf.getvalue()
    for f in (qconv.verify, qconv.inspect, qconv.targets):
        assert f.__doc__


# ---- verify, inspect, targets ------------------------------------------------------------------


def test_verify_returns_the_findings_verify_json_prints():
    r = run_cli("verify", EXAMPLE, "--json", "--target", "onnxruntime")
    res = qconv.verify(EXAMPLE, target="onnxruntime")
    cli = json.loads(r.stdout)
    assert res.report == cli
    assert res.failed == (r.returncode == 1)
    assert [(f.severity, f.kind, f.node, f.message) for f in res.findings] == \
        [(f["severity"], f["kind"], f["node"], f["message"]) for f in cli["findings"]]
    assert any(f.kind == "saturation" for f in res.findings)
    strict = qconv.verify(EXAMPLE, target="onnxruntime", fail_on="warning")
    assert strict.failed and not qconv.verify(EXAMPLE, target="onnxruntime", fail_on="warning",
                                              ignore=["saturation"]).failed
    assert qconv.verify(open(EXAMPLE, "rb").read(), target="onnxruntime").findings == res.findings


def test_inspect_returns_what_inspect_json_prints():
    r = run_cli("inspect", EXAMPLE, "--json", "--target", "aidge")
    got = qconv.inspect(EXAMPLE, target="aidge")
    cli = json.loads(r.stdout)
    for d in (got, cli):
        d["convert"]["stages"] = []
    assert got == cli
    mem = qconv.inspect(onnx.load(EXAMPLE), target="aidge")
    assert mem["model"] == "<memory>" and mem["dialects"] == got["dialects"]


def test_targets_are_the_clis():
    r = run_cli("targets")
    assert [line.split()[0] for line in r.stdout.splitlines()] == [t.name for t in qconv.targets()]
    assert {t.format for t in qconv.targets()} <= {"qop", "qdq"}


# ---- exceptions: one class per exit code -------------------------------------------------------


def test_usage_errors(tmp_path):
    with pytest.raises(qconv.UsageError) as e:
        qconv.convert(EXAMPLE, format="qpo")
    assert e.value.exit_code == 2 and "format='qpo'" in e.value.message
    with pytest.raises(qconv.UsageError) as e:  # refused by the library, in the CLI's words
        qconv.convert(EXAMPLE, str(tmp_path / "o.onnx"), format="qdq", contrib=True)
    r = run_cli("convert", EXAMPLE, str(tmp_path / "o.onnx"), "--format", "qdq", "--contrib")
    assert r.returncode == 2 and e.value.message == cli_error(r.stderr)
    with pytest.raises(qconv.UsageError):
        qconv.convert(EXAMPLE, target="nosuch")
    with pytest.raises(qconv.UsageError):
        qconv.convert(EXAMPLE, EXAMPLE, format="qop")  # the output would replace the input
    with pytest.raises(qconv.UsageError):
        qconv.verify(EXAMPLE, ignore=["nosuchkind"])
    assert isinstance(e.value, ValueError) and isinstance(e.value, qconv.QconvError)
    assert sorted(os.listdir(tmp_path)) == []


def test_invalid_model():
    with pytest.raises(qconv.InvalidModelError) as e:
        qconv.convert(b"this is no model", format="qop")
    assert e.value.exit_code == 3 and e.value.message.startswith("<memory>: not an ONNX model")
    with pytest.raises(qconv.InvalidModelError) as e:
        qconv.verify("/nonexistent/model.onnx")
    assert "cannot open" in e.value.message
    with pytest.raises(qconv.InvalidModelError):
        qconv.inspect(b"\x00\x01")


def test_invalid_model_names_the_node(tmp_path):
    g = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="quant_7"),
         helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        [numpy_helper.from_array(np.float32(0.0), "s"), numpy_helper.from_array(np.uint8(0), "z")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(qconv.InvalidModelError) as e:
        qconv.convert(m, format="qop")
    assert e.value.node == "quant_7" and "scale 0 is not positive and finite" in e.value.message
    assert e.value.report["items"][0]["error_node"] == "quant_7"
    for call in (qconv.verify, qconv.inspect):  # the same error, the same node
        with pytest.raises(qconv.InvalidModelError) as again:
            call(m)
        assert (again.value.node, again.value.message) == ("quant_7", e.value.message)


def test_unsupported_names_the_node(tmp_path):
    with pytest.raises(qconv.UnsupportedModelError) as e:
        qconv.convert(EXAMPLE, str(tmp_path / "o.onnx"), target="tensorrt")
    r = run_cli("convert", EXAMPLE, str(tmp_path / "o.onnx"), "--target", "tensorrt")
    assert r.returncode == 4 and e.value.exit_code == 4 and e.value.message == cli_error(r.stderr)
    assert e.value.node and e.value.node in e.value.message
    assert not os.listdir(tmp_path)


def test_output_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a folder")
    with pytest.raises(qconv.OutputError) as e:
        qconv.convert(EXAMPLE, str(blocker / "o.onnx"), format="qop")
    r = run_cli("convert", EXAMPLE, str(blocker / "o.onnx"), "--format", "qop")
    assert r.returncode == 5 and e.value.exit_code == 5 and e.value.message == cli_error(r.stderr)
    assert isinstance(e.value, OSError)


def test_unchanged(tmp_path):
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(qconv.UnchangedError) as e:
        qconv.convert(m, format="qop", require_change=True)
    assert e.value.exit_code == 7 and "nothing in this model is quantized" in e.value.message
    assert qconv.convert(m, format="qop").model_bytes  # without the flag: converted, with a warning


@pytest.mark.skipif("ASAN_OPTIONS" in os.environ, reason="AddressSanitizer reserves terabytes of address space")
def test_out_of_memory(tmp_path):
    """The memory test of the CLI (test_messages.py), in a Python process: 40 MB of weights with
    the address space limited to what the process has mapped plus 16 MB."""
    w = np.random.default_rng(0).integers(-127, 128, (10240, 4096)).astype(np.int8)
    g = helper.make_graph([helper.make_node("DequantizeLinear", ["w", "s", "z"], ["y"], name="dq")], "g", [],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [10240, 4096])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.float32(0.01), "s"),
                           numpy_helper.from_array(np.int8(0), "z")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    src = str(tmp_path / "big.onnx")
    onnx.save(m, src)
    script = f"""
import resource, qconv
vm = int([l for l in open('/proc/self/status') if l.startswith('VmSize')][0].split()[1]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + (16 << 20), vm + (16 << 20)))
try:
    qconv.convert({src!r}, {str(tmp_path / 'out.onnx')!r}, format='qop')
except qconv.QconvMemoryError as e:
    print(e.exit_code, isinstance(e, MemoryError), e.message)
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=str(tmp_path))
    assert r.stdout.startswith("6 True "), (r.stdout, r.stderr)
    assert "out of memory: the conversion needs more memory than this process may have" in r.stdout
    assert sorted(os.listdir(tmp_path)) == ["big.onnx"]


def test_each_exit_code_has_its_class():
    """Exit 70 is qconv's own bug: no model is known to cause it (each the fuzzer found was
    fixed), so its class is checked by the table the API raises from."""
    classes = {c.exit_code: c for c in (qconv.UsageError, qconv.InvalidModelError, qconv.UnsupportedModelError,
                                        qconv.OutputError, qconv.QconvMemoryError, qconv.UnchangedError,
                                        qconv.InternalError)}
    assert sorted(classes) == [2, 3, 4, 5, 6, 7, 70]
    assert all(issubclass(c, qconv.QconvError) for c in classes.values())
    assert qconv._BY_CODE == classes


# ---- nothing printed; logging ----------------------------------------------------------------


def test_nothing_is_printed_and_messages_go_to_logging(capfd, caplog):
    res = qconv.convert(EXAMPLE, format="qop", verbose=1)
    assert capfd.readouterr() == ("", "")
    assert any(m.level == "warning" and "saturate" in m.text for m in res.messages)
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="qconv"):
        res = qconv.convert(EXAMPLE, format="qop", verbose=1)
    levels = {r.levelno for r in caplog.records if r.name == "qconv"}
    assert {logging.WARNING, logging.INFO, logging.DEBUG} <= levels
    assert [r.getMessage() for r in caplog.records if r.name == "qconv"] == [m.text for m in res.messages]
    with pytest.raises(qconv.UsageError):
        qconv.convert(EXAMPLE, format="qpo")
    assert capfd.readouterr() == ("", "")
    quiet = qconv.convert(EXAMPLE, format="qop", quiet=True)
    assert quiet.messages == [] and quiet.summary == res.summary and "QLinearConv" in quiet.summary


def test_messages_are_the_engines_records_and_the_cli_prints_the_same_lines(tmp_path):
    """Issue 48: the binding hands the library's records over (level, kind, file, node, message), not
    stderr parsed; the CLI prints each as its line: the same lines, in the same order."""
    out = str(tmp_path / "api.onnx")
    res = qconv.convert(EXAMPLE, out, format="qop", verbose=1, time_passes=True)  # -v
    r = run_cli("convert", EXAMPLE, str(tmp_path / "cli.onnx"), "--format", "qop", "-v", "--time-passes")
    assert r.returncode == 0
    api_lines = [f"qconv: {m.level}: {m.text}" for m in res.messages]
    cli_lines = [line.replace(str(tmp_path / "cli.onnx"), out) for line in r.stderr.splitlines()]
    assert [ln for ln in api_lines if ": time: " not in ln] == [ln for ln in cli_lines if ": time: " not in ln]
    assert [ln.split(": time: ")[1].split()[0] for ln in api_lines if ": time: " in ln] == \
        [ln.split(": time: ")[1].split()[0] for ln in cli_lines if ": time: " in ln]  # the stages; not their times
    nodes = {n.name for n in onnx.load(EXAMPLE).graph.node}
    kinds = {m.kind for m in res.messages}
    assert {"summary", "time", "warning"} <= kinds and kinds & {"refused", "done", "advisory"}, kinds
    for m in res.messages:
        assert m.file == EXAMPLE, m
        if m.node:
            assert m.node in nodes or m.kind in ("advisory", "warning"), m  # a warning may name a tensor
            assert m.text == f"{EXAMPLE}: {m.node}: {m.message}", m
        else:
            assert m.text == f"{EXAMPLE}: {m.message}", m
    summary = next(m for m in res.messages if m.kind == "summary")
    assert summary.level == "info" and summary.message == f"wrote {out}: {res.summary}"


def test_dump_and_time_passes_come_back():
    res = qconv.convert(EXAMPLE, format="qop", dump=True, time_passes=True)
    assert "fuse-qlinear-conv" in res.dump and "QLinearConv" in res.dump
    assert any(m.text.startswith("<memory>: time: ") is False and ": time: " in m.text for m in res.messages)


# ---- external data and the 2 GB limit ----------------------------------------------------------


def external_model(folder) -> str:
    w = np.random.default_rng(1).integers(-127, 128, (64, 32, 3, 3)).astype(np.int8)
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws"], ["wd"]),
             helper.make_node("Conv", ["xd", "wd"], ["y"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["y", "ys", "yz"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["out"])]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.float32(0.01), "ws"),
             numpy_helper.from_array(np.float32(0.02), "xs"), numpy_helper.from_array(np.uint8(128), "xz"),
             numpy_helper.from_array(np.float32(0.05), "ys"), numpy_helper.from_array(np.uint8(120), "yz")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 8, 8])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 64, 8, 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    path = os.path.join(folder, "ext.onnx")
    onnx.save(m, path, save_as_external_data=True, location="ext.onnx.data", size_threshold=1024)
    return path


def test_external_data_through_paths(tmp_path):
    src_dir, a, b = tmp_path / "src", tmp_path / "a", tmp_path / "b"
    for d in (src_dir, a, b):
        d.mkdir()
    path = external_model(str(src_dir))
    before = {p: open(os.path.join(src_dir, p), "rb").read() for p in os.listdir(src_dir)}
    res = qconv.convert(path, str(a / "out.onnx"), format="qop")
    r = run_cli("convert", path, str(b / "out.onnx"), "--format", "qop")
    assert r.returncode == 0
    assert sorted(os.listdir(a)) == sorted(os.listdir(b)) and len(os.listdir(a)) == 2  # the model and its data file
    for name in os.listdir(a):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    assert res.report["items"][0]["data_file"] and res.report["items"][0]["data_file"].startswith(str(a))
    # in memory: every tensor inline, equal to the CLI's --inline-data
    mem = qconv.convert(path, format="qop")
    r = run_cli("convert", path, str(b / "inline.onnx"), "--format", "qop", "--inline-data")
    assert r.returncode == 0 and mem.model_bytes == (b / "inline.onnx").read_bytes()
    # a ModelProto loaded with its data is converted as the file onnx.save writes of it
    loaded = onnx.load(path)
    onnx.save(loaded, str(b / "loaded.onnx"))
    r = run_cli("convert", str(b / "loaded.onnx"), str(b / "loaded_out.onnx"), "--format", "qop")
    assert r.returncode == 0 and qconv.convert(loaded, format="qop").model_bytes == (b / "loaded_out.onnx").read_bytes()
    # ... but one whose tensors still name their file cannot be read from memory: the path can
    with pytest.raises(qconv.UsageError) as e:
        qconv.convert(onnx.load(path, load_external_data=False), format="qop")
    assert "external file 'ext.onnx.data'" in e.value.message and "give the model's path" in e.value.message
    assert {p: open(os.path.join(src_dir, p), "rb").read() for p in os.listdir(src_dir)} == before


def test_over_2gb_works_by_path_and_is_refused_in_memory(tmp_path):
    """A model whose weights pass 2 GB (a sparse data file: nothing of it is read to refuse it)
    converts by path as the CLI does; into memory it is refused before any work, naming the path
    form."""
    n = (1 << 31) + (1 << 20)
    data = tmp_path / "big.onnx.data"
    with open(data, "wb") as f:
        f.truncate(n)
    w = onnx.TensorProto(name="w", data_type=TensorProto.INT8, dims=[n])
    w.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "big.onnx.data"), ("offset", "0"), ("length", str(n))):
        e = w.external_data.add()
        e.key, e.value = k, v
    g = helper.make_graph([helper.make_node("DequantizeLinear", ["w", "s"], ["y"], name="dq")], "g", [],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])],
                          [w, numpy_helper.from_array(np.float32(0.5), "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    path = str(tmp_path / "big.onnx")
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    with pytest.raises(qconv.UnsupportedModelError) as e:
        qconv.convert(path, format="qdq")
    assert "over protobuf's 2 GB limit for a model held in memory; give an output path" in e.value.message
    assert sorted(os.listdir(tmp_path)) == ["big.onnx", "big.onnx.data"]


def test_a_model_proto_over_2gb_is_refused_naming_the_path_form():
    m = helper.make_model(helper.make_graph([], "g", [], []))
    w = m.graph.initializer.add()  # (helper.make_graph would copy it through a serialization, which fails)
    w.name, w.data_type = "w", TensorProto.INT8
    w.dims.append((1 << 31) + 16)
    w.raw_data = bytes((1 << 31) + 16)
    with pytest.raises(qconv.UnsupportedModelError) as e:
        qconv.convert(m, format="qop")
    assert "save it with its external data" in e.value.message and "give qconv its path" in e.value.message


# ---- threads -----------------------------------------------------------------------------------


def test_conversions_run_from_several_threads_at_once(corpus):
    """Eight threads convert the corpus's convertible models at once; each result equals the one
    converted alone."""
    jobs = [(m, kw) for m in corpus for _, kw in configs()[:4]]
    alone = {}
    for m, kw in jobs:
        try:
            alone[(m, str(kw))] = qconv.convert(m, **kw).model_bytes
        except qconv.QconvError as e:
            alone[(m, str(kw))] = e.exit_code
    got: dict = {}
    lock = threading.Lock()

    def work(part):
        for m, kw in part:
            try:
                out = qconv.convert(m, **kw).model_bytes
            except qconv.QconvError as e:
                out = e.exit_code
            with lock:
                got[(m, str(kw))] = out

    threads = [threading.Thread(target=work, args=(jobs[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == alone
    assert sum(isinstance(v, bytes) for v in got.values()) >= 100


def test_a_conversion_releases_the_gil(tmp_path):
    """While one thread converts, another runs Python: the longest pause the second sees is a
    small part of the shortest conversion (with the GIL held it would be all of one)."""
    w = np.random.default_rng(2).integers(-127, 128, (8192, 1024, 3, 3)).astype(np.int8)
    g = helper.make_graph(
        [helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["x"]),
         helper.make_node("DequantizeLinear", ["w", "ws"], ["wd"], axis=0),
         helper.make_node("Conv", ["x", "wd"], ["y"], name="conv"),
         helper.make_node("QuantizeLinear", ["y", "xs", "xz"], ["yq"])], "g",
        [helper.make_tensor_value_info("xq", TensorProto.UINT8, [1, 1024, 8, 8])],
        [helper.make_tensor_value_info("yq", TensorProto.UINT8, [1, 8192, 6, 6])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.full(8192, 0.01, np.float32), "ws"),
         numpy_helper.from_array(np.float32(0.02), "xs"), numpy_helper.from_array(np.uint8(128), "xz")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    spans = []

    def convert_many():
        for _ in range(5):
            t = time.perf_counter()
            qconv.convert(m, target="onnxruntime")
            spans.append(time.perf_counter() - t)

    worker = threading.Thread(target=convert_many)
    ticks = []
    worker.start()
    while worker.is_alive():
        ticks.append(time.perf_counter())
    worker.join()
    gaps = np.diff(ticks)
    assert len(ticks) > 1000, len(ticks)
    assert min(spans) > 0.03, spans  # long enough for a held GIL to show
    assert gaps.max() < min(spans) / 2, (gaps.max(), spans)  # held, a pause would be one whole conversion


# ---- typing ------------------------------------------------------------------------------------


def test_mypy_strict_passes_on_the_package_and_a_caller(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "-p", "qconv"],
                       capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 0 and "Success: no issues found" in r.stdout, r.stdout + r.stderr
    caller = tmp_path / "caller.py"
    caller.write_text('''
import onnx
import qconv

def to_openvino(path: str) -> onnx.ModelProto:
    result = qconv.convert(path, target="openvino")
    model = result.model
    assert model is not None
    return model

def check(path: str) -> list[str]:
    found: qconv.VerifyResult = qconv.verify(path, target="onnxruntime", ignore=("saturation",))
    return [f"{f.node}: {f.kind}: {f.message}" for f in found.findings]

def write(path: str, out: str) -> str:
    try:
        r = qconv.convert(path, out, format="qop", weight_type="uint8", opset=21, passes=None)
    except qconv.UnsupportedModelError as e:
        return f"{e.node}: {e.message} (exit {e.exit_code})"
    names: list[str] = [t.name for t in qconv.targets()]
    described: dict[str, object] = qconv.inspect(path)
    return r.summary + str(r.report["exit_code"]) + ",".join(names) + str(len(described)) + qconv.__version__
''')
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(caller)],
                       capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    bad = tmp_path / "bad.py"
    bad.write_text("import qconv\nx: int = qconv.convert('a.onnx').summary\n")
    r = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(bad)],
                       capture_output=True, text=True, cwd=str(tmp_path))
    assert r.returncode == 1 and "Incompatible types in assignment" in r.stdout  # the types are checked


def test_a_batch_writes_what_the_cli_batch_writes(tmp_path):
    """model a list of paths with out_dir (and jobs): --out-dir DIR IN... -j N."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("a", "b", "c"):
        (src / f"{name}.onnx").write_bytes(open(EXAMPLE, "rb").read())
    (src / "bad.onnx").write_bytes(b"no model")
    inputs = [str(src / f"{n}.onnx") for n in ("a", "b", "c")]
    for d in ("api", "cli", "api2"):
        (tmp_path / d).mkdir()
    res = qconv.convert(inputs, out_dir=str(tmp_path / "api"), jobs=2, format="qop")
    r = run_cli("convert", "--out-dir", str(tmp_path / "cli"), "-j", "2", "--format", "qop", *inputs)
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path / "api")) == sorted(os.listdir(tmp_path / "cli")) == ["a.onnx", "b.onnx", "c.onnx"]
    for name in os.listdir(tmp_path / "api"):
        assert (tmp_path / "api" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes()
    assert res.output == str(tmp_path / "api") and len(res.report["items"]) == 3
    assert res.summary.count("3 QLinearConv") == 3
    with pytest.raises(qconv.InvalidModelError) as e:  # the batch's exit code: the greatest of its items'
        qconv.convert([*inputs, str(src / "bad.onnx")], out_dir=str(tmp_path / "api2"), format="qop")
    assert e.value.message.startswith("batch: 3 of 4 models converted into ")  # the batch's own line, as the CLI's last
    assert "bad.onnx: not an ONNX model" in e.value.report["items"][3]["error"]
    with pytest.raises(qconv.UsageError):
        qconv.convert(inputs, format="qop")  # a list without out_dir


def test_large_tensors_in_memory_equal_the_cli(tmp_path):
    """Tensors past the reader's splice threshold (64 KiB: left in the input file, spliced back
    into the output) take the in-memory path too: from bytes and from the path, the same bytes as
    the CLI's file, both ways and with a storage change."""
    w = np.random.default_rng(2).integers(-127, 128, (256, 1024, 3, 3)).astype(np.int8)
    g = helper.make_graph(
        [helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["x"]),
         helper.make_node("DequantizeLinear", ["w", "ws"], ["wd"], axis=0),
         helper.make_node("Conv", ["x", "wd", "b"], ["y"], name="conv"),
         helper.make_node("QuantizeLinear", ["y", "xs", "xz"], ["yq"])], "g",
        [helper.make_tensor_value_info("xq", TensorProto.UINT8, [1, 1024, 8, 8])],
        [helper.make_tensor_value_info("yq", TensorProto.UINT8, [1, 256, 6, 6])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.full(256, 0.01, np.float32), "ws"),
         numpy_helper.from_array(np.linspace(-1, 1, 256).astype(np.float32), "b"),
         numpy_helper.from_array(np.float32(0.02), "xs"), numpy_helper.from_array(np.uint8(128), "xz")])
    src = str(tmp_path / "in.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), src)
    data = open(src, "rb").read()
    for flags, kw in ((["--format", "qop"], {"format": "qop"}), (["--format", "qdq"], {"format": "qdq"}),
                      (["--target", "onnxruntime", "--weight-type", "uint8"],
                       {"target": "onnxruntime", "weight_type": "uint8"})):
        out = tmp_path / "cli.onnx"
        assert run_cli("convert", src, str(out), *flags).returncode == 0
        cli = out.read_bytes()
        assert len(cli) > 2_000_000
        assert qconv.convert(data, **kw).model_bytes == cli, flags
        assert qconv.convert(src, **kw).model_bytes == cli, flags
