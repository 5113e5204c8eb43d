"""Benchmark: qconv against `cp` of the same files at every size (issue 49), in one run, every
row beside `cp` of its input's files and, with --baseline BIN, the qconv before a change:

   1-3  the ResNet-50-shape QDQ model (bench_convert.py's, 25 MB) -> QOp, every check on, its
        input written by onnx.save, by `cp`, and with its tensors in a data file beside it (written
        anew before the row, untimed: the page cache as each writer leaves it);
   4-6  the same with a cold page cache (the input's files dropped with posix_fadvise(DONTNEED)
        before each run, untimed; `cp` reads them cold too);
   7-8  a 500 MB QDQ conv chain (held_out.conv_chain: 512x512x3x3 int8 per-channel weights) ->
        QOp, inline and as onnx.save's external data;
  9-16  a 1 GiB int4 LLM (held_out.int4_llm: 4096 x 4096 weights) with blocks of 32 and 128, with
        and without zero points: MatMulNBits -> the standard form (--format qdq) and the standard
        form -> MatMulNBits (--format qop --contrib);
 17-18  onnxruntime's QDQ blocked form (MatMulNBitsQuantizer's names and types, onnx.save's
        unaligned data file; symmetric int4 and asymmetric uint4) -> MatMulNBits;
 19-21  `qconv --version`, the bundled example -> QOp, and a batch of 100 of them in one process
        (`--out-dir`) beside one `cp` of them all (nothing slower elsewhere).

Each command is a whole process (posix_spawn), writing a new output (the last one removed and
dirty pages synced before each run, untimed; before each row the other rows' models leave the
page cache and this row's are read into it); the commands of a row take turns in a new order
each round; CPU time is user + system (wait4's rusage), wall time from spawn to exit; medians.
Peak RSS (GNU time's %M) from one run more, untimed. The binaries are copied into the work folder
first: how the linker wrote a binary shapes the cost of exec (docs/benchmarks.md, issue 46).
With --stages, where each millisecond of the ResNet-50 shape and the LLM goes (--report's stage
times, median of the runs).

    .venv/bin/python bench/bench_copy_floor.py [--baseline BIN] [--runs 21] [--large-runs 5]
                                               [--rows 1-21] [--stages] [--work DIR] [--markdown FILE]

On a VM that reports freed pages to its host the large rows vary 3x between runs: the header says
whether it does, and page_reporting() how to turn it off.

Not a test: nothing here asserts a time (the memory bound is tests/integration/test_memory_bound.py).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchenv  # noqa: E402  (.venv and a built qconv, checked first)

benchenv.require()

import held_out  # noqa: E402
from bench_convert import save_model  # noqa: E402  (the ResNet-50-shape QDQ model)
from bench_floor import spawn  # noqa: E402  (a whole process: CPU and wall seconds)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "test_data", "examples", "small_cnn_qdq.onnx")
CP = "/usr/bin/cp" if os.path.exists("/usr/bin/cp") else "/bin/cp"


def drop(files: list[str]) -> None:
    """The files' pages out of the page cache (clean after os.sync)."""
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def remove_output(out: str) -> None:
    """The output and the data files written beside it (qconv's OUT.<hash>.data, cp's OUT.data)."""
    folder, base = os.path.split(out)
    for name in os.listdir(folder):
        if name == base or (name.startswith(base + ".") and name.endswith(".data")):
            os.unlink(os.path.join(folder, name))


class Row:
    """One row of the table: its input's files, and per command (cp, qconv, baseline) the argv
    and the output it writes."""

    def __init__(self, number: int, title: str, model: str, args: list[str], cold: bool = False, write=None):
        self.number, self.title, self.model, self.args, self.cold = number, title, model, args, cold
        self.write = write  # writes the input anew before the row, its pages left as its writer left them

    def commands(self, tools: dict[str, str], work: str) -> dict[str, tuple[list[str], str]]:
        files = held_out.files_of(self.model)
        out_dir = os.path.join(work, f"out{self.number}")
        os.makedirs(out_dir, exist_ok=True)
        cmds = {"cp": ([CP, *files, out_dir + "/"], os.path.join(out_dir, os.path.basename(self.model)))}
        for name, binary in tools.items():
            out = os.path.join(out_dir, f"{name}.onnx")
            cmds[name] = ([binary, "convert", self.model, out, *self.args, "-q"], out)
        return cmds


REPORTING = "/sys/module/page_reporting/parameters/page_reporting_order"


