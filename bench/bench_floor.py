"""Benchmark: qconv against the I/O floor (issue 39), in one run, CPU time and wall time:
  - a lone conversion of the bundled example (QDQ -> QOp) and `qconv --version`, beside `cp` of
    the same file and the protobuf floor (build/bench/qconv_roundtrip: mmap, parse, serialize);
  - the ResNet-50-shape QDQ model (bench_convert.py's, 25 MB) -> QOp with every check on, and with
    --no-saturation-check, beside `cp` and the protobuf floor; the saturation check's share of the
    run (from the two CPU medians, and from the pass's own time in --report); and the same bytes
    written by `cp` (in the page cache as 4 KiB pages, not the large folios of the file onnx.save
    wrote: mapping them, as the check does, takes more page faults);
  - peak RSS of each (GNU time, one run more each, untimed);
  - with --baseline BIN, another qconv (the one before a change) timed beside in the same run;
  - with --copy-cost, what reading the weights costs beside copying them, in the same run as the
    ResNet-50 shape's rows (build/bench/qconv_copy_cost: copy_file_range alone, then a pread of
    every byte, pread + write instead, and the file mapped, read there, written from the mapping).
Every command writes over the output of its previous run (replacing, as a build system does);
the commands take turns within each run, in a new order each round, so that this shared
machine's drift hits them alike (in a fixed order, whichever command ran right after `cp` was
measured 10% slower).
CPU time is the process's user + system time (wait4's rusage: the exec included), wall time
from spawn to exit; both are medians. Wall time on this machine varies up to 3x from run to run:
compare CPU times, and ratios within one run.

    .venv/bin/python bench/bench_floor.py [--runs 301] [--large-runs 31] [--baseline BIN] [--copy-cost]
                                          [--work DIR] [--markdown FILE]

Not a test: nothing here asserts a time.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchenv  # noqa: E402  (.venv and a built qconv, checked first)

benchenv.require()

from bench_convert import save_model  # noqa: E402  (the ResNet-50-shape QDQ model)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "test_data", "examples", "small_cnn_qdq.onnx")


def spawn(argv: list[str]) -> tuple[float, float]:
    """One whole process: (CPU seconds, wall seconds). posix_spawn (no copy of this process's
    memory), output to /dev/null; a failure stops the benchmark."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        start = time.perf_counter()
        pid = os.posix_spawn(argv[0], argv, os.environ,
                             file_actions=[(os.POSIX_SPAWN_DUP2, null, 1), (os.POSIX_SPAWN_DUP2, null, 2)])
        _, status, ru = os.wait4(pid, 0)
        wall = time.perf_counter() - start
    finally:
        os.close(null)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed ({os.waitstatus_to_exitcode(status)}): {' '.join(argv)}")
    return ru.ru_utime + ru.ru_stime, wall


def measure(rows: dict[str, list[str]], runs: int) -> dict[str, dict[str, float]]:
    """Per command: median CPU and wall milliseconds over `runs`, the commands taking turns; peak
    RSS (MiB) from one more run under GNU time."""
    cpu: dict[str, list[float]] = {k: [] for k in rows}
    wall: dict[str, list[float]] = {k: [] for k in rows}
    for argv in rows.values():  # once each, untimed: every later run replaces an output
        spawn(argv)
    order = list(rows.items())
    shuffle = random.Random(39).shuffle
    for _ in range(runs):
        shuffle(order)  # a new order each round: the command run right after cp was measured slower
        for name, argv in order:
            c, w = spawn(argv)
            cpu[name].append(c)
            wall[name].append(w)
    res = {}
    for name, argv in rows.items():
        r = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], capture_output=True, text=True, check=True)
        res[name] = {"cpu": statistics.median(cpu[name]) * 1e3, "wall": statistics.median(wall[name]) * 1e3,
                     "rss": int(r.stderr.split()[-1]) / 1024}
    return res


