"""The API under hostile use (issue 46): paths cut at a NUL, names that are not UTF-8, Ctrl-C in
the caller, files shortened under a conversion, the working folder changed by another thread,
and arguments of the wrong type. Each test reproduces what broke on 09f6d0c.

The signal tests run a child interpreter (a signal must not reach pytest's own process) and
are bounded: a few instants over one measured conversion."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import onnx
import pytest

import qconv
from wheel_env import EXAMPLE, ROOT, build_cli

sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import models  # noqa: E402  (its builders need numpy and onnx only)


def weights_model(k: int = 2048, n: int = 2048, branches: int = 6, seed: int = 3, scale: float = 0.01) -> onnx.ModelProto:
    """u8 activations x s8 weights (the saturation check reads each weight in place)."""
    return models.wide_matmuls(k, n, branches, seed, scale)


def save_external(model: onnx.ModelProto, folder: str, name: str = "m.onnx") -> str:
    path = os.path.join(folder, name)
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location=name + ".data",
              size_threshold=1024)
    return path


def listing(folder) -> dict[str, bytes]:
    return {p: open(os.path.join(folder, p), "rb").read() for p in sorted(os.listdir(folder))}


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> str:
    """A 200 MB model (inline): a conversion long enough to be interrupted."""
    path = str(tmp_path_factory.mktemp("big") / "big.onnx")
    onnx.save(weights_model(4096, 4096, 12), path)
    return path


# ---- 1. a NUL in a path; names that are not UTF-8 -----------------------------------------------


def test_a_nul_in_any_path_is_a_usage_error_and_nothing_is_written(tmp_path):
    """'in.onnx\\0.x' would reach the system as 'in.onnx': the user's file, replaced (09f6d0c)."""
    victim = tmp_path / "in.onnx"
    victim.write_bytes(b"the user's model")
    src = save_external(weights_model(64, 64, 1), str(tmp_path))
    before = listing(tmp_path)
    cases = [
        lambda: qconv.convert(src, str(victim) + "\0.x", format="qop"),
        lambda: qconv.convert(str(victim) + "\0.x", str(tmp_path / "o.onnx"), format="qop"),
        lambda: qconv.convert(src, str(tmp_path / "o.onnx"), format="qop", report=str(victim) + "\0.json"),
        lambda: qconv.convert([src + "\0x"], out_dir=str(tmp_path), format="qop"),
        lambda: qconv.convert([src], out_dir=str(tmp_path) + "\0/x", format="qop"),
        lambda: qconv.convert(src, os.fsencode(str(victim)) + b"\0.x", format="qop"),
        lambda: qconv.verify(str(victim) + "\0.x"),
        lambda: qconv.inspect(str(victim) + "\0.x"),
    ]
    for k, case in enumerate(cases):
        with pytest.raises(qconv.UsageError) as e:
            case()
        assert "NUL" in e.value.message and e.value.exit_code == 2, (k, e.value.message)
    assert listing(tmp_path) == before


def test_the_engine_refuses_a_nul_in_a_path_itself(tmp_path):
    """Below the package: the binding's own entry (what another binding would call)."""
    from qconv import _qconv

    victim = tmp_path / "in.onnx"
    victim.write_bytes(b"the user's model")
    code, _, records, _, _ = _qconv.convert(os.fsencode(EXAMPLE), None, os.fsencode(str(victim)) + b"\0.x", False, [],
                                           b"", 1, b"", b"", "qop", "", [], False, False, False, False, False, False,
                                           False, 0, 0, True, False, 0, False, 1, False)
    assert code == 2 and [(level, kind) for level, kind, *_ in records] == [("error", "error")]
    assert b"holds a NUL byte" in records[0][4] and records[0][4] == records[0][5]
    assert victim.read_bytes() == b"the user's model"