def page_reporting() -> str:
    """Whether this machine's VM hands the pages it frees back to its host (virtio-balloon free
    page reporting), for the table's header. When it does, the first write to such a page faults
    in the host, which the guest sees as a slow copy into the page cache: a 1 GiB output freed
    before a run and written anew in it made one command's CPU time vary 3x between runs, `cp`'s
    and qconv's alike (qconv on the block-32 LLM: 575-996 ms in 9 runs; with reporting off,
    527-558). Reporting covers free blocks of 2^order pages; an order past the largest block
    (10) turns it off: `echo 11 > {REPORTING}` as root (9 is the kernel's default)."""
    try:
        order = int(open(REPORTING).read())
    except OSError:
        return "no free page reporting"
    if order > 10:
        return f"free page reporting off (order {order})"
    print(f"warning: free page reporting is on (order {order}): the rows of 100 MB and more will vary 3x "
          f"between runs; `echo 11 > {REPORTING}` turns it off", file=sys.stderr)
    return f"free page reporting ON (order {order}): large rows noisy"


def only_this_cached(row: Row, work: str) -> None:
    """The other rows' models out of the page cache and this row's read in (untimed): ten 1 GiB
    models cached at once left 24 GiB nearly full, and every page a run allocated was reclaimed
    from another first (CPU times of one command varied 5x between runs)."""
    mine = set(held_out.files_of(row.model))
    for name in os.listdir(work):
        path = os.path.join(work, name)
        if os.path.isfile(path) and path not in mine and (name.endswith(".onnx") or name.endswith(".data")):
            drop([path])
    for f in mine:
        with open(f, "rb") as src:
            while src.read(64 << 20):
                pass


def turns(cmds: dict[str, list[str]], runs: int, seed: int, before) -> dict[str, dict[str, float]]:
    """Per command: median CPU and wall ms over `runs`, the commands taking turns in a new order
    each round, `before(name)` run untimed ahead of each; peak RSS (MiB) from one run more under
    GNU time."""
    samples: dict[str, list[tuple[float, float]]] = {k: [] for k in cmds}
    order = list(cmds.items())
    shuffle = random.Random(seed).shuffle
    for _ in range(runs):
        shuffle(order)
        for name, argv in order:
            before(name)
            samples[name].append(spawn(argv))
    res = {}
    for name, argv in cmds.items():
        before(name)
        r = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], capture_output=True, text=True, check=True)
        res[name] = {"cpu": statistics.median(s[0] for s in samples[name]) * 1e3,
                     "wall": statistics.median(s[1] for s in samples[name]) * 1e3, "rss": int(r.stderr.split()[-1]) / 1024}
    return res


def measure(row: Row, tools: dict[str, str], work: str, runs: int) -> dict[str, dict[str, float]]:
    os.sync()
    only_this_cached(row, work)
    if row.write:  # as a pipeline converts what it just wrote: the page cache as the writer filled it
        row.write()
        os.sync()
    cmds = row.commands(tools, work)

    def before(name: str) -> None:
        remove_output(cmds[name][1])
        os.sync()
        if row.cold:
            drop(held_out.files_of(row.model))

    res = turns({k: argv for k, (argv, _) in cmds.items()}, runs, 49 + row.number, before)
    for _, out in cmds.values():
        remove_output(out)
    return res


def version_row(tools: dict[str, str], runs: int) -> dict[str, dict[str, float]]:
    """`qconv --version` beside `cp` of the bundled example (nothing to remove between runs)."""
    out = os.path.join(os.path.dirname(tools["qconv"]), "version_cp.onnx")
    return turns({"cp": [CP, EXAMPLE, out], **{name: [b, "--version"] for name, b in tools.items()}}, runs, runs,
                 lambda name: None)


def batch_row(tools: dict[str, str], work: str, runs: int, count: int = 100) -> dict[str, dict[str, float]]:
    """`count` copies of the bundled example in one `qconv convert --out-dir` (one `cp` of them
    all beside): a build pipeline's batch."""
    src = os.path.join(work, "batch_in")
    os.makedirs(src, exist_ok=True)
    inputs = []
    for i in range(count):
        inputs.append(os.path.join(src, f"m{i:03d}.onnx"))
        if not os.path.exists(inputs[-1]):
            shutil.copyfile(EXAMPLE, inputs[-1])
    outs = {name: os.path.join(work, f"batch_{name}") for name in ["cp", *tools]}

    def fresh(name: str) -> None:
        shutil.rmtree(outs[name], ignore_errors=True)
        os.makedirs(outs[name])
        os.sync()

    res = turns({"cp": [CP, *inputs, outs["cp"] + "/"],
                 **{n: [b, "convert", "--out-dir", outs[n], *inputs, "--format", "qop", "-q"] for n, b in tools.items()}},
                runs, count, fresh)
    for out in outs.values():
        shutil.rmtree(out, ignore_errors=True)
    return res


