"""The whole real-model matrix (issue 47): every corpus model x form x target, each cell converted
by qconv (--target T) and run in T, the input beside it, both judged against the ONNX reference
of the input (tests/integration/corpus_run.py). Prints a markdown table (docs/targets.md keeps
its last run) and a JSON line per cell to --json. tests/integration/test_corpus.py runs a fixed
part of it in CI and asserts the rules; this runs all of it (an hour or more with RKNN).

    QCONV_RKNN_PYTHON=$(scripts/setup_rknn.sh) .venv/bin/python scripts/corpus_matrix.py \\
        [--models a,b] [--forms f,g] [--targets t,u] [--json cells.jsonl] [--judge exact]

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="")
    ap.add_argument("--forms", default="")
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--json", default="")
    ap.add_argument("--judge", choices=["reference", "exact"], default="reference")
    a = ap.parse_args()
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
                    ref = judge.reference_steps(m["name"], form) if exact else None
                    out_ref = judge.reference_steps(m["name"], form, c.output) if exact and c.exit == 0 else (None, None)
                    print(row(c, exact) + (f" {steps(*ref, True)} | {steps(*out_ref, True)} |" if exact else ""), flush=True)
                    if sink:
                        sink.write(json.dumps({**dataclasses.asdict(c), "seconds": round(time.time() - started, 1),
                                               "judge": a.judge, "reference_steps": ref,
                                               "output_reference_steps": out_ref}) + "\n")
                        sink.flush()


if __name__ == "__main__":
    main()
