"""The whole real-model matrix (issue 47): every corpus model x form x target, each cell converted
by qconv (--target T) and run in T, the input beside it, both judged against the ONNX reference
of the input (tests/integration/corpus_run.py). Prints a markdown table (docs/targets.md keeps
its last run) and a JSON line per cell to --json. tests/integration/test_corpus.py runs a fixed
part of it in CI and asserts the rules; this runs all of it (an hour or more with RKNN).

    QCONV_RKNN_PYTHON=$(scripts/setup_rknn.sh) .venv/bin/python scripts/corpus_matrix.py \\
        [--models a,b] [--forms f,g] [--targets t,u] [--json cells.jsonl] [--judge exact]
    .venv/bin/python scripts/corpus_matrix.py --table cells.jsonl[,more.jsonl]

--table prints, from the JSON lines of one or more runs (split by model to use both cores; a
later line of a cell replaces an earlier one), the table per target that docs/targets.md keeps:
a row per model, a column per form, each cell "exit: output steps (input steps)", and per
target what holds (every exit-0 output runs wholly; none further from the reference than its
baseline, one step of slack: the input, or its canonical QDQ form, "QDQ n" in the cell, where the
input does not run or `verify --target` flags it (corpus_run.py); `verify --target` names an error
on each input that does not run wholly: each cell records how many, "in_named").

A target "openvino f32" runs OpenVINO at INFERENCE_PRECISION_HINT f32 (converted for openvino-f32);
"onnxruntime default" runs onnxruntime in a default session (graph optimizations on, as users run
it) where "onnxruntime" turns them off.

--judge exact measures the steps against the model's math in float64 (reference.exact_outputs)
instead of the float32 ONNX reference, each as "largest (mean over every output value)", and adds
the float32 reference's own: whether a QDQ input or its QOp conversion is nearer the model's math
(issue 47's QOp-vs-QDQ question)."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "integration"))
import corpus  # noqa: E402
import corpus_run  # noqa: E402

TARGETS = ["onnxruntime", "openvino", "openvino f32", "iree", "tvm", "aidge", "qnn", "rknn"]


def steps(largest: float | None, mean: float | None, with_mean: bool) -> str:
    text = corpus_run.steps_text(largest)
    return f"{text} ({mean:.3f})" if with_mean and text and mean is not None else text


def row(c: corpus_run.Cell, with_mean: bool = False) -> str:
    out = "yes" if c.out_runs == "yes" else ("-" if c.exit else "NO: " + c.out_runs[:80])
    inp = "yes" if c.in_runs == "yes" else "no: " + c.in_runs[:80]
    why = ""
    if c.exit:
        lines = [ln for ln in c.stderr.splitlines() if ": error: " in ln]
        why = f" ({len(lines)} nodes named)" if lines else ""
    return (f"| {c.model} | {c.form} | {c.target} | {c.exit}{why} | {out} | {steps(c.out_steps, c.out_mean, with_mean)} | "
            f"{inp} | {steps(c.in_steps, c.in_mean, with_mean)} |")


FORMS = ["qdq_u8s8_pc", "qdq_s8s8_pt", "qop_u8s8", "qdq_u16s8_pc"]
FORM_NAMES = {"qdq_u8s8_pc": "QDQ u8s8 pc", "qdq_s8s8_pt": "QDQ s8s8 pt", "qop_u8s8": "QOp u8s8",
              "qdq_u16s8_pc": "QDQ u16s8 pc"}


def read_cells(paths: list[str]) -> dict[tuple[str, str, str], dict]:
    """(model, form, target label) -> the cell's JSON line, the last one read of each."""
    cells: dict[tuple[str, str, str], dict] = {}
    for path in paths:
        seen: set[tuple[str, str, str]] = set()
        for line in open(path):
            c = json.loads(line)
            label = c.get("label") or c["target"]
            if "label" not in c and (c["model"], c["form"], label) in seen and label == "openvino":
                label = "openvino f32"  # runs before labels: each (model, form)'s second openvino cell
            seen.add((c["model"], c["form"], label))
            cells[(c["model"], c["form"], label)] = c
    return cells


def inputs_named(model: str, form: str, label: str) -> int:
    """How many errors `qconv verify --target` finds on an input its runtime does not run wholly
    (rule 5: it must name at least one)."""
    t = corpus_run.qconv_target(label.split(" ")[0], label.endswith(" f32"))
    return len(corpus_run.verify_errors(corpus.path(model, form), t))


def as_cell(c: dict) -> corpus_run.Cell:
    fields = {f.name for f in dataclasses.fields(corpus_run.Cell)}
    return corpus_run.Cell(**{k: v for k, v in c.items() if k in fields})


def worse(c: dict) -> bool:
    """Further from the baseline than one step: the input, or its canonical QDQ form where the input
    is none (corpus_run.Cell.baseline)."""
    return c["out_runs"] == "yes" and as_cell(c).worse()