def test_a_file_name_that_is_not_utf8_converts_by_str_bytes_and_pathlike(tmp_path):
    name = b"in\xff.onnx"
    folder = os.fsencode(str(tmp_path))
    with open(os.path.join(folder, name), "wb") as f:
        f.write(open(EXAMPLE, "rb").read())
    (listed,) = [p for p in os.listdir(tmp_path)]  # what os.listdir gives: 'in\udcff.onnx'
    assert listed == "in\udcff.onnx"

    class BytesPath(os.PathLike):
        def __init__(self, p: bytes) -> None:
            self.p = p

        def __fspath__(self) -> bytes:
            return self.p

    expected = qconv.convert(EXAMPLE, format="qop").model_bytes
    by_str = qconv.convert(str(tmp_path / listed), str(tmp_path / "out\udcfe.onnx"), format="qop",
                           report=str(tmp_path / "r\udcfd.json"))
    assert by_str.output == str(tmp_path / "out\udcfe.onnx")
    assert open(os.path.join(folder, b"out\xfe.onnx"), "rb").read() == expected
    assert json.load(open(os.path.join(folder, b"r\xfd.json")))["exit_code"] == 0
    qconv.convert(BytesPath(os.path.join(folder, name)), os.path.join(folder, b"out2\xfe.onnx"), format="qop")
    assert open(os.path.join(folder, b"out2\xfe.onnx"), "rb").read() == expected
    assert qconv.verify(BytesPath(os.path.join(folder, name))).failed is False
    assert qconv.inspect(str(tmp_path / listed))["model"]
    # a batch of such names, and the messages say the bytes they cannot print
    os.mkdir(os.path.join(folder, b"outdir\xfc"))
    qconv.convert([os.path.join(folder, name)], out_dir=os.path.join(folder, b"outdir\xfc"), format="qop")
    assert open(os.path.join(folder, b"outdir\xfc", name), "rb").read() == expected
    with pytest.raises(qconv.InvalidModelError) as e:
        qconv.convert(str(tmp_path / "nosuch\udcff.onnx"), format="qop")
    assert "nosuch\\xff.onnx" in e.value.message
    # the command takes the same names
    r = subprocess.run([os.fsencode(build_cli()), b"convert", os.path.join(folder, name),
                        os.path.join(folder, b"cli\xfe.onnx"), b"--format", b"qop", b"-q"], capture_output=True)
    assert r.returncode == 0, r.stderr
    assert open(os.path.join(folder, b"cli\xfe.onnx"), "rb").read() == expected


# ---- 2. Ctrl-C ----------------------------------------------------------------------------------

CHILD = textwrap.dedent("""
    import atexit, json, os, signal, sys, threading, time
    # Python's own Ctrl-C handler, as an interactive user's Python has it: a process started with
    # SIGINT ignored (a background job of a non-interactive shell: a CI runner's, nohup's) inherits
    # the ignoring, and then Python installs no handler and SIGINT never arrives
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import qconv
    mode, src, out = sys.argv[1], sys.argv[2], sys.argv[3]
    atexit.register(lambda: print(json.dumps({"atexit": True}), flush=True))
    report = {}
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        try:
            report["started"] = time.monotonic()
            if mode == "lone":
                qconv.convert(src, out, format="qop")
            elif mode == "batch":
                qconv.convert(src.split(","), out_dir=out, format="qop", jobs=2)
            else:  # a thread converts; the main thread waits on it (an Event: CPython 3.11's
                # Thread.join returns at once after a KeyboardInterrupt interrupted an earlier join)
                done = threading.Event()
                def work():
                    try:
                        qconv.convert(src, out, format="qop")
                        report["worker"] = "finished"
                    finally:
                        done.set()
                threading.Thread(target=work).start()
                while not done.wait(0.01):
                    pass
            report["returned"] = True
            report["ended"] = time.monotonic()
        except KeyboardInterrupt:
            report["interrupted_at"] = time.monotonic()
            if mode == "thread":
                done.wait()
        if "returned" in report:  # the signal is still to come: take it here, not in the exit
            try:
                time.sleep(30)
            except KeyboardInterrupt:
                report["after_return"] = True
    finally:
        report["finally"] = True
    print(json.dumps(report), flush=True)
""")


