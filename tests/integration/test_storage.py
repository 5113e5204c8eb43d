"""Issue 36, item 1: every storage ONNX allows for a tensor's type is read, by one reader
(ir::storageBytes), in every pass. A blocked DequantizeLinear -> MatMul whose sub-byte weight is
in int32_data (what onnx.helper.make_tensor writes) gave exit 70 in fuse-matmul-nbits before;
raw_data converted. Now each storage converts in every format, to the same numbers, and the
repacked outputs are byte-identical whatever storage the weight came in."""
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T, helper as h, numpy_helper as nh

import reference
from conftest import assert_bit_identical, run_qconv

K, N, BLOCK = 48, 8, 16  # K not a multiple of 32: three blocks of 16

TYPES = {  # name: (type, lowest, highest, opset, ir_version)
    "int4": (T.INT4, -8, 7, 21, 10), "uint4": (T.UINT4, 0, 15, 21, 10),
    "int2": (T.INT2, -2, 1, 25, 13), "uint2": (T.UINT2, 0, 3, 25, 13),
    "int8": (T.INT8, -128, 127, 21, 10), "uint8": (T.UINT8, 0, 255, 21, 10),
}
STORAGES = ["int32_data", "raw_data", "external"]


def restored(t: onnx.TensorProto, storage: str) -> onnx.TensorProto:
    """`t` (as make_tensor wrote it: the typed field) in raw_data for the other storages."""
    if storage == "int32_data":
        assert not t.HasField("raw_data") and len(t.int32_data)
        return t
    r = nh.from_array(nh.to_array(t), t.name)
    assert r.HasField("raw_data") and r.data_type == t.data_type
    return r


def blocked_matmul(kind: str, storage: str, zero_points: bool, folder) -> str:
    dt, lo, hi, opset, ir = TYPES[kind]
    rng = np.random.default_rng(7)
    blocks = (K + BLOCK - 1) // BLOCK
    w = rng.integers(lo, hi + 1, (K, N))
    inits = [restored(h.make_tensor("w", dt, [K, N], w.flatten().tolist()), storage),
             nh.from_array(rng.uniform(0.01, 0.1, (blocks, N)).astype(np.float32), "scale")]
    inputs = ["w", "scale"]
    if zero_points:
        z = rng.integers(lo, hi + 1, (blocks, N))
        inits.append(restored(h.make_tensor("zero", dt, [blocks, N], z.flatten().tolist()), storage))
        inputs.append("zero")
    g = h.make_graph([h.make_node("DequantizeLinear", inputs, ["W"], "dq_w", axis=0, block_size=BLOCK),
                      h.make_node("MatMul", ["x", "W"], ["y"], "mm")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2, K])], [h.make_tensor_value_info("y", T.FLOAT, [2, N])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=ir)
    onnx.checker.check_model(m, full_check=True)
    path = os.path.join(folder, f"{kind}{'_zp' if zero_points else ''}_{storage}.onnx")
    if storage == "external":
        onnx.save(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location=f"{kind}.data", size_threshold=0)
    else:
        onnx.save(m, path)
    return path


X = np.random.default_rng(3).normal(0, 1, (2, K)).astype(np.float32)


def agree(a, b):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * float(np.abs(b).max()))


CASES = [("int4", False), ("uint4", True), ("uint4", False), ("int2", False), ("uint2", True), ("int8", True), ("uint8", False)]


@pytest.mark.parametrize("kind,zero_points", CASES, ids=[f"{k}{'_zp' if z else ''}" for k, z in CASES])
def test_every_storage_converts_in_every_format_to_the_same_numbers(kind, zero_points, tmp_path):
    want = None
    fused = {}
    for storage in STORAGES:
        src = blocked_matmul(kind, storage, zero_points, tmp_path)
        ref = reference.outputs(onnx.load(src), [X])
        if want is None:
            want = ref
        assert_bit_identical(ref, want)  # the three inputs are one model
        for fmt in (["--format", "qop", "--contrib"], ["--format", "qdq"], ["--format", "qop"]):
            dst = str(tmp_path / f"{kind}_{storage}_{'_'.join(f.strip('-') for f in fmt)}.onnx")
            r = run_qconv("convert", src, dst, *fmt)
            assert r.returncode == 0, (storage, fmt, r.stderr)
            assert "internal error" not in r.stderr
            out = onnx.load(dst)
            onnx.checker.check_model(dst, full_check=True)
            ops = [n.op_type for n in out.graph.node]
            if "--contrib" in fmt:
                assert ops == ["MatMulNBits"], (storage, ops)
                got = ort.InferenceSession(dst, providers=["CPUExecutionProvider"]).run(None, {"x": X})
                agree(got[0], want[0])
                fused[storage] = open(dst, "rb").read()
            else:
                assert ops == ["DequantizeLinear", "MatMul"], (storage, fmt, ops)
                assert_bit_identical(reference.outputs(out, [X]), want)
    # the repacked model does not depend on how the weight was stored
    assert fused["int32_data"] == fused["raw_data"] == fused["external"]


def test_a_batch_of_typed_field_weights_converts_whole(tmp_path):
    """A batch holding such models exited 70 as a whole."""
    srcs = [blocked_matmul(k, "int32_data", z, tmp_path) for k, z in CASES]
    out = tmp_path / "out"
    out.mkdir()
    r = run_qconv("convert", "--out-dir", str(out), *srcs, "--format", "qop", "--contrib", "-j", "2")
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(out)) == sorted(os.path.basename(s) for s in srcs)


def test_an_internal_error_names_no_build_path():
    """__FILE__ is relative to the source tree (-ffile-prefix-map): the binary holds no absolute
    path of the machine that built it, so no internal error can print one."""
    import re
    from conftest import qconv_bin
    data = open(qconv_bin(), "rb").read()
    assert b"lib/qconv/passes/qop/fuse_matmul_nbits.cpp" in data  # the relative name is what it holds
    if "ASAN_OPTIONS" in os.environ:
        return  # GCC's UBSan keeps its own location strings absolute: not what an internal error prints
    absolute = re.findall(rb"/[\x21-\x7e]*/lib/qconv/[\w/]+\.(?:cpp|h)", data)
    assert absolute == [], absolute[:3]


def test_a_typed_field_value_out_of_its_type_is_refused_by_the_selector(tmp_path):
    """Found by the fuzzer after the change (issue 36): a uint8 weight in int32_data with an entry of
    20785. The selector checked counts only, so fuse-matmul-nbits' read failed in the action (exit
    70 under the fuzzer); 29f6ac7 fused it silently, wrapping the value into a wrong weight. The
    selector now reads the values as the action would: the group stays, named."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fuzz"))
    from make_seeds import storage_form
    m = storage_form("UINT8", raw=False)
    w = next(t for t in m.graph.initializer if t.name == "w")
    w.int32_data[5] = 20785
    src, dst = str(tmp_path / "m.onnx"), str(tmp_path / "o.onnx")
    onnx.save(m, src)
    r = run_qconv("convert", src, dst, "--format", "qop", "--contrib", "-v")
    assert r.returncode == 0, r.stderr
    assert "mm: not fused to MatMulNBits: 'w' cannot be read: int32_data value 20785 is out of range for uint8" in r.stderr, r.stderr
    assert [n.op_type for n in onnx.load(dst).graph.node] == ["DequantizeLinear", "MatMul"]