def table(res: dict[str, dict[str, float]], ref: str) -> list[str]:
    r0 = res[ref]
    lines = [f"| command | CPU (ms) | x {ref} | wall (ms) | x {ref} | peak RSS (MiB) |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, r in res.items():
        lines.append(f"| {name} | {r['cpu']:.2f} | {r['cpu'] / r0['cpu']:.2f} | {r['wall']:.2f} | "
                     f"{r['wall'] / r0['wall']:.2f} | {r['rss']:.0f} |")
    return lines


def check_share(qconv: str, model: str, out: str, runs: int) -> float:
    """Median milliseconds of the check-saturation pass itself, from --report's stage times."""
    report = out + ".report.json"
    times = []
    for _ in range(runs):
        subprocess.run([qconv, "convert", model, out, "--format", "qop", "-q", "--report", report], check=True)
        stages = json.load(open(report))["items"][0]["stages"]
        times.append(next(s["ms"] for s in stages if s["name"] == "check-saturation"))
    os.unlink(report)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=301, help="runs of the small commands")
    ap.add_argument("--large-runs", type=int, default=31, help="runs of the ResNet-50-shape commands")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--baseline", help="another qconv binary timed beside (the one before a change)")
    ap.add_argument("--copy-cost", action="store_true", help="also copy_file_range, + pread, pread + write, "
                    "mmap + write (issue 39)")
    ap.add_argument("--work", help="folder for the models, created when missing (default: a temporary folder)")
    ap.add_argument("--markdown", help="also write the results to this file")
    args = ap.parse_args()
    qconv = os.path.join(args.build, "tools", "qconv")
    floor = os.path.join(args.build, "bench", "qconv_roundtrip")
    work = benchenv.work_dir(args.work, "qconv-floor-")
    cp = "/usr/bin/cp" if os.path.exists("/usr/bin/cp") else "/bin/cp"
    out = {k: os.path.join(work, f"{k}.onnx") for k in ("cp", "floor", "qconv", "nocheck", "base", "basenocheck", "copy",
                                                         "qconv_copied", "base_copied")}
    base = os.path.abspath(args.baseline) if args.baseline else None

    small = {
        "cp": [cp, EXAMPLE, out["cp"]],
        "protobuf floor": [floor, EXAMPLE, out["floor"]],
        "qconv --version": [qconv, "--version"],
        "qconv convert --format qop": [qconv, "convert", EXAMPLE, out["qconv"], "--format", "qop", "-q"],
    }
    if base:
        small["baseline --version"] = [base, "--version"]
        small["baseline convert --format qop"] = [base, "convert", EXAMPLE, out["base"], "--format", "qop", "-q"]
    small_res = measure(small, args.runs)

    model = os.path.join(work, "resnet50_qdq.onnx")
    if not os.path.exists(model):
        save_model(model, None, external=False)
    size_mib = os.path.getsize(model) / 2**20
    # the same bytes written by cp: in the page cache as 4 KiB pages, where the file onnx.save wrote
    # sits in large folios (a mapping of it takes a third fewer page faults)
    copied = os.path.join(work, "resnet50_qdq.copied.onnx")
    subprocess.run([cp, model, copied], check=True)
    large = {
        "cp": [cp, model, out["cp"]],
        "protobuf floor": [floor, model, out["floor"]],
        "qconv convert --format qop": [qconv, "convert", model, out["qconv"], "--format", "qop", "-q"],
        "qconv ... --no-saturation-check": [qconv, "convert", model, out["nocheck"], "--format", "qop", "-q",
                                            "--no-saturation-check"],
    }
    if base:
        large["baseline convert --format qop"] = [base, "convert", model, out["base"], "--format", "qop", "-q"]
        large["baseline ... --no-saturation-check"] = [base, "convert", model, out["basenocheck"], "--format", "qop",
                                                       "-q", "--no-saturation-check"]
    large["qconv convert, the input written by cp"] = [qconv, "convert", copied, out["qconv_copied"], "--format",
                                                       "qop", "-q"]
    if base:
        large["baseline convert, the input written by cp"] = [base, "convert", copied, out["base_copied"], "--format",
                                                              "qop", "-q"]
    if args.copy_cost:
        cost = os.path.join(args.build, "bench", "qconv_copy_cost")
        for way in ("copy", "copy+read", "read+write", "map"):
            large[f"qconv_copy_cost {way}"] = [cost, way, model, out["copy"]]
    large_res = measure(large, args.large_runs)
    check_ms = check_share(qconv, model, out["qconv"], args.large_runs)
    check_copied_ms = check_share(qconv, copied, out["qconv_copied"], args.large_runs)
    with_check_copied = large_res["qconv convert, the input written by cp"]["cpu"]
    with_check = large_res["qconv convert --format qop"]["cpu"]
    without = large_res["qconv ... --no-saturation-check"]["cpu"]

    version = subprocess.run([qconv, "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    if base:
        version += "; baseline: " + subprocess.run([base, "--version"], capture_output=True, text=True,
                                                   check=True).stdout.splitlines()[0]
    cpu = "VNNI" if any(f in open("/proc/cpuinfo").read() for f in ("avx512_vnni", "avx_vnni")) else "no VNNI"
    lines = [f"Machine: {platform.machine()}, {os.cpu_count()} cores ({cpu}), {platform.platform()}; {version}", "",
             f"The bundled example ({os.path.getsize(EXAMPLE)} bytes), median of {args.runs} runs, whole processes:", ""]
    lines += table(small_res, "cp")
    lines += ["", f"The ResNet-50-shape QDQ model ({size_mib:.1f} MiB) to QOp, median of {args.large_runs} runs, "
                  "whole processes, each replacing its last output:", ""]
    lines += table(large_res, "cp")
    lines += ["", f"- The saturation check: the pass's own time in --report: {check_ms:.2f} ms (median of "
                  f"{args.large_runs}), {check_ms / with_check * 100:.0f}% of the run's CPU time; the difference of "
                  f"the two qconv rows: {with_check - without:+.2f} ms (the writer writes the pages the check "
                  "mapped instead of copying the weights from the file, so the check can cost less than nothing).",
              f"- The same with the input written by cp (4 KiB pages in the page cache): the pass's own time "
              f"{check_copied_ms:.2f} ms, {check_copied_ms / with_check_copied * 100:.0f}% of that run's CPU time."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
