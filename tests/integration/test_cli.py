"""The qconv command as users and batch scripts meet it: exit codes, one-line diagnostics,
no partial output, untouched input, deterministic output, --dump, and refusals that leave a
correct model behind."""
import hashlib
import os
import re
import resource
import signal
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import models
from conftest import EXAMPLE, ROOT, data_file, judge_qop, op_counts, qconv_bin, run_qconv, run_traced, save_external

CASE = ("small_cnn", True, "uint8")
USAGE, BAD_INPUT, UNSUPPORTED, OUTPUT = 2, 3, 4, 5


def digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def listing(d) -> list[str]:
    return sorted(os.listdir(d))


def error_line(stderr: str) -> str:
    lines = [l for l in stderr.splitlines() if l.startswith("qconv: error:")]
    assert len(lines) == 1, stderr
    return lines[0]


def test_missing_input_is_exit_3_naming_the_file(tmp_path):
    r = run_qconv("convert", str(tmp_path / "nope.onnx"), str(tmp_path / "out.onnx"), "--format", "qop")
    assert r.returncode == BAD_INPUT
    assert error_line(r.stderr) == f"qconv: error: {tmp_path / 'nope.onnx'}: cannot open: No such file or directory"
    assert listing(tmp_path) == []


@pytest.mark.parametrize("content", [b"", b"hello, I am text", bytes(range(256)) * 4], ids=["empty", "text", "bytes"])
def test_not_a_model_is_exit_3(tmp_path, content):
    src = tmp_path / "in.onnx"
    src.write_bytes(content)
    r = run_qconv("convert", str(src), str(tmp_path / "out.onnx"), "--format", "qop")
    assert r.returncode == BAD_INPUT
    assert error_line(r.stderr).startswith(f"qconv: error: {src}: ")
    assert listing(tmp_path) == ["in.onnx"]


