"""The command line a user expects (issue 29): output levels like a compiler's, findings with
severities, a model with nothing quantized said, usage errors that name their cause, --opset on
models without shape information, and a progress line only on a terminal."""
from __future__ import annotations

import json
import os
import pty
import re
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import models
import reference
from conftest import EXAMPLE, qconv_bin, run_qconv

LINE = re.compile(r"^qconv: (error|warning|info|note|debug): \S.*$")


def levels(stderr: str) -> list[str]:
    for line in stderr.splitlines():
        assert LINE.match(line), f"not greppable as 'qconv: LEVEL: ...': {line!r}"
    return [LINE.match(l).group(1) for l in stderr.splitlines()]


# 1. Output levels


def test_a_conversion_prints_one_summary_line_and_the_grouped_warning(tmp_path):
    out = str(tmp_path / "o.onnx")
    r = run_qconv("convert", EXAMPLE, out, "--format", "qop")
    assert r.returncode == 0
    assert levels(r.stderr) == ["warning", "info"], r.stderr
    warning, summary = r.stderr.splitlines()
    # 61 pairs over three convs: once, with the flag that fixes it
    assert warning.startswith(f"qconv: warning: {EXAMPLE}: 61 weight pairs in 3 of 3 u8 x s8 nodes can saturate")
    assert "--weight-type uint8" in warning
    assert summary == (f"qconv: info: {EXAMPLE}: wrote {out}: 1 GlobalAveragePool left in QDQ form, 1 MaxPool on int8, "
                       "3 QLinearConv, 2 bias kept at x_scale*w_scale; 1 left as they were; 3 advisories (-v)")


def test_verbose_names_every_node_and_the_report_always_holds_them(tmp_path):
    out, report = str(tmp_path / "o.onnx"), str(tmp_path / "r.json")
    r = run_qconv("convert", EXAMPLE, out, "--format", "qop", "-v", "--report", report)
    notes = [l for l in r.stderr.splitlines() if l.startswith("qconv: note: ")]
    assert {l.split(": ")[3] for l in notes} == {"globalaveragepool_19", "conv_4", "conv_12", "conv_17"}, notes
    assert all(l.startswith(f"qconv: note: {EXAMPLE}: ") for l in notes)
    quiet_report = str(tmp_path / "q.json")
    assert run_qconv("convert", EXAMPLE, out, "--format", "qop", "--report", quiet_report).returncode == 0
    for path in (report, quiet_report):  # per-node detail in the report at every verbosity
        item = json.load(open(path))["items"][0]
        assert {w["node"] for w in item["warnings"] if w["kind"] == "advisory"} == {"conv_4", "conv_12", "conv_17"}
        assert [f["node"] for f in item["refusals"]] == ["globalaveragepool_19"]
    vv = run_qconv("convert", EXAMPLE, out, "--format", "qop", "-vv")
    assert "debug" in levels(vv.stderr)


def test_quiet_prints_errors_only_and_a_batch_its_total(tmp_path):
    out = str(tmp_path / "o.onnx")
    r = run_qconv("convert", EXAMPLE, out, "--format", "qop", "-q")
    assert (r.returncode, r.stderr) == (0, "")
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    d = tmp_path / "out"
    d.mkdir()
    b = run_qconv("convert", "--format", "qop", "-q", "--out-dir", str(d), EXAMPLE, str(tmp_path / "bad.onnx"))
    assert b.returncode == 3
    lines = b.stderr.splitlines()
    assert levels(b.stderr) == ["error", "error"], b.stderr
    assert lines[0].startswith(f"qconv: error: {tmp_path / 'bad.onnx'}: ")
    assert lines[1] == f"qconv: error: batch: 1 of 2 models converted into {d}, 1 failed (exit 3)"
    ok = run_qconv("convert", "--format", "qop", "-q", "--out-dir", str(d), EXAMPLE)
    assert ok.stderr == f"qconv: info: batch: 1 of 1 model converted into {d}\n"


# 2. Severities


def test_verify_exits_1_on_errors_only_and_fails_warnings_with_werror():
    base = run_qconv("verify", EXAMPLE, "--target", "onnxruntime", "--json")
    j = json.loads(base.stdout)
    assert base.returncode == 0 and j["fail_on"] == "error"
    assert {f["severity"] for f in j["findings"]} == {"warning"}  # saturation, for onnxruntime
    for flags in (["--werror"], ["--fail-on", "warning"], ["--fail-on", "note"]):
        assert run_qconv("verify", EXAMPLE, "--target", "onnxruntime", *flags).returncode == 1, flags
    ignored = run_qconv("verify", EXAMPLE, "--target", "onnxruntime", "--werror", "--ignore", "saturation", "--json")
    assert ignored.returncode == 0
    assert json.loads(ignored.stdout)["findings"] == [] and json.loads(ignored.stdout)["ignored"] == 3
    text = run_qconv("verify", EXAMPLE, "--target", "onnxruntime", "--ignore", "saturation,annotation")
    assert text.stderr == f"qconv: info: {EXAMPLE}: no findings; 3 ignored\n"
    # without a target saturation is a note: it fails only --fail-on note
    plain = run_qconv("verify", EXAMPLE)
    assert plain.returncode == 0 and all(": note: saturation: " in l for l in plain.stdout.splitlines())
    assert run_qconv("verify", EXAMPLE, "--werror").returncode == 0
    assert run_qconv("verify", EXAMPLE, "--fail-on", "note").returncode == 1


