"""Benchmark: what the report's views add to a conversion (issue 50: at most 5 ms for the
ResNet-50 shape), in one run: the ResNet-50-shape QDQ model (bench_convert.py's, 25 MB) -> QOp
with every check on, without a report, with --report FILE.json, with --report FILE.html, and
with --report FILE.html --node-data FILE.json; beside `cp` of the input (the floor) and the
bundled example the same four ways. Each command is a whole process (bench_floor.spawn), the
commands taking turns in a new order each round, outputs removed before each run (untimed);
CPU time is user + system, wall time spawn to exit; medians. Also the 5,002-node chain of the
HTML page's browser test, whose report is the largest per byte of model.

    .venv/bin/python bench/bench_report.py [--runs 31] [--work DIR] [--markdown FILE]

Not a test: nothing here asserts a time.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchenv  # noqa: E402  (.venv and a built qconv, checked first)

benchenv.require()

from bench_convert import save_model  # noqa: E402  (the ResNet-50-shape QDQ model)
from bench_copy_floor import CP, EXAMPLE, ROOT, turns  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from test_report_views import chain_model  # noqa: E402  (the 5,002-node model)

VIEWS = {"no report": [], "--report json": ["--report", "{w}/r.json"], "--report html": ["--report", "{w}/r.html"],
         "html + --node-data": ["--report", "{w}/r.html", "--node-data", "{w}/n.json"]}


def row(qconv: str, model: str, work: str, runs: int, seed: int) -> dict[str, dict[str, float]]:
    cmds = {"cp": [CP, model, os.path.join(work, "copy.onnx")]}
    for name, flags in VIEWS.items():
        cmds[name] = [qconv, "convert", model, os.path.join(work, f"out-{len(cmds)}.onnx"), "--format", "qop",
                      *(f.format(w=work) for f in flags)]

    def before(name: str) -> None:
        for f in os.listdir(work):
            if f.startswith(("out-", "copy", "r.", "n.")):
                os.unlink(os.path.join(work, f))

    return turns(cmds, runs, seed, before)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=31)
    ap.add_argument("--work", default="/tmp/qconv-bench-report")
    ap.add_argument("--markdown", default="")
    a = ap.parse_args()
    qconv = os.environ.get("QCONV_BIN", os.path.join(ROOT, "build", "tools", "qconv"))
    os.makedirs(a.work, exist_ok=True)
    models = os.path.join(a.work, "models")
    os.makedirs(models, exist_ok=True)
    resnet = os.path.join(models, "resnet50.onnx")
    if not os.path.exists(resnet):
        save_model(resnet, None, external=False)
    chain = os.path.join(models, "chain.onnx")
    if not os.path.exists(chain):
        chain_model(chain, 1250)
    example = os.path.join(models, "example.onnx")
    shutil.copyfile(EXAMPLE, example)
    runs_dir = os.path.join(a.work, "runs")
    os.makedirs(runs_dir, exist_ok=True)
    lines = ["| model | " + " | ".join(["cp", *VIEWS]) + " | html adds |", "|---" * (len(VIEWS) + 3) + "|"]
    for i, (name, model) in enumerate((("ResNet-50 shape (25 MB)", resnet), ("the bundled example", example),
                                       ("5,002-node chain", chain))):
        res = row(qconv, model, runs_dir, a.runs, 50 + i)
        cells = [f"{res[k]['cpu']:.2f} / {res[k]['wall']:.2f}" for k in ["cp", *VIEWS]]
        added = res["html + --node-data"]["cpu"] - res["no report"]["cpu"]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {added:+.2f} ms CPU |")
        print(lines[-1] if i else "\n".join(lines), flush=True)
    text = "\n".join(lines) + f"\n\nms, CPU / wall, median of {a.runs} runs each, in turns.\n"
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