def test_dangling_edge_names_file_and_node(tmp_path):
    g = helper.make_graph([helper.make_node("Relu", ["ghost"], ["y"], name="relu_3")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    src = str(tmp_path / "in.onnx")
    onnx.save(m, src)
    r = run_qconv("convert", src, str(tmp_path / "out.onnx"), "--format", "qdq")
    assert r.returncode == BAD_INPUT
    line = error_line(r.stderr)
    assert src in line and "relu_3" in line and "ghost" in line


@pytest.mark.parametrize("args", [["--format", "int4"], ["--format", "qop", "--passes", "nope"], [], ["--bogus"]],
                         ids=["bad-format", "unknown-pass", "no-format", "unknown-flag"])
def test_usage_errors_are_exit_2(quantized, tmp_path, args):
    r = run_qconv("convert", quantized(CASE), str(tmp_path / "out.onnx"), *args)
    assert r.returncode == USAGE
    assert r.stderr.startswith("qconv: error:")
    assert listing(tmp_path) == []


def test_unwritable_output_is_exit_5(quantized, tmp_path):
    r = run_qconv("convert", quantized(CASE), str(tmp_path / "missing_dir" / "out.onnx"), "--format", "qop")
    assert r.returncode == OUTPUT
    assert "missing_dir" in error_line(r.stderr)


def test_output_over_input_is_refused_and_input_untouched(quantized, tmp_path):
    src = str(tmp_path / "in.onnx")
    with open(quantized(CASE), "rb") as f, open(src, "wb") as g:
        g.write(f.read())
    before = digest(src)
    r = run_qconv("convert", src, src, "--format", "qop")
    assert r.returncode == USAGE
    assert digest(src) == before


def test_input_untouched_and_output_deterministic(quantized, tmp_path):
    src = quantized(CASE)
    before = digest(src)
    a, b = str(tmp_path / "a.onnx"), str(tmp_path / "b.onnx")
    assert run_qconv("convert", src, a, "--format", "qop").returncode == 0
    assert run_qconv("convert", src, b, "--format", "qop").returncode == 0
    assert digest(src) == before
    assert digest(a) == digest(b)
    assert listing(tmp_path) == ["a.onnx", "b.onnx"]  # no temporary file left


def test_dump_prints_the_ir_after_every_pass(quantized, tmp_path):
    r = run_qconv("convert", quantized(CASE), str(tmp_path / "o.onnx"), "--format", "qop", "--dump")
    assert r.returncode == 0
    headers = [l for l in r.stdout.splitlines() if l.startswith("; IR after")]
    assert headers == ["; IR after parse", "; IR after validate", "; IR after fold-constants", "; IR after lower-contrib-qdq",
                       "; IR after lower-vitis-qdq", "; IR after lower-qonnx-quant", "; IR after lower-fake-quantize",
                       "; IR after requantize-shared-bias", "; IR after fold-producers", "; IR after lower-primitive-qdq",
                       "; IR after lower-integer-ops", "; IR after lift-float-form", "; IR after pair-qdq", "; IR after scalarize-one-channel", "; IR after requantize-per-tensor", "; IR after fuse-matmul-nbits",
                       "; IR after fuse-gather-block-quantized", "; IR after move-on-int8", "; IR after gemm-as-conv",
                       "; IR after fuse-qlinear-conv", "; IR after fuse-qlinear-matmul", "; IR after fuse-contrib",
                       "; IR after name-leftovers",
                       "; IR after shift-types", "; IR after dequantize-moves", "; IR after widen-packed", "; IR after matmul-as-conv",
                       "; IR after fold-dequantized-constants",
                       "; IR after requantize-symmetric", "; IR after requantize-blocked", "; IR after requantize-wide",
                       "; IR after approximate-gelu", "; IR after add-zero-points", "; IR after trim-padding", "; IR after fold-shapes",
                       "; IR after reflect-pad-as-gather", "; IR after global-max-pool-as-reduce-max", "; IR after fold-constant-weights", "; IR after declare-shapes",
                       "; IR after check-zero-points",
                       "; IR after check-saturation", "; IR after redeclare-opset", "; IR after check-target",
                       "; IR after check-ops", "; IR after refuse-foreign-ops"]
    assert "= QLinearConv(" in r.stdout


def test_passes_flag_runs_only_the_named_passes(quantized, tmp_path):
    out = str(tmp_path / "o.onnx")
    r = run_qconv("convert", quantized(CASE), out, "--format", "qop", "--passes", "fold-producers,pair-qdq",
                  "--time-passes")
    assert r.returncode == 0
    assert op_counts(out).get("QLinearConv", 0) == 0
    # an info line as every other (issue 36: it used a level the docs do not list): qconv: info: FILE: time: STAGE
    times = [line for line in r.stderr.splitlines() if ": time: " in line]
    assert times and all(line.startswith(f"qconv: info: {quantized(CASE)}: time: ") for line in times), r.stderr
    assert any(": time: pair-qdq " in line for line in times)


def test_passes_lists_the_registry():
    r = subprocess.run([qconv_bin(), "passes"], capture_output=True, text=True)
    assert r.returncode == 0
    assert "fuse-qlinear-conv" in r.stdout and ("--format qdq: validate,fold-constants,lower-contrib-qdq,lower-vitis-qdq,lower-qonnx-quant,"
                                                     "lower-fake-quantize,requantize-shared-bias,unfuse-qop,lower-matmul-nbits,lower-gather-block-quantized,unfuse-integer-ops,fold-producers,lower-primitive-qdq,"
                                                     "lower-integer-ops,lift-float-form,pair-qdq,scalarize-one-channel,requantize-per-tensor,shift-types,"
                                                     "dequantize-moves,widen-packed,matmul-as-conv,fold-dequantized-constants,requantize-symmetric,"
                                                     "requantize-blocked,requantize-wide,approximate-gelu,add-zero-points,trim-padding,fold-shapes,"
                                                     "reflect-pad-as-gather,global-max-pool-as-reduce-max,fold-constant-weights,declare-shapes,"
                                                     "check-zero-points,check-saturation,"
                                                     "redeclare-opset,check-target,check-ops,refuse-foreign-ops") in r.stdout
    # every stage shows, the hidden ones included
    for stage in ("validate", "redeclare-opset", "refuse-foreign-ops"):
        assert any(line.split()[0] == stage for line in r.stdout.splitlines() if line.strip())
    # under its phase, the phases in pipeline order, each pass's file in its phase's folder
    phases, folder = [], {"read": "read", "canonicalize": "canonical", "write QOp": "qop", "fit a target": "target"}
    for line in r.stdout.splitlines():
        if line.endswith(":") and not line.startswith(" "):
            phases.append(line[:-1])
        elif line.startswith("  "):
            name = line.split()[0]
            path = os.path.join(ROOT, "lib", "qconv", "passes", folder[phases[-1]], name.replace("-", "_") + ".cpp")
            assert os.path.exists(path), (name, path)
    assert phases == ["read", "canonicalize", "write QOp", "fit a target"]


def test_a_refused_group_stays_in_qdq_form_and_stays_correct(quantized, tmp_path):
    """Make one weight zero point a graph input too (overridable at run time): not constant."""
    m = onnx.load(quantized(CASE))
    convs = [n for n in m.graph.node if n.op_type == "Conv"]
    producer = {o: n for n in m.graph.node for o in n.output}
    dq_w = producer[convs[1].input[1]]
    zp = next(t for t in m.graph.initializer if t.name == dq_w.input[2])
    m.graph.input.append(helper.make_tensor_value_info(zp.name, zp.data_type, list(zp.dims)))
    src, dst = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    onnx.save(m, src)
    r = run_qconv("convert", src, dst, "--format", "qop", "-v")
    assert r.returncode == 0, r.stderr
    assert f"qconv: note: {src}: {convs[1].name}: not fused: weight zero point is not constant" in r.stderr.splitlines()
    counts = op_counts(dst)
    assert counts["QLinearConv"] == 2 and counts["Conv"] == 1
    xs = models.sample_inputs(models.small_cnn(), 4, seed=3)
    judge_qop(src, dst, xs)


def test_metadata_and_doc_strings_survive(quantized, tmp_path):
    m = onnx.load(quantized(CASE))
    m.doc_string = "keep me"
    onnx.helper.set_model_props(m, {"owner": "team-a"})
    pool = next(n for n in m.graph.node if n.op_type == "GlobalAveragePool")
    pool.doc_string = "node doc"
    conv = next(n for n in m.graph.node if n.op_type == "Conv")
    conv.doc_string = "conv doc"
    src, dst = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    onnx.save(m, src)
    assert run_qconv("convert", src, dst, "--format", "qop").returncode == 0
    out = onnx.load(dst)
    assert out.doc_string == "keep me"
    assert {p.key: p.value for p in out.metadata_props}["owner"] == "team-a"
    assert out.producer_name == m.producer_name
    assert any(n.doc_string == "node doc" and n.op_type == "GlobalAveragePool" for n in out.graph.node)
    fused = next(n for n in out.graph.node if n.name == conv.name)
    assert fused.op_type == "QLinearConv" and fused.doc_string == "conv doc"


def test_bundled_example_converts_and_matches_onnxruntime(tmp_path):
    """The README's first command converts this file: it must keep working."""
    src = EXAMPLE
    dst = str(tmp_path / "example_qop.onnx")
    r = run_qconv("convert", src, dst, "--format", "qop")
    assert r.returncode == 0, r.stderr
    assert op_counts(dst).get("QLinearConv", 0) == 3 and op_counts(dst).get("Conv", 0) == 0
    xs = models.sample_inputs(models.small_cnn(), 4, seed=11)
    judge_qop(src, dst, xs)


def external_copy(tmp_path) -> str:
    """The bundled example with its tensors in external data, in a folder of its own."""
    d = tmp_path / "in"
    d.mkdir()
    return save_external(onnx.load(EXAMPLE), d)


def traced(tmp_path, calls: str, *args: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    trace = str(tmp_path / "trace")
    r = run_traced(trace, calls, *args)
    with open(trace) as f:
        return r, [line.split(None, 1)[1] if line[0].isdigit() else line for line in f.read().splitlines()]


def synced_paths(trace: list[str]) -> list[str]:
    """The path behind each fsync'd descriptor, in call order (from the openat that returned it)."""
    opened, synced = {}, []
    for line in trace:  # a path relative to a folder's descriptor (the output's, opened once) is resolved
        if m := re.match(r'openat\((AT_FDCWD|\d+), "([^"]+)", .*\) = (\d+)$', line):
            base = "" if m.group(1) == "AT_FDCWD" else opened.get(m.group(1), "?")
            path = m.group(2) if not base else base if m.group(2) == "." else os.path.join(base, m.group(2))
            opened[m.group(3)] = path
        elif m := re.match(r"fsync\((\d+)\)", line):
            synced.append(opened[m.group(1)])
    return synced


def test_fsync_flushes_the_files_before_renaming_them_and_the_folder_after(tmp_path):
    """The files are flushed before they are put in place (renamed, or linked at a free name),
    the folder after."""
    src = external_copy(tmp_path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = str(out_dir / "out.onnx")
    calls = "openat,fsync,rename,renameat,renameat2,linkat"
    r, trace = traced(tmp_path, calls, "convert", src, out, "--format", "qop", "--fsync")
    assert r.returncode == 0, r.stderr
    synced = synced_paths(trace)
    # what puts a file in place: a rename, or a link straight at a free name (not a hidden one)
    renames = [i for i, line in enumerate(trace)
               if line.startswith("rename") or (line.startswith("linkat(") and ".qconv-" not in line)]
    syncs = [i for i, line in enumerate(trace) if line.startswith("fsync(")]
    assert len(renames) == 2 and len(syncs) == 3, trace
    if any("O_TMPFILE" in line for line in trace):  # anonymous temporaries, opened on the output's folder
        assert synced[:2] == [str(out_dir), str(out_dir)]
    else:
        assert [os.path.basename(p).split(".qconv-")[0] for p in synced[:2]] == [".out.onnx.data", ".out.onnx"]
    assert synced[2] == str(out_dir)
    assert syncs[1] < renames[0] and renames[1] < syncs[2]  # files flushed before the renames, folder after
    with open(out, "rb") as f:
        durable = f.read()

    # without the flag: no fsync at all, and the same bytes
    r, trace = traced(tmp_path, calls, "convert", src, out, "--format", "qop")
    assert r.returncode == 0, r.stderr
    assert synced_paths(trace) == []
    with open(out, "rb") as f:
        assert f.read() == durable
    assert listing(out_dir) == sorted(["out.onnx", os.path.basename(data_file(out))])


def limit_file_size(limit: int):
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the signal; kept across exec
    return apply


@pytest.mark.parametrize("external", [False, True], ids=["model", "data-file"])
def test_output_that_cannot_fit_fails_before_writing_and_leaves_nothing(tmp_path, external):
    """The output's size is reserved (fallocate) before anything is written: a file that cannot
    be that large fails at once, exit 5, naming the file, with no temporary file left."""
    src = external_copy(tmp_path) if external else EXAMPLE
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = str(out_dir / "out.onnx")
    r = subprocess.run([qconv_bin(), "convert", src, out, "--format", "qop"], capture_output=True, text=True,
                       timeout=60, preexec_fn=limit_file_size(1024))
    assert r.returncode == OUTPUT, r.stderr
    target = out + "'s data file" if external else out
    assert re.fullmatch(rf"qconv: error: {re.escape(target)}: cannot allocate \d+ bytes: File too large",
                        error_line(r.stderr)), r.stderr
    assert listing(out_dir) == []