def stages(binary: str, row: Row, work: str, runs: int) -> list[tuple[str, float]]:
    """Median milliseconds of each stage in --report (the stages over 1% of the run)."""
    out = os.path.join(work, "stages.onnx")
    report = out + ".report.json"
    times: dict[str, list[float]] = {}
    for _ in range(runs):
        remove_output(out)
        os.sync()
        subprocess.run([binary, "convert", row.model, out, *row.args, "-q", "--report", report], check=True)
        for s in json.load(open(report))["items"][0]["stages"]:
            times.setdefault(s["name"], []).append(s["ms"])
    remove_output(out)
    os.unlink(report)
    med = [(k, statistics.median(v)) for k, v in times.items()]
    total = sum(v for _, v in med)
    return [(k, v) for k, v in med if v >= total / 100]


def models(work: str) -> list[Row]:
    """Every row's input, made once in `work` (kept between runs: remove the folder to remake)."""
    def path(name: str) -> str:
        return os.path.join(work, name)

    def once(p: str, make) -> str:
        if not os.path.exists(p + ".done"):
            make(p)
            open(p + ".done", "w").close()
        return p

    qop = ["--format", "qop"]
    resnet = once(path("resnet50.onnx"), lambda p: save_model(p, None, external=False))
    copied = path("resnet50_cp.onnx")

    def by_cp() -> None:  # the same bytes, written by cp (coreutils: copy_file_range, 4 KiB pages)
        if os.path.exists(copied):
            os.unlink(copied)
        subprocess.run([CP, resnet, copied], check=True)

    if not os.path.exists(copied):
        by_cp()
    resnet_ext = once(path("resnet50_ext.onnx"), lambda p: save_model(p, None, external=True))
    # Rows 1-3 convert their input as its writer left it in the page cache (written anew before the
    # row: a file read back from disk holds other pages, as rows 4-6 show)
    rows = [Row(1, "ResNet-50 shape -> QOp, input by onnx.save", resnet, qop,
                write=lambda: save_model(resnet, None, external=False)),
            Row(2, "ResNet-50 shape -> QOp, input by cp", copied, qop, write=by_cp),
            Row(3, "ResNet-50 shape -> QOp, data file beside", resnet_ext, qop,
                write=lambda: save_model(resnet_ext, None, external=True)),
            Row(4, "ResNet-50 shape -> QOp, input by onnx.save, cold", resnet, qop, cold=True),
            Row(5, "ResNet-50 shape -> QOp, input by cp, cold", copied, qop, cold=True),
            Row(6, "ResNet-50 shape -> QOp, data file beside, cold", resnet_ext, qop, cold=True)]
    chain = once(path("chain500.onnx"), lambda p: held_out.conv_chain(p, 500 * 10**6, external=False))
    chain_ext = once(path("chain500_ext.onnx"), lambda p: held_out.conv_chain(p, 500 * 10**6, external=True))
    rows += [Row(7, "500 MB conv chain -> QOp, inline", chain, qop),
             Row(8, "500 MB conv chain -> QOp, external data", chain_ext, qop)]
    n = 9
    for block in (32, 128):
        for zp in (False, True):
            tag = f"block {block}, {'zero points' if zp else 'no zero points'}"
            nb = once(path(f"nbits{block}{'z' if zp else ''}.onnx"), lambda p: held_out.int4_llm(p, "nbits", block, zp))
            st = once(path(f"std{block}{'z' if zp else ''}.onnx"), lambda p: held_out.int4_llm(p, "standard", block, zp))
            rows += [Row(n, f"1 GiB int4 LLM, {tag}: MatMulNBits -> QDQ", nb, ["--format", "qdq"]),
                     Row(n + 1, f"1 GiB int4 LLM, {tag}: QDQ -> MatMulNBits", st, ["--format", "qop", "--contrib"])]
            n += 2
    for zp in (False, True):
        ort = once(path(f"ort32{'z' if zp else ''}.onnx"), lambda p: held_out.int4_llm(p, "ort", 32, zp))
        rows.append(Row(n, f"1 GiB int4 LLM, onnxruntime's QDQ form, {'uint4 + zero points' if zp else 'int4'}, "
                           "block 32 -> MatMulNBits", ort, ["--format", "qop", "--contrib"]))
        n += 1
    rows.append(Row(n + 1, "the bundled example -> QOp", EXAMPLE, qop))
    return rows


