"""Inputs that change under a running conversion (issue 46, items 3 and 4).

- A model or data file shortened while qconv reads it (the parse and the passes read it where it
  is mapped) is exit 3, "changed while it was read", never a death by SIGBUS; the output keeps
  its old file and nothing is left behind. On disk and on tmpfs, inline and external.
- A model's folder swapped by rename while qconv reads it (a deploy script's A/ and B/) gives
  A's model whole, B's whole, or a clean error: never A's scales with B's weights. The folder is
  opened once and every file is read relative to it.

The signal tests are bounded: ten instants spread over one measured run (ten more where none of
them landed mid-read: run times vary), a few hundred swaps."""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time

import onnx
import pytest

import models
from conftest import qconv_bin, save_external


def weights_model(k: int = 2048, n: int = 2048, branches: int = 6, seed: int = 3, scale: float = 0.01) -> onnx.ModelProto:
    """u8 activations x s8 weights (the saturation check reads each weight in place)."""
    return models.wide_matmuls(k, n, branches, seed, scale)


def convert(src: str, dst: str, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([qconv_bin(), "convert", src, dst, "--format", "qop", "-q", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("where", ["disk", "tmpfs"])
@pytest.mark.parametrize("victim", ["model, inline", "model, external", "data file"])
def test_an_input_shortened_while_it_is_read_is_exit_3_never_a_signal(victim, where, tmp_path):
    base = tmp_path if where == "disk" else tmp_path_on_tmpfs(tmp_path)
    src_dir, out_dir = base / "in", base / "out"
    src_dir.mkdir()
    out_dir.mkdir()
    model = weights_model()
    if victim == "model, inline":
        src = str(src_dir / "m.onnx")
        onnx.save(model, src)
        shrinks = src
    else:
        src = save_external(model, str(src_dir), "m.onnx", "m.onnx.data", threshold=1024)
        shrinks = src if victim == "model, external" else str(src_dir / "m.onnx.data")
    pristine = {p: open(p, "rb").read() for p in (src, str(src_dir / "m.onnx.data")) if os.path.exists(p)}
    dst = out_dir / "out.onnx"
    start = time.monotonic()
    whole = convert(src, str(dst))
    assert whole.wait() == 0, whole.stderr.read()
    took = time.monotonic() - start
    new = {p: open(out_dir / p, "rb").read() for p in os.listdir(out_dir)}
    changed = 0
    rounds = 0
    # ten instants spread over a run's time; on a machine where none of them lands mid-read (the
    # run's time varies), ten more, no more: every round is judged alike
    for k in range(20):
        if k >= 10 and (changed or victim == "model, external"):
            break
        rounds += 1
        for p in os.listdir(out_dir):
            os.remove(out_dir / p)
        dst.write_bytes(b"old output")
        for p, b in pristine.items():  # a fresh file each round: the last round's shrank
            os.remove(p)
            with open(p, "wb") as f:
                f.write(b)
        run = convert(src, str(dst))
        time.sleep(took * (k % 10) / 10)
        os.truncate(shrinks, os.path.getsize(shrinks) // 3)
        code = run.wait()
        err = run.stderr.read()
        assert code in (0, 3), f"round {k}, instant {k % 10}/10: exit {code} (a negative exit is death by a signal): {err}"
        left = sorted(os.listdir(out_dir))
        if code == 3:
            changed += "changed while it was read" in err
            assert left == ["out.onnx"] and dst.read_bytes() == b"old output", (k, left, err)
        else:
            assert {p: open(out_dir / p, "rb").read() for p in left} == new, k
    print(f"{victim} on {where}: {changed} of {rounds} instants fell while it was read")
    if victim != "model, external":  # that file is read whole at the open, and not after
        assert changed >= 1, "no instant fell while the input was read"


def tmp_path_on_tmpfs(tmp_path):
    """A fresh folder on tmpfs (/dev/shm), removed with tmp_path's."""
    import pathlib
    import tempfile

    folder = pathlib.Path(tempfile.mkdtemp(prefix="qconv-tmpfs-", dir="/dev/shm"))
    (tmp_path / "tmpfs").symlink_to(folder)  # pytest's cleanup does not follow it: removed below
    _TMPFS.append(folder)
    return folder


_TMPFS: list = []


@pytest.fixture(autouse=True)
def _remove_tmpfs_folders():
    yield
    while _TMPFS:
        shutil.rmtree(_TMPFS.pop(), ignore_errors=True)


def test_a_folder_swapped_by_rename_never_mixes_two_models(tmp_path):
    """A/ and B/ hold models of the same shapes, different scales and weights; a deploy loop swaps
    them under the path `cur` while qconv converts cur/m.onnx again and again. Every output is
    A's conversion or B's, byte for byte, or the run failed cleanly (exit 3, nothing written)."""
    expected = {}
    for name, seed, scale in (("A", 1, 0.01), ("B", 2, 0.02)):
        folder = tmp_path / name
        folder.mkdir()
        src = save_external(weights_model(512, 512, 2, seed, scale), str(folder), "m.onnx", "m.onnx.data", 1024)
        ref = tmp_path / f"{name}.ref.onnx"
        r = subprocess.run([qconv_bin(), "convert", src, str(ref), "--format", "qdq", "--inline-data", "-q"],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        expected[name] = ref.read_bytes()
    assert expected["A"] != expected["B"]
    os.rename(tmp_path / "A", tmp_path / "cur")
    os.rename(tmp_path / "B", tmp_path / "other")
    stop = threading.Event()

    def swap():  # cur <-> other, as fast as rename goes
        while not stop.is_set():
            os.rename(tmp_path / "cur", tmp_path / "tmp")
            os.rename(tmp_path / "other", tmp_path / "cur")
            os.rename(tmp_path / "tmp", tmp_path / "other")

    swapper = threading.Thread(target=swap)
    swapper.start()
    outcomes = {"A": 0, "B": 0, "failed": 0}
    try:
        out = tmp_path / "out.onnx"
        for _ in range(400):
            if out.exists():
                out.unlink()
            r = subprocess.run([qconv_bin(), "convert", str(tmp_path / "cur" / "m.onnx"), str(out), "--format", "qdq",
                                "--inline-data", "-q"], capture_output=True, text=True)
            if r.returncode != 0:
                assert r.returncode == 3 and not out.exists(), (r.returncode, r.stderr)
                outcomes["failed"] += 1
                continue
            got = out.read_bytes()
            match = [k for k, v in expected.items() if v == got]
            assert match, "an output that is neither A's nor B's conversion: a mix of the two folders"
            outcomes[match[0]] += 1
    finally:
        stop.set()
        swapper.join()
    print("folder swap outcomes:", outcomes)
    assert outcomes["A"] + outcomes["B"] > 0