def cell_text(c: dict) -> str:
    inp = f"({corpus_run.steps_text(c['in_steps'])})" if c["in_runs"] == "yes" else "(fails)"
    if c.get("qdq_runs") == "yes":  # the baseline is the canonical QDQ form (corpus_run.Cell.baseline)
        inp = inp[:-1] + f"; QDQ {corpus_run.steps_text(c['qdq_steps'])})"
    if c["exit"] == 0 and c["out_runs"] == "yes":
        return f"0: {corpus_run.steps_text(c['out_steps'])} {inp}" + (" **worse**" if worse(c) else "")
    if c["exit"] == 0:
        return f"0: **FAILS** {inp}"
    return f"{c['exit']} {inp}"


def table(paths: list[str]) -> None:
    cells = read_cells(paths)
    models = [m["name"] for m in corpus.entries()]
    labels = [t for t in TARGETS + ["onnxruntime default"] if any(k[2] == t for k in cells)]
    for t in labels:
        mine = {k: c for k, c in cells.items() if k[2] == t}
        forms = [f for f in FORMS if any(k[1] == f for k in mine)]
        exit0 = [c for c in mine.values() if c["exit"] == 0]
        fails = [f"{c['model']} {c['form']}" for c in exit0 if c["out_runs"] != "yes"]
        worse_ = [f"{c['model']} {c['form']}" for c in mine.values() if worse(c)]
        refused = [c for c in mine.values() if c["exit"] == 4]
        failing = [c for c in mine.values() if c["in_runs"] != "yes"]
        unnamed = [f"{c['model']} {c['form']}" for c in failing if "in_named" in c and not c["in_named"]]
        print(f"**{t}**: {len(mine)} cells; {len(exit0)} exit 0, "
              + (f"{len(fails)} of them do not run wholly ({', '.join(fails)})" if fails else "every one runs wholly")
              + f"; {len(refused)} exit 4 ({sum(c['in_runs'] != 'yes' for c in refused)} with an input that does not "
              + "run there either); further from the reference than the baseline (the input, or its canonical QDQ form where verify flags the input): "
              + (", ".join(worse_) if worse_ else "none")
              + (f"; inputs that do not run wholly: {len(failing)}, `verify --target` names "
                 + (f"all but {', '.join(unnamed)}" if unnamed else "each")
                 if all("in_named" in c for c in failing) else "") + ".\n")
        print("| model | " + " | ".join(FORM_NAMES[f] for f in forms) + " |")
        print("|---|" + "---|" * len(forms))
        for m in models:
            row_cells = [mine.get((m, f, t)) for f in forms]
            if any(row_cells):
                print(f"| {m} | " + " | ".join(cell_text(c) if c else "" for c in row_cells) + " |")
        print()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="")
    ap.add_argument("--forms", default="")
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--json", default="")
    ap.add_argument("--judge", choices=["reference", "exact"], default="reference")
    ap.add_argument("--table", default="", help="print the docs' tables from these JSON lines files, run nothing")
    a = ap.parse_args()
    if a.table:
        table(a.table.split(","))
        return
    models = [m for m in corpus.entries() if not a.models or m["name"] in a.models.split(",")]
    sink = open(a.json, "a") if a.json else None
    exact = a.judge == "exact"
    print("| model | form | target | exit | output runs wholly | output steps | input runs wholly | input steps |"
          + (" input's float32 reference | output's float32 reference |" if exact else ""))
    print("|---|---|---|---|---|---|---|---|" + ("---|---|" if exact else ""))
    with tempfile.TemporaryDirectory() as work:
        judge = corpus_run.Judge(work, exact=exact)
        for m in models:
            for form in m["forms"]:
                if a.forms and form not in a.forms.split(","):
                    continue
                for t in a.targets.split(","):
                    target, precise, optimized = t.split(" ")[0], t.endswith(" f32"), t.endswith(" default")
                    started = time.time()
                    try:
                        c = corpus_run.cell(judge, m["name"], form, target, precise=precise, optimized=optimized)
                    except Exception as e:  # noqa: BLE001: the reference's own failure, said in the table
                        print(f"| {m['name']} | {form} | {t} | the reference failed: {type(e).__name__}: "
                              f"{str(e)[:80]} | | | | |", flush=True)
                        continue
                    named = inputs_named(m["name"], form, t) if c.in_runs != "yes" else None
                    ref = judge.reference_steps(m["name"], form) if exact else None
                    out_ref = judge.reference_steps(m["name"], form, c.output) if exact and c.exit == 0 else (None, None)
                    print(row(c, exact) + (f" {steps(*ref, True)} | {steps(*out_ref, True)} |" if exact else ""), flush=True)
                    if sink:
                        sink.write(json.dumps({**dataclasses.asdict(c), "label": t, "in_named": named,
                                               "seconds": round(time.time() - started, 1), "judge": a.judge, "reference_steps": ref,
                                               "output_reference_steps": out_ref}) + "\n")
                        sink.flush()


if __name__ == "__main__":
    main()
