"""The whole real-model matrix (issue 47): every corpus model x form x target, each cell converted
by qconv (--target T) and run in T, the input beside it, both judged against the ONNX reference
of the input (tests/integration/corpus_run.py). Prints a markdown table (docs/targets.md keeps
its last run) and a JSON line per cell to --json. tests/integration/test_corpus.py runs a fixed
part of it in CI and asserts the rules; this runs all of it (an hour or more with RKNN).

    QCONV_RKNN_PYTHON=$(scripts/setup_rknn.sh) .venv/bin/python scripts/corpus_matrix.py \\
        [--models a,b] [--forms f,g] [--targets t,u] [--json cells.jsonl]"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "integration"))
import corpus  # noqa: E402
import corpus_run  # noqa: E402

TARGETS = ["onnxruntime", "openvino", "openvino f32", "iree", "tvm", "aidge", "qnn", "rknn"]


def row(c: corpus_run.Cell) -> str:
    out = "yes" if c.out_runs == "yes" else ("-" if c.exit else "NO: " + c.out_runs[:80])
    inp = "yes" if c.in_runs == "yes" else "no: " + c.in_runs[:80]
    why = ""
    if c.exit:
        lines = [ln for ln in c.stderr.splitlines() if ": error: " in ln]
        why = f" ({len(lines)} nodes named)" if lines else ""
    return (f"| {c.model} | {c.form} | {c.target} | {c.exit}{why} | {out} | {corpus_run.steps_text(c.out_steps)} | {inp} | "
            f"{corpus_run.steps_text(c.in_steps)} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="")
    ap.add_argument("--forms", default="")
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    models = [m for m in corpus.entries() if not a.models or m["name"] in a.models.split(",")]
    sink = open(a.json, "a") if a.json else None
    print("| model | form | target | exit | output runs wholly | output steps | input runs wholly | input steps |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        judge = corpus_run.Judge(work)
        for m in models:
            for form in m["forms"]:
                if a.forms and form not in a.forms.split(","):
                    continue
                for t in a.targets.split(","):
                    target, precise = t.split(" ")[0], t.endswith(" f32")
                    started = time.time()
                    try:
                        c = corpus_run.cell(judge, m["name"], form, target, precise=precise)
                    except Exception as e:  # noqa: BLE001: the reference's own failure, said in the table
                        print(f"| {m['name']} | {form} | {t} | the reference failed: {type(e).__name__}: "
                              f"{str(e)[:80]} | | | | |", flush=True)
                        continue
                    print(row(c), flush=True)
                    if sink:
                        sink.write(json.dumps({**dataclasses.asdict(c), "seconds": round(time.time() - started, 1)}) + "\n")
                        sink.flush()


if __name__ == "__main__":
    main()