def interrupt(mode: str, src: str, out: str, after: float) -> tuple[dict, float]:
    """Run CHILD; SIGINT `after` seconds into the call. (Its report, the time SIGINT was sent.)
    The report says when the call started ("started", "lag": how long after "go") and, if it
    returned, when ("ended"): monotonic clocks, comparable across processes on Linux."""
    p = subprocess.Popen([sys.executable, "-c", CHILD, mode, src, out], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    p.stdin.write("go\n")
    p.stdin.flush()
    go = time.monotonic()
    time.sleep(after)
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=120)
    assert p.returncode == 0, f"the interpreter died (exit {p.returncode}): {stderr}"
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    assert lines[-1] == {"atexit": True}, stdout  # the interpreter exited as it does, atexit too
    report = lines[0]
    if "started" in report:
        report["lag"] = report["started"] - go
    return report, sent


class Instants:
    """When to send SIGINT: fractions of the call as the child runs it. The first guess is the
    parent's own conversion; each child that finished first corrects it (CI's runner converted
    in the child faster than the parent had, and every instant of a fixed schedule fell after
    the commit)."""

    FRACTIONS = (0.2, 0.4, 0.6, 0.8, 0.1, 0.3, 0.5, 0.7, 0.05, 0.15)

    def __init__(self, took: float) -> None:
        self.took, self.lag = took, 0.0

    def after(self, k: int) -> float:
        return self.lag + self.took * self.FRACTIONS[k % len(self.FRACTIONS)]

    def learn(self, report: dict) -> None:
        if "lag" in report:
            self.lag = max(0.0, report["lag"])
        if "ended" in report:
            self.took = min(self.took, report["ended"] - report["started"])


def measured(call) -> float:
    t = time.monotonic()
    call()
    return time.monotonic() - t


def test_ctrl_c_cancels_a_lone_conversion_and_commits_nothing(big, tmp_path):
    out = tmp_path / "out.onnx"
    took = measured(lambda: qconv.convert(big, str(out), format="qop"))
    new = out.read_bytes()
    latencies, instants, tried = [], Instants(took), 0
    while len(latencies) < 3 and tried < len(Instants.FRACTIONS):
        out.write_bytes(b"old output")
        report, sent = interrupt("lone", big, str(out), instants.after(tried))
        tried += 1
        instants.learn(report)
        assert report["finally"]
        assert os.listdir(tmp_path) == ["out.onnx"], os.listdir(tmp_path)  # no temporary
        if "interrupted_at" in report and out.read_bytes() == b"old output":
            latencies.append(report["interrupted_at"] - sent)
        else:  # arrived after the commit (or after the call): the conversion had finished, whole
            assert out.read_bytes() == new, report
    print(f"a 200 MB conversion of {took:.3f} s ({instants.took:.3f} s in the child): {tried} instants, "
          f"KeyboardInterrupt after {[round(x, 3) for x in latencies]} s")
    assert latencies, f"none of {tried} instants fell before the commit"


def test_ctrl_c_cancels_a_batch_and_the_interpreter_lives(big, tmp_path):
    inputs = []
    for k in range(3):
        folder = tmp_path / f"in{k}"
        folder.mkdir()
        os.link(big, folder / f"m{k}.onnx")
        inputs.append(str(folder / f"m{k}.onnx"))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    took = measured(lambda: qconv.convert(inputs, out_dir=str(out_dir), format="qop", jobs=2))
    whole = listing(out_dir)
    interrupted, instants, tried = 0, Instants(took), 0
    while tried < 3 or (not interrupted and tried < len(Instants.FRACTIONS)):
        for p in os.listdir(out_dir):
            os.remove(out_dir / p)
        report, _ = interrupt("batch", ",".join(inputs), str(out_dir), instants.after(tried))
        tried += 1
        instants.learn(report)
        assert report["finally"], report  # not killed (09f6d0c: rc -2, in every instant)
        interrupted += "interrupted_at" in report
        for name, data in listing(out_dir).items():  # each output whole, or not written
            assert whole.get(name) == data, name
        if "interrupted_at" not in report:  # the batch had finished: every output whole
            assert listing(out_dir) == whole
    assert interrupted, f"none of {tried} instants fell inside the batch"


