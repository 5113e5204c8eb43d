"""What SIGKILL leaves in a batch, measured (docs/robustness.md, "What a killed run leaves").

A batch of 24 models (1 MB of weights each, as external data) into one folder, -j 6, killed with
SIGKILL at uniformly spread instants of its run; the weights alternate between two versions, so
that every batch replaces pairs (and sweeps their old data files). After each kill it counts what
the kill added to the folder: data files no model names, hidden temporaries; then it runs the
batch again, whole, and counts what is still left of them.

    .venv/bin/python bench/bench_kill.py [--kills 200] [--jobs 6] [--qconv build/tools/qconv] [--work DIR]

Needs the test environment (.venv: onnx, numpy; scripts/test.sh makes it). --work is created
if missing (default: a temporary folder)."""
from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchenv  # noqa: E402  (.venv and a built qconv, checked first)

benchenv.require()

import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from test_data_safety import save, weight_model  # noqa: E402


def named(folder: str, names: list[str]) -> set[str]:
    out = set()
    for n in names:
        if os.path.exists(os.path.join(folder, n)):
            m = onnx.load(os.path.join(folder, n), load_external_data=False)
            out |= {e.value for t in m.graph.initializer for e in t.external_data if e.key == "location"}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=200)
    ap.add_argument("--jobs", type=int, default=6)
    ap.add_argument("--qconv", default=os.path.join(HERE, "..", "build", "tools", "qconv"))
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    work = benchenv.work_dir(a.work, "qconv-kill-")
    os.makedirs(work, exist_ok=True)
    names = [f"m{i:02d}.onnx" for i in range(24)]
    sets = [[save(weight_model(1000 * v + i, 1024), f"{work}/v{v}/{n}", n + ".data") for i, n in enumerate(names)]
            for v in range(2)]
    out = f"{work}/D"
    os.makedirs(out, exist_ok=True)

    def batch(v: int, kill_after: float | None = None) -> int:
        p = subprocess.Popen([a.qconv, "convert", "--format", "qdq", "--out-dir", out, "-j", str(a.jobs), "-q",
                              *sets[v]], stderr=subprocess.DEVNULL)
        if kill_after is None:
            return p.wait()
        time.sleep(kill_after)
        p.send_signal(signal.SIGKILL)
        return p.wait()

    start = time.time()
    assert batch(0) == 0
    whole = time.time() - start
    rng = random.Random(1)
    orphans = hidden = left = 0
    for k in range(a.kills):
        before = set(os.listdir(out))
        batch((k + 1) % 2, rng.uniform(0, whole))
        added = set(os.listdir(out)) - before
        keep = named(out, names)
        orphans += any(f.endswith(".data") and f not in keep for f in added)
        hidden += any(f.startswith(".") for f in added)
        assert batch(k % 2) == 0
        keep = named(out, names)
        left += any((f.endswith(".data") and f not in keep) or f.startswith(".") for f in set(os.listdir(out)) - before)
    print(f"| {a.qconv} | {a.jobs} | {whole * 1000:.0f} ms | {a.kills} | {orphans} | {hidden} | {left} |")


if __name__ == "__main__":
    main()
