"""Regenerate the bundled examples: a small CNN in float (small_cnn.onnx, what the README's Python
quick start quantizes), and quantized by onnxruntime's quantize_static (small_cnn_qdq.onnx: QDQ,
per-channel int8 weights, uint8 activations). Run with the .venv Python:
    .venv/bin/python test_data/examples/make_examples.py
"""
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "integration"))
import models  # noqa: E402

import onnx  # noqa: E402

onnx.save(models.small_cnn(), os.path.join(HERE, "small_cnn.onnx"))
with tempfile.TemporaryDirectory() as work:
    models.quantize_qdq(models.small_cnn(), os.path.join(HERE, "small_cnn_qdq.onnx"), per_channel=True,
                        activation="uint8", work_dir=work)
print("wrote", os.path.join(HERE, "small_cnn.onnx"), "and", os.path.join(HERE, "small_cnn_qdq.onnx"))
