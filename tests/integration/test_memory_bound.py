"""The memory an int4 repack takes does not grow with the weight (issue 49): a weight past
nbits::kWholeBytes (32 MiB) is repacked in pieces read from its file a piece's columns at a time
(nbits::transposedTensor), each way exactly, and a 2 GiB weight converts both ways within 320 MiB
of peak RSS, its input's mapped pages included (GNU time's %M: the kernel's own count)."""
import os
import resource
import signal
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from conftest import qconv_bin

LIMIT_MIB = 320


def external(data, location: str, name: str, dtype: int, dims: list[int], payload: bytes | None = None,
             fill=None, length: int = 0) -> TensorProto:
    """A tensor at the next 4096-aligned offset of the open file `data`: `payload`, or `length`
    bytes from `fill(n)` 64 MiB at a time (never the whole tensor in this process)."""
    offset = (data.tell() + 4095) // 4096 * 4096
    data.seek(offset)
    if payload is not None:
        data.write(payload)
        length = len(payload)
    else:
        for at in range(0, length, 64 << 20):
            data.write(fill(min(64 << 20, length - at)))
    t = TensorProto(name=name, data_type=dtype, dims=dims, data_location=TensorProto.EXTERNAL)
    for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
        t.external_data.add(key=k, value=v)
    return t