def main() -> None:
    reporting = page_reporting()
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=21, help="runs of the rows under 100 MB")
    ap.add_argument("--large-runs", type=int, default=5, help="runs of the 500 MB and 1 GiB rows")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--baseline", help="the qconv before a change, timed in turns with this one")
    ap.add_argument("--rows", default="1-21", help="which rows, as 1-6,9,19")
    ap.add_argument("--stages", action="store_true", help="also each stage's time for rows 1 and 9")
    ap.add_argument("--work", help="folder for the models (kept; default: a temporary folder)")
    ap.add_argument("--markdown", help="also write the tables to this file")
    args = ap.parse_args()
    wanted = set()
    for part in args.rows.split(","):
        a, _, b = part.partition("-")
        wanted.update(range(int(a), int(b or a) + 1))
    work = benchenv.work_dir(args.work, "qconv-copy-floor-")
    tools = {"qconv": os.path.join(work, "qconv")}
    shutil.copyfile(os.path.join(args.build, "tools", "qconv"), tools["qconv"])
    if args.baseline:
        tools["baseline"] = os.path.join(work, "baseline")
        shutil.copyfile(args.baseline, tools["baseline"])
    for b in tools.values():
        os.chmod(b, 0o755)
    rows = [r for r in models(work) if r.number in wanted]
    names = ["cp", *tools]
    head = "| # | row | MiB | " + " | ".join(f"{n} CPU ms" for n in names) + " | " + \
           " | ".join(f"{n} x cp" for n in tools) + " | " + " | ".join(f"{n} wall x cp" for n in tools) + \
           " | " + " | ".join(f"{n} RSS MiB" for n in tools) + " |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    def line(number: int, title: str, mib: str, res: dict[str, dict[str, float]], digits: int) -> str:
        return (f"| {number} | {title} | {mib} | " + " | ".join(f"{res[n]['cpu']:.{digits}f}" for n in names) + " | " +
                " | ".join(f"{res[n]['cpu'] / res['cp']['cpu']:.2f}" for n in tools) + " | " +
                " | ".join(f"{res[n]['wall'] / res['cp']['wall']:.2f}" for n in tools) + " | " +
                " | ".join(f"{res[n]['rss']:.0f}" for n in tools) + " |")

    by_number = {r.number: r for r in rows}
    for number in sorted(wanted):
        if number == 19:
            lines.append(line(19, "`qconv --version` (against `cp` of the bundled example)", "-",
                              version_row(tools, args.runs * 10), 2))
        elif number == 21:
            lines.append(line(21, "a batch of 100 bundled examples (`--out-dir`, against one `cp` of them)", "-",
                              batch_row(tools, work, args.runs), 1))
        elif number in by_number:
            row = by_number[number]
            runs = args.large_runs if held_out.size_of(row.model) > 100 << 20 else args.runs
            lines.append(line(number, row.title, f"{held_out.size_of(row.model) / 2**20:.0f}", measure(row, tools, work, runs), 1))
        else:
            continue
        print(lines[-1], flush=True)
    version = subprocess.run([tools["qconv"], "--version"], capture_output=True, text=True, check=True).stdout.split("\n")[0]
    if args.baseline:
        version += "; baseline: " + subprocess.run([tools["baseline"], "--version"], capture_output=True, text=True,
                                                   check=True).stdout.split("\n")[0]
    cpu = "VNNI" if any(f in open("/proc/cpuinfo").read() for f in ("avx512_vnni", "avx_vnni")) else "no VNNI"
    text = [f"Machine: {platform.machine()}, {os.cpu_count()} cores ({cpu}), {platform.platform()}, {reporting}; {version}; "
            f"medians of {args.runs} runs (rows under 100 MB; --version 10x as many) and {args.large_runs} (the rest)", ""]
    text += lines
    if args.stages:
        for row in rows:
            if row.number in (1, 9, 10):
                text += ["", f"Where the time goes, row {row.number} ({row.title}), --report's stages over 1%, median of "
                             f"{args.runs if row.number == 1 else args.large_runs} runs:", "", "| stage | ms |", "|---|---:|"]
                text += [f"| {k} | {v:.1f} |" for k, v in stages(tools["qconv"], row, work,
                                                                  args.runs if row.number == 1 else args.large_runs)]
    out = "\n".join(text) + "\n"
    print(out)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(out)


if __name__ == "__main__":
    main()
