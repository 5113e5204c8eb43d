"""Models whose large weights are stored inline: qconv leaves their bytes in the input file and
splices them into the output (lib/qconv/io/splice.h), so they are never loaded.

Judges: the ONNX reference runs every output against its input, onnxruntime second; onnx reads
the weights back; GNU time gives the peak memory."""
from __future__ import annotations

import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import models
import reference
from conftest import judge_qdq, judge_qop, op_counts, qconv_bin, run_qconv, save_external, session

SPLICE_THRESHOLD = 64 * 1024  # io::kSpliceThreshold


def wide_cnn() -> onnx.ModelProto:
    """Convolutions and a MatMul wide enough that their int8 weights pass the threshold."""
    b = models._Builder(11)
    x = b.conv("input", 3, 64, stride=2)
    x = b.conv(x, 64, 256, stride=2)       # 147,456 weights
    x = b.conv(x, 256, 256, relu=False)    # 589,824 weights
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])])
    w = b.init("w", b.rng.normal(0, np.sqrt(2.0 / 256), (256, 1024)))  # 262,144 weights
    x = b.op("MatMul", [x, w])
    return b.model("wide_cnn", "input", [1, 3, 32, 32], x, [1, 1024])


@pytest.fixture(scope="module")
def wide(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("wide")
    path = str(folder / "wide_qdq.onnx")
    models.quantize_qdq(wide_cnn(), path, per_channel=True, activation="uint8", work_dir=str(folder))
    return path


def large_weights(path: str) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer
            if len(t.raw_data) >= SPLICE_THRESHOLD}


@pytest.mark.parametrize("fmt", ["qdq", "qop"])
def test_large_inline_weights_convert_exactly(wide, fmt, tmp_path):
    src_weights = large_weights(wide)
    assert len(src_weights) >= 3  # the case this file is about: weights left in the file
    out = str(tmp_path / f"{fmt}.onnx")
    r = run_qconv("convert", wide, out, "--format", fmt)
    assert r.returncode == 0, r.stderr
    onnx.checker.check_model(onnx.load(out), full_check=True)

    # the weights onnx reads from the output are the input's, byte for byte
    out_weights = large_weights(out)
    assert out_weights.keys() == src_weights.keys()
    for name, w in src_weights.items():
        assert out_weights[name].dtype == w.dtype and np.array_equal(out_weights[name], w), name

    xs = models.sample_inputs(wide_cnn(), 8, seed=99)
    if fmt == "qdq":  # the same model: bit-identical under the reference (and in onnxruntime)
        judge_qdq(wide, out, xs)
    else:  # every Conv and MatMul fused, within one step of the input under the reference
        counts = op_counts(out)
        assert counts.get("QLinearConv") == 3 and counts.get("QLinearMatMul") == 1, counts
        judge_qop(wide, out, xs)

    again = str(tmp_path / f"{fmt}_again.onnx")
    assert run_qconv("convert", wide, again, "--format", fmt).returncode == 0
    assert open(out, "rb").read() == open(again, "rb").read()  # deterministic


# A 134 MB model of eight 4096 x 4096 int8 weights behind DequantizeLinear -> MatMul ->
# QuantizeLinear, stored inline.
K = N = 4096
BRANCHES = 8
WEIGHTS_MIB = BRANCHES * K * N / 2 ** 20
VIEW_WINDOW_MIB = 32  # io::ExternalFiles::kViewWindow


def matmul_model(k: int = K, n: int = N) -> onnx.ModelProto:
    """The model; smaller k, n give the same graph with small weights (a memory yardstick)."""
    return models.wide_matmuls(k, n, BRANCHES, seed=5, io_dims=(K, N))


def peak_mib(*args: str) -> float:
    """Run qconv under GNU time; its peak RSS in MiB."""
    proc = subprocess.run(["/usr/bin/time", "-f", "peak_kib=%M", qconv_bin(), *args],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stderr.rsplit("peak_kib=", 1)[1]) / 1024