def test_ctrl_c_during_a_conversion_in_a_thread_interrupts_the_main_thread_only(big, tmp_path):
    out = tmp_path / "out.onnx"
    took = measured(lambda: qconv.convert(big, str(out), format="qop"))
    new = out.read_bytes()
    out.write_bytes(b"old output")
    report, _ = interrupt("thread", big, str(out), took / 3)
    assert report["worker"] == "finished" and ("interrupted_at" in report or report.get("after_return")), report
    assert out.read_bytes() == new and os.listdir(tmp_path) == ["out.onnx"]  # the thread's conversion: whole


# ---- 3. a file shortened under a conversion, in a process with its own SIGBUS handler ------------

SHRINK_CHILD = textwrap.dedent("""
    import ctypes, faulthandler, json, os, sys, threading, time
    import qconv
    faulthandler.enable()  # a handler of the host's own, as pytest has
    libc = ctypes.CDLL(None, use_errno=True)
    def sigbus_handler():
        buf = ctypes.create_string_buffer(256)  # struct sigaction: its handler is the first word
        assert libc.sigaction(7, None, buf) == 0
        return ctypes.c_void_p.from_buffer(buf).value
    before = sigbus_handler()
    src, data = sys.argv[1], sys.argv[2]
    pristine = open(data, "rb").read()
    t = time.monotonic()
    qconv.convert(src, format="qop")
    took = time.monotonic() - t  # in this process, as the instants below run
    outcomes = []
    for k in range(24):
        os.remove(data)
        open(data, "wb").write(pristine)
        shrink = threading.Timer(took * k / 24, lambda: os.truncate(data, len(pristine) // 3))
        shrink.start()
        try:
            qconv.convert(src, format="qop")
            outcomes.append("converted")
        except qconv.InvalidModelError as e:
            outcomes.append("changed" if "changed while it was read" in e.message else "invalid")
        shrink.join()
    print(json.dumps({"outcomes": outcomes, "handler_kept": sigbus_handler() == before,
                      "faulthandler": faulthandler.is_enabled()}))
""")