def nbits_model(path: str, K: int, N: int, block: int, b: bytes | None, scales: bytes | None, zero_points: bool = False) -> None:
    """One MatMulNBits of K x N int4, its B, scales (and with `zero_points`, random zero points)
    in PATH.data; B and scales random (seeded) when not given."""
    rng = np.random.default_rng(49)
    blocks = K // block
    loc = os.path.basename(path) + ".data"
    with open(path + ".data", "wb") as data:
        inits = [external(data, loc, "B", TensorProto.UINT8, [N, blocks, block // 2], b, rng.bytes, N * K // 2),
                 external(data, loc, "scales", TensorProto.FLOAT, [N, blocks], scales,
                          lambda n: rng.uniform(0.001, 0.02, n // 4).astype(np.float32).tobytes(), N * blocks * 4)]
        if zero_points:
            inits.append(external(data, loc, "zero_points", TensorProto.UINT8, [N, (blocks + 1) // 2], None, rng.bytes,
                                  N * ((blocks + 1) // 2)))
    node = helper.make_node("MatMulNBits", ["a", "B", "scales"] + (["zero_points"] if zero_points else []), ["y"], name="lm_head", domain="com.microsoft", K=K, N=N,
                            bits=4, block_size=block)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, N])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 10
    onnx.save(m, path)


def tensor_bytes(model_path: str, name: str) -> bytes:
    m = onnx.load(model_path, load_external_data=False)
    t = next(t for t in m.graph.initializer if t.name.startswith(name))
    entries = {e.key: e.value for e in t.external_data}
    with open(os.path.join(os.path.dirname(model_path), entries["location"]), "rb") as f:
        f.seek(int(entries.get("offset", 0)))
        return f.read(int(entries["length"]))


def peak_mib(args: list[str]) -> float:
    r = subprocess.run(["/usr/bin/time", "-f", "peak_kib=%M", qconv_bin(), *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return int(r.stderr.strip().splitlines()[-1].split("=")[1]) / 1024


def test_weights_past_the_whole_bound_repack_in_pieces_exactly_both_ways(tmp_path):
    """B 72 MiB and its scales 36 MiB (block 16), both past kWholeBytes: the standard form's x is
    the transpose of B's nibbles XOR 8 (signed at 0), its scales the transpose of the scales; and
    the way back gives B and the scales byte for byte."""
    K, N, block = 36864, 4096, 16
    rng = np.random.default_rng(7)
    b = rng.integers(0, 256, N * K // 2, dtype=np.uint8)
    scales = rng.uniform(0.001, 0.02, (N, K // block)).astype(np.float32)
    src, std, back = (str(tmp_path / f) for f in ("in.onnx", "std.onnx", "back.onnx"))
    nbits_model(src, K, N, block, b.tobytes(), scales.tobytes())
    r = subprocess.run([qconv_bin(), "convert", src, std, "--format", "qdq", "-q"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # x[k, n] = B's nibble k of row n, minus 8 mod 16 (MatMulNBits without zero points: signed at 0)
    nib = np.empty((N, K), np.uint8)
    nib[:, 0::2], nib[:, 1::2] = b.reshape(N, K // 2) & 15, b.reshape(N, K // 2) >> 4
    x = (nib.T ^ 8).astype(np.uint8)
    want = (x[:, 0::2] | (x[:, 1::2] << 4)).tobytes()
    assert tensor_bytes(std, "B_x") == want
    assert tensor_bytes(std, "scales_blocked") == np.ascontiguousarray(scales.T).tobytes()
    r = subprocess.run([qconv_bin(), "convert", std, back, "--format", "qop", "--contrib", "-q"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert tensor_bytes(back, "B_x_nbits") == b.tobytes()
    assert tensor_bytes(back, "scales_blocked_nbits") == scales.tobytes()


@pytest.mark.skipif(bool(os.environ.get("QCONV_SANITIZED")), reason="ASan's shadow memory is in the peak: run unsanitized")
@pytest.mark.skipif(os.statvfs("/tmp").f_bavail * os.statvfs("/tmp").f_frsize < (10 << 30), reason="needs 10 GiB of disk")
@pytest.mark.parametrize("zero_points", [False, True], ids=["symmetric", "zero_points"])
def test_a_2gib_weight_converts_both_ways_within_the_memory_bound(tmp_path, zero_points):
    """65536 x 65536 int4 (2 GiB; scales at block 32, 512 MiB; zero points 64 MiB): MatMulNBits
    -> the standard form -> MatMulNBits, each within LIMIT_MIB of peak RSS, and the round trip
    gives B back."""
    K = N = 65536
    src, std, back = (str(tmp_path / f) for f in ("in.onnx", "std.onnx", "back.onnx"))
    nbits_model(src, K, N, 32, None, None, zero_points)
    there = peak_mib(["convert", src, std, "--format", "qdq", "-q"])
    back_again = peak_mib(["convert", std, back, "--format", "qop", "--contrib", "-q"])
    print(f"peak RSS: {there:.0f} MiB there, {back_again:.0f} MiB back")
    assert there <= LIMIT_MIB and back_again <= LIMIT_MIB, (there, back_again)
    with open(src + ".data", "rb") as a, open(next(os.path.join(tmp_path, f) for f in os.listdir(tmp_path)
                                                    if f.startswith("back.onnx.") and f.endswith(".data")), "rb") as c:
        for _ in range(0, N * K // 2, 64 << 20):  # B is first in both data files, at offset 0
            assert a.read(64 << 20) == c.read(64 << 20)


def test_a_repack_allocates_each_tensor_it_makes_so_a_full_disk_fails_at_once(tmp_path):
    """The tensors a repack makes go to the output's data file piece by piece; each is allocated
    (fallocate) before its first byte is written, as the writer does for the output (ext4 then
    writes it with about 40% less CPU than its delayed allocation: docs/benchmarks.md). A data file
    that cannot hold the 2 MiB weight fails there: exit 5 naming it and the bytes it needed,
    nothing left in the folder (before: "cannot write", from the first write that failed)."""
    src = str(tmp_path / "in.onnx")
    nbits_model(src, 2048, 2048, 32, None, None)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = str(out_dir / "out.onnx")

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the signal

    r = subprocess.run([qconv_bin(), "convert", src, out, "--format", "qdq"], capture_output=True, text=True,
                       preexec_fn=limit)
    assert r.returncode == 5, (r.returncode, r.stderr)
    assert r.stderr.strip().splitlines()[-1] == \
        f"qconv: error: {out}'s data file: cannot allocate {2048 * 2048 // 2} bytes: File too large", r.stderr
    assert os.listdir(out_dir) == []
    r = subprocess.run([qconv_bin(), "convert", src, out, "--format", "qdq", "-q"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr  # and without the limit it converts


def test_scales_past_the_piece_bound_are_checked_in_pieces_naming_the_one_wrong(tmp_path):
    """20 MiB of scales (block 16) are checked a piece at a time (verify.cpp, kScalesInPieces):
    a NaN in the third piece is named with its index in the whole tensor, and a valid tensor
    has no finding."""
    K, N, block = 20480, 4096, 16
    scales = np.random.default_rng(3).uniform(0.001, 0.02, N * (K // block)).astype(np.float32)
    good, bad = str(tmp_path / "good.onnx"), str(tmp_path / "bad.onnx")
    nbits_model(good, K, N, block, None, scales.tobytes())
    scales[3_000_001] = np.nan
    nbits_model(bad, K, N, block, None, scales.tobytes())
    r = subprocess.run([qconv_bin(), "verify", good], capture_output=True, text=True)
    assert r.returncode == 0 and "scale-invalid" not in r.stderr + r.stdout, r.stderr
    r = subprocess.run([qconv_bin(), "verify", bad], capture_output=True, text=True)
    assert "scale 'scales'[3000001] is nan: not finite" in r.stderr + r.stdout, r.stderr + r.stdout


def test_a_shortened_weight_file_is_bad_input_not_a_signal(tmp_path):
    """A weight past kWholeBytes whose data file was cut short: exit 3 naming the file, no output
    (issue 49: no reliability regression from the repack in pieces)."""
    src, out = str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")
    nbits_model(src, 36864, 4096, 16, None, None)
    os.truncate(src + ".data", os.path.getsize(src + ".data") // 2)
    for fmt in (["--format", "qdq"], ["--format", "qop", "--contrib"]):
        r = subprocess.run([qconv_bin(), "convert", src, out, *fmt], capture_output=True, text=True)
        assert r.returncode == 3, (r.returncode, r.stderr)
        assert "in.onnx.data" in r.stderr and not os.path.exists(out), r.stderr


def test_blocked_scales_past_the_piece_bound_are_validated_in_pieces(tmp_path):
    """A blocked DequantizeLinear whose 20 MiB of scales (external data) hold a 0 in their third
    piece: validate reads them in pieces (ir::forFloatPieces) and the conversion is exit 3 naming
    the node, no output; the same scales without the 0 convert."""
    K, N, block = 20480, 4096, 16
    rng = np.random.default_rng(5)
    scales = rng.uniform(0.001, 0.02, (K // block, N)).astype(np.float32)

    def standard(path: str, s: np.ndarray) -> None:
        loc = os.path.basename(path) + ".data"
        with open(path + ".data", "wb") as data:
            inits = [external(data, loc, "x", TensorProto.INT4, [K, N], rng.bytes(K * N // 2)),
                     external(data, loc, "scale", TensorProto.FLOAT, [K // block, N], s.tobytes())]
        nodes = [helper.make_node("DequantizeLinear", ["x", "scale"], ["w"], name="w_dq", axis=0, block_size=block),
                 helper.make_node("MatMul", ["a", "w"], ["y"], name="mm")]
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, K])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, N])], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
        m.ir_version = 10
        onnx.save(m, path)

    good, bad = str(tmp_path / "good.onnx"), str(tmp_path / "bad.onnx")
    standard(good, scales)
    scales.reshape(-1)[2_500_000] = 0.0
    standard(bad, scales)
    r = subprocess.run([qconv_bin(), "convert", good, str(tmp_path / "g_out.onnx"), "--format", "qop", "--contrib"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = str(tmp_path / "b_out.onnx")
    r = subprocess.run([qconv_bin(), "convert", bad, out, "--format", "qop", "--contrib"], capture_output=True, text=True)
    assert r.returncode == 3 and "w_dq" in r.stderr and "scale 0 is not positive and finite" in r.stderr, r.stderr
    assert not os.path.exists(out)