def test_inline_weights_are_never_loaded(tmp_path):
    model = matmul_model()
    src = str(tmp_path / "in.onnx")
    onnx.save(model, src)
    size_mib = os.path.getsize(src) / 2 ** 20
    assert size_mib > 128

    out = str(tmp_path / "out.onnx")
    # the yardstick: the same graph with 16 x 16 weights, what the process and its nodes cost
    # (11 MiB; 62 MiB under AddressSanitizer, whose runtime alone is 49 MiB)
    small = str(tmp_path / "small.onnx")
    onnx.save(matmul_model(16, 16), small)
    base = peak_mib("convert", small, str(tmp_path / "small_out.onnx"), "--format", "qop")
    peak = peak_mib("convert", src, out, "--format", "qop")
    # protobuf's parse would hold all 128 MiB of weights (151 MiB peak before io/splice.h);
    # qconv takes 1 to 2 MiB more than the yardstick, with or without AddressSanitizer, and the
    # input's pages the saturation check read in place, which stay mapped for the writer up to
    # VIEW_WINDOW_MIB (io::ExternalFiles::kViewWindow): the bound is that, well under half the weights
    assert peak - base < VIEW_WINDOW_MIB + 8 < WEIGHTS_MIB / 2, \
        f"peak RSS {peak:.0f} MiB ({base:.0f} for the yardstick) for a {size_mib:.0f} MiB model"
    assert op_counts(out) == {"QuantizeLinear": 1, "QLinearMatMul": BRANCHES, "DequantizeLinear": BRANCHES}
    x = np.random.default_rng(3).uniform(-1, 1, (1, K)).astype(np.float32)
    step = np.float32(40 / 255)
    want, got = reference.run(src, x), reference.run(out, x)  # the judge: the reference, every branch
    for i in range(BRANCHES):
        assert np.abs(want[i] - got[i]).max() <= step * 1.001, i
    ran = session(out).run(None, {"x": x})  # onnxruntime: the reference, or its saturating emulation
    emulated = reference.run(out, x, emulate_u8s8=True)
    for i in range(BRANCHES):
        assert min(np.abs(ran[i] - got[i]).max(), np.abs(ran[i] - emulated[i]).max()) <= step * 1.001, i

    # --inline-data from external data splices from the data file: the same bytes, as little memory
    os.makedirs(tmp_path / "ext")
    ext = save_external(model, str(tmp_path / "ext"))
    out_ext = str(tmp_path / "out_ext.onnx")
    peak = peak_mib("convert", ext, out_ext, "--format", "qop", "--inline-data")
    assert peak - base < VIEW_WINDOW_MIB + 8, \
        f"peak RSS {peak:.0f} MiB ({base:.0f} for the yardstick) inlining {size_mib:.0f} MiB of external data"
    assert open(out_ext, "rb").read() == open(out, "rb").read()


def alternating_model(count: int, shape: tuple[int, int]) -> tuple[onnx.ModelProto, list[onnx.TensorProto]]:
    """`count` int8 weights of `shape`, each followed by its small scale, as in a real network."""
    rng = np.random.default_rng(8)
    inits, nodes, outs = [], [], []
    for i in range(count):
        inits += [numpy_helper.from_array(rng.integers(-127, 128, shape, dtype=np.int8), f"w{i}"),
                  numpy_helper.from_array(np.float32(0.01 + i * 1e-5), f"s{i}")]
        nodes.append(helper.make_node("DequantizeLinear", [f"w{i}", f"s{i}"], [f"y{i}"], name=f"dq{i}"))
        outs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, list(shape)))
    m = helper.make_model(helper.make_graph(nodes, "alternating", [], outs, inits),
                          opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    return m, inits


def test_memory_stays_flat_when_small_and_large_tensors_alternate(tmp_path):
    """2,000 weights of 64 KiB, each followed by its scale: every page the reader touches between
    two weights maps its neighbours too, so without dropping the pages behind it the reader held
    most of the file (121 MiB more than the same graph with 16-byte weights). The yardstick is
    that same graph: its nodes and small tensors cost what they cost (three times as much under
    AddressSanitizer); the weights' bytes must add next to nothing."""
    count = 2000
    peaks = {}
    for shape in [(4, 4), (256, 256)]:
        m, inits = alternating_model(count, shape)
        src, out = str(tmp_path / f"in_{shape[0]}.onnx"), str(tmp_path / f"out_{shape[0]}.onnx")
        onnx.save(m, src)
        peaks[shape] = peak_mib("convert", src, out, "--format", "qdq")
        # onnx reads every tensor back as it was
        got = {t.name: numpy_helper.to_array(t) for t in onnx.load(out).graph.initializer}
        for t in inits:
            assert np.array_equal(got[t.name], numpy_helper.to_array(t)), t.name
    weights_mib = count * 256 * 256 / 2 ** 20
    grown = peaks[(256, 256)] - peaks[(4, 4)]
    assert grown < weights_mib / 8, f"{weights_mib:.0f} MiB of weights took {grown:.0f} MiB more memory ({peaks})"
