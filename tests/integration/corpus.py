"""The real-model corpus (test_data/corpus.json): where scripts/build_corpus.sh put it, its
entries, and the inputs each model is fed (seeded: the same arrays on every run and host)."""
from __future__ import annotations

import hashlib
import json
import os

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MANIFEST = os.path.join(ROOT, "test_data", "corpus.json")
BUILDERS = [os.path.join(ROOT, "scripts", f) for f in ("build_corpus.py", "corpus_bert.py", "corpus_unroll.py")]


def manifest() -> dict:
    with open(MANIFEST) as f:
        return json.load(f)


def key() -> str:
    """What the built corpus depends on: the manifest, the builder and its graph writer, this file
    (the feeds) and the quantizer's version; a change to any builds a new one."""
    from importlib.metadata import version
    h = hashlib.sha256(version("onnxruntime").encode())
    for path in (MANIFEST, *BUILDERS, __file__):
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:12]


def folder() -> str:
    """The corpus's folder (QCONV_CORPUS, else ~/.cache/qconv/corpus-KEY)."""
    given = os.environ.get("QCONV_CORPUS")
    if given:
        return given
    return os.path.join(os.path.expanduser("~"), ".cache", "qconv", f"corpus-{key()}")


def path(name: str, form: str | None = None) -> str:
    """The float model (`form` None) or its quantized form."""
    return os.path.join(folder(), f"{name}.{form or 'float'}.onnx")


def entries() -> list[dict]:
    return manifest()["models"]


def entry(name: str) -> dict:
    return next(m for m in entries() if m["name"] == name)


def feeds(model: dict, count: int, seed: int) -> list[np.ndarray]:
    """`count` inputs for the model's first input, the kind its `fill` says: an image in [0, 1)
    normalized as the OCR models expect, file bytes as int32 0..256, audio in [-1, 1), a mel
    spectrogram as openWakeWord scales it, token ids
    (int64: [CLS], word pieces of BERT's uncased vocabulary, [SEP])."""
    rng = np.random.default_rng(seed)
    shape = next(iter(model["inputs"].values()))
    out = []
    for _ in range(count):
        if model["fill"] == "tokens":
            ids = rng.integers(1996, 30522, size=shape).astype(np.int64)  # past the [unused] and single characters
            ids[:, 0], ids[:, -1] = 101, 102
            out.append(ids)
        elif model["fill"] == "bytes":
            out.append(rng.integers(0, 257, size=shape).astype(np.int32))
        elif model["fill"] == "spectrogram":  # [1, frames, bins, 1], smooth in time and frequency
            # in the range openWakeWord feeds its embedding model: its mel front end's dB on the
            # audio fill, scaled as it scales them (x / 10 + 2): about -1.3 to 3.2
            base = rng.uniform(-1.3, 3.2, size=[shape[0], max(1, shape[1] // 4), max(1, shape[2] // 4), 1])
            spec = np.kron(base, np.ones((1, 4, 4, 1)))[:, :shape[1], :shape[2], :]
            out.append((spec + 0.1 * rng.standard_normal(spec.shape)).astype(np.float32))
        elif model["fill"] == "audio":
            t = np.arange(shape[-1]) / 16000.0
            tone = 0.3 * np.sin(2 * np.pi * rng.uniform(100, 800) * t)
            out.append((tone + 0.05 * rng.standard_normal(shape)).astype(np.float32).reshape(shape))
        else:
            # smooth shapes plus noise: images, not white noise, so that the activations have a range
            base = rng.uniform(0, 1, size=[shape[0], shape[1], max(1, shape[2] // 8), max(1, shape[3] // 8)])
            img = np.kron(base, np.ones((1, 1, 8, 8)))[:, :, :shape[2], :shape[3]]
            img = img + 0.1 * rng.standard_normal(img.shape)
            out.append(((img - 0.5) / 0.5).astype(np.float32))
    return out