def test_a_data_file_shortened_under_the_api_raises_and_the_hosts_handler_stays(tmp_path):
    src = save_external(weights_model(2048, 2048, 6), str(tmp_path))
    r = subprocess.run([sys.executable, "-c", SHRINK_CHILD, src, src + ".data"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, f"exit {r.returncode} (-7: SIGBUS): {r.stderr}"
    report = json.loads(r.stdout.splitlines()[-1])
    print(report)
    assert report["handler_kept"] and report["faulthandler"]
    assert "changed" in report["outcomes"], report


# ---- 4. the working folder changed by another thread ------------------------------------------


def test_a_relative_path_while_another_thread_changes_folder_never_mixes_models(tmp_path):
    expected = {}
    for name, seed, scale in (("A", 1, 0.01), ("B", 2, 0.02)):
        folder = tmp_path / name / "m"
        folder.mkdir(parents=True)
        save_external(weights_model(256, 256, 2, seed, scale), str(folder))
        expected[name] = qconv.convert(str(folder / "m.onnx"), format="qdq").model_bytes
    assert expected["A"] != expected["B"]
    stop = threading.Event()
    home = os.getcwd()

    def flip():
        while not stop.is_set():
            os.chdir(tmp_path / "A")
            os.chdir(tmp_path / "B")

    flipper = threading.Thread(target=flip)
    flipper.start()
    outcomes = {"A": 0, "B": 0, "failed": 0}
    try:
        for _ in range(1500):
            try:
                got = qconv.convert(os.path.join("m", "m.onnx"), format="qdq").model_bytes
            except qconv.InvalidModelError:
                outcomes["failed"] += 1
                continue
            match = [k for k, v in expected.items() if v == got]
            assert match, "A's model with B's weights, or B's with A's"
            outcomes[match[0]] += 1
    finally:
        stop.set()
        flipper.join()
        os.chdir(home)
    print("chdir outcomes:", outcomes)
    assert outcomes["A"] and outcomes["B"]


# ---- 6. the API speaks the CLI's language --------------------------------------------------------


@pytest.mark.parametrize("kwargs, keyword", [
    ({"target": 5}, "target"), ({"contrib": "yes"}, "contrib"), ({"verbose": 1.5}, "verbose"),
    ({"passes": [1]}, "passes"), ({"passes": []}, "passes"), ({"opset": True}, "opset"), ({"verbose": -7}, "verbose"),
    ({"jobs": 4}, "jobs"), ({"format": 1}, "format"), ({"weight_type": b"int8"}, "weight_type"),
    ({"annotate": 1}, "annotate"), ({"quiet": "no"}, "quiet"), ({"report": 3}, "report"),
])
def test_a_wrong_argument_is_a_usage_error_naming_the_keyword(kwargs, keyword, tmp_path):
    with pytest.raises(qconv.UsageError) as e:
        qconv.convert(EXAMPLE, str(tmp_path / "o.onnx"), **({"format": "qop"} | kwargs))
    assert e.value.message.startswith(f"{keyword}="), e.value.message
    assert "_qconv" not in e.value.message and os.listdir(tmp_path) == []


def test_verify_and_inspect_take_wrong_arguments_as_usage_errors():
    for call, keyword in ((lambda: qconv.verify(EXAMPLE, ignore=[1]), "ignore"),
                          (lambda: qconv.verify(EXAMPLE, fail_on=2), "fail_on"),
                          (lambda: qconv.verify(EXAMPLE, symmetric="yes"), "symmetric"),
                          (lambda: qconv.verify(EXAMPLE, target=7), "target"),
                          (lambda: qconv.inspect(EXAMPLE, format=["qop"]), "format"),
                          (lambda: qconv.inspect(EXAMPLE, target=1.0), "target")):
        with pytest.raises(qconv.UsageError) as e:
            call()
        assert e.value.message.startswith(f"{keyword}="), e.value.message


def test_the_cli_usage_errors_are_the_apis(tmp_path, monkeypatch):
    """What the command refuses with exit 2, the API refuses as UsageError: '-' as a path."""
    monkeypatch.chdir(tmp_path)  # where a file named '-' would be written (09f6d0c wrote one)
    r = subprocess.run([build_cli(), "convert", EXAMPLE, "-", "--format", "qop"], capture_output=True, text=True)
    assert r.returncode == 2
    for call in (lambda: qconv.convert(EXAMPLE, "-", format="qop"), lambda: qconv.convert("-", format="qop"),
                 lambda: qconv.convert(EXAMPLE, str(tmp_path / "o.onnx"), format="qop", report="-"),
                 lambda: qconv.verify("-"), lambda: qconv.inspect("-")):
        with pytest.raises(qconv.UsageError) as e:
            call()
        assert "'-': qconv reads and writes named files" in e.value.message
    assert os.listdir(tmp_path) == []


def test_a_model_whose_bytesize_raises_says_what_failed():
    class Broken:
        def ByteSize(self) -> int:
            raise RuntimeError("descriptor pool mismatch")

        def SerializeToString(self) -> bytes:
            return b""

    with pytest.raises(qconv.InvalidModelError) as e:
        qconv.convert(Broken(), format="qop")
    assert "ByteSize() raised RuntimeError: descriptor pool mismatch" in e.value.message
    assert "2 GB" not in e.value.message


def test_a_report_in_an_outputs_data_file_namespace_is_refused(tmp_path):
    src = save_external(weights_model(64, 64, 1), str(tmp_path))
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(qconv.UsageError) as e:
        qconv.convert(src, str(out / "o.onnx"), format="qdq", report=str(out / "o.onnx.zzz.data"))
    assert "names an input or an output of this run" in e.value.message
    assert os.listdir(out) == []