def test_an_unknown_ignore_kind_is_a_usage_error_listing_the_kinds():
    r = run_qconv("verify", EXAMPLE, "--ignore", "saturations")
    assert r.returncode == 2
    assert r.stderr.startswith("qconv: error: --ignore saturations: no such kind of finding; verify's kinds are ")
    assert "saturation, " in r.stderr and r.stdout == ""


# 3. Nothing quantized


def float_model(tmp_path) -> str:
    path = str(tmp_path / "float.onnx")
    onnx.save(models.small_cnn(), path)
    return path


def test_a_model_with_nothing_quantized_says_so_and_require_change_fails_it(tmp_path):
    src, out = float_model(tmp_path), str(tmp_path / "o.onnx")
    r = run_qconv("convert", src, out, "--format", "qop")
    assert r.returncode == 0 and levels(r.stderr) == ["warning", "info"]
    assert r.stderr.splitlines()[0].startswith(f"qconv: warning: {src}: nothing in this model is quantized")
    os.remove(out)
    strict = run_qconv("convert", src, out, "--format", "qop", "--require-change")
    assert strict.returncode == 7 and not os.path.exists(out)
    assert strict.stderr == (f"qconv: error: {src}: --require-change: nothing in this model is quantized; nothing "
                             "was written\n")
    v = run_qconv("verify", src, "--json")
    assert v.returncode == 0
    assert [(f["kind"], f["severity"]) for f in json.loads(v.stdout)["findings"]] == [("no-quantization", "warning")]
    # a quantized model whose groups are already in the asked form: no group rewritten
    qdq = str(tmp_path / "qdq.onnx")
    assert run_qconv("convert", EXAMPLE, qdq, "--format", "qdq", "-q").returncode == 0
    again = run_qconv("convert", qdq, str(tmp_path / "again.onnx"), "--format", "qdq", "--require-change")
    assert again.returncode == 7 and "no group was rewritten" in again.stderr
    assert run_qconv("convert", EXAMPLE, out, "--format", "qop", "--require-change", "-q").returncode == 0


# 4. Usage errors


@pytest.mark.parametrize("args, words", [
    (["convert", "a.onnx", "b.onnx", "--fromat", "qop"], "unknown flag --fromat for 'qconv convert'; did you mean --format?"),
    (["convert", "a.onnx", "b.onnx", "--format=qop", "--raise-weight-scales"],
     "unknown flag --raise-weight-scales for 'qconv convert'; did you mean --raise-weight-scale?"),
    (["verify", "m.onnx", "--werorr"], "unknown flag --werorr for 'qconv verify'; did you mean --werror?"),
    (["convert", "a.onnx", "b.onnx", "--frobnicate"], "unknown flag --frobnicate for 'qconv convert' ("),
    (["cnvert", "a.onnx", "b.onnx"], "unknown subcommand 'cnvert' (did you mean 'convert'?)"),
    (["frobnicate"], "unknown subcommand 'frobnicate'; qconv's are convert, verify, inspect, targets, passes, help"),
    ([], "give a subcommand: convert, verify"),
    (["convert", "a.onnx", "b.onnx", "--format", "qop", "-j", "4"], "-j/--jobs converts a batch's models at once: it goes with --out-dir"),
    (["convert", "-", "b.onnx", "--format", "qop"], "a model path '-': qconv reads and writes named files, not standard input"),
    (["convert", "a.onnx", "-", "--format", "qop"], "a model path '-': qconv reads and writes named files"),
    (["verify", "-"], "qconv verify '-': qconv reads and writes named files"),
    (["convert", "a.onnx", "--format", "qop"], "qconv convert takes IN OUT, or --out-dir DIR IN... (it was given 1 path"),
    (["verify"], "qconv verify: give the MODEL to check"),
    (["help", "cnvert"], "qconv help cnvert: no such subcommand (did you mean 'convert'?)"),
])
def test_usage_errors_are_exit_2_in_one_line_naming_the_cause(tmp_path, args, words):
    r = subprocess.run([qconv_bin(), *args], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("qconv: error: "), r.stderr
    assert words in r.stderr, r.stderr
    assert os.listdir(tmp_path) == []  # nothing written, no file named '-'


def test_help_and_version_work_everywhere():
    top = run_qconv("help")
    assert top.returncode == 0 and "convert" in top.stdout and "verify" in top.stdout
    for sub in ("convert", "verify", "inspect", "targets", "passes"):
        r = run_qconv("help", sub)
        assert r.returncode == 0 and r.stdout == run_qconv(sub, "--help").stdout
    assert "--require-change" in run_qconv("help", "convert").stdout
    v = run_qconv("--version")
    assert v.returncode == 0 and v.stdout == run_qconv("convert", "--version").stdout
    assert re.match(r"qconv \d+\.\d+\.\d+ \(commit \S+\)\nbuilt with ONNX \S+ .*protobuf \d+\.\d+\.\d+\n$", v.stdout)


# 5. --opset without shape information


def test_opset_infers_element_types_where_the_model_declares_none(tmp_path):
    src = str(tmp_path / "bare.onnx")
    m = onnx.load(EXAMPLE)
    del m.graph.value_info[:]  # as quantize_static writes many models: no shape information
    onnx.save(m, src)
    xs = models.sample_inputs(m, 2, seed=5)
    for opset in (19, 21):
        out = str(tmp_path / f"o{opset}.onnx")
        r = run_qconv("convert", src, out, "--format", "qdq", "--opset", str(opset))
        assert r.returncode == 0, r.stderr
        assert [o.version for o in onnx.load(out).opset_import if o.domain == ""] == [opset]
        for a, b in zip(reference.outputs(src, xs), reference.outputs(out, xs)):
            np.testing.assert_array_equal(a, b)
    # where a type cannot be known it still refuses, naming the value: a graph input of no type
    # declared feeding MaxPool, whose accepted types changed at opset 12
    g = helper.make_graph([helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2])], "g",
                          [helper.make_value_info("x", onnx.TypeProto())],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    bare = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    bare.ir_version = 8
    unknowable = str(tmp_path / "unknowable.onnx")
    onnx.save(bare, unknowable)
    r = run_qconv("convert", unknowable, str(tmp_path / "u.onnx"), "--format", "qdq", "--opset", "10")
    assert r.returncode == 4, r.stderr
    assert r.stderr == (f"qconv: error: {unknowable}: pool: cannot declare opset 10 (the model declares 13): MaxPool "
                        "version 12 is in the way: the element type of 'x' is neither declared nor inferable from what "
                        "produces it, and this version changed the accepted types (int8,uint8)\n")


# 7. Progress


def run_on_a_terminal(*args: str) -> tuple[int, bytes]:
    parent, child = pty.openpty()
    env = dict(os.environ, QCONV_PROGRESS_DELAY_MS="0")  # the line from the start, not after a second
    p = subprocess.Popen([qconv_bin(), *args], stdout=subprocess.DEVNULL, stderr=child, env=env)
    os.close(child)
    seen = b""
    while True:
        try:
            chunk = os.read(parent, 65536)
        except OSError:  # the other end closed
            break
        if not chunk:
            break
        seen += chunk
    os.close(parent)
    return p.wait(timeout=60), seen


def test_a_progress_line_only_on_a_terminal_and_cleared_before_other_lines(tmp_path):
    code, seen = run_on_a_terminal("convert", EXAMPLE, str(tmp_path / "o.onnx"), "--format", "qop")
    assert code == 0
    text = seen.decode()
    assert f"qconv: {EXAMPLE}: " in text and "\r\x1b[K" in text, text
    # every ordinary line starts on a cleared line, and the progress line is gone at the end
    for line in text.replace("\r\n", "\n").split("\n"):
        if "qconv: info:" in line or "qconv: warning:" in line:
            assert line.split("\r\x1b[K")[-1].startswith("qconv: "), repr(line)
    assert text.endswith("\n") or text.endswith("\r\x1b[K")
    # a batch counts its models
    d = tmp_path / "out"
    d.mkdir()
    code, seen = run_on_a_terminal("convert", "--format", "qop", "--out-dir", str(d), EXAMPLE)
    assert code == 0 and b"qconv: batch: " in seen and b" models done (" in seen
    # not a terminal: never (the same run with stderr a pipe), and never with -q
    piped = subprocess.run([qconv_bin(), "convert", EXAMPLE, str(tmp_path / "p.onnx"), "--format", "qop"],
                           capture_output=True, env=dict(os.environ, QCONV_PROGRESS_DELAY_MS="0"))
    assert b"\r" not in piped.stderr and b"\x1b" not in piped.stderr
    code, seen = run_on_a_terminal("convert", EXAMPLE, str(tmp_path / "q.onnx"), "--format", "qop", "-q")
    assert code == 0 and seen == b""
