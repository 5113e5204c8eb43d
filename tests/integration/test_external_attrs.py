"""External data wherever a tensor can carry it (issue 16, deliverables 4 and 5): a main-graph
Constant's external value becomes a file-backed initializer under the initializer's rules and
bounds (nothing read into memory); tensors in attributes of subgraphs and model-local functions
are checked like initializers and read in, up to 64 MiB each; sparse ones are refused (exit 4)."""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from conftest import data_file, run_qconv, run_qconv_limited, session


def external(name: str, location: str, values: np.ndarray | None, count: int) -> onnx.TensorProto:
    t = onnx.TensorProto()
    t.name, t.data_type = name, TensorProto.FLOAT
    t.dims.append(count)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", str(4 * count))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def constant_model(location: str, count: int) -> onnx.ModelProto:
    nodes = [helper.make_node("Constant", [], ["c"], name="const", value=external("c", location, None, count)),
             helper.make_node("Add", ["x", "c"], ["y"], name="add")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [count])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [count])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    return m


def test_a_constants_external_value_becomes_a_file_backed_initializer(tmp_path):
    values = np.arange(6, dtype=np.float32) * 0.5
    (tmp_path / "c.bin").write_bytes(values.tobytes())
    src, dst = tmp_path / "in.onnx", tmp_path / "out" / "out.onnx"
    dst.parent.mkdir()
    onnx.save(constant_model("c.bin", 6), str(src))
    r = run_qconv("convert", str(src), str(dst), "--format", "qdq")
    assert r.returncode == 0, r.stderr
    out = onnx.load(str(dst), load_external_data=False)
    assert [n.op_type for n in out.graph.node] == ["Add"]
    assert [t.name for t in out.graph.initializer] == ["c"]
    x = np.ones(6, np.float32)
    np.testing.assert_array_equal(session(str(dst)).run(None, {"x": x})[0], x + values)


@pytest.mark.skipif("ASAN_OPTIONS" in os.environ, reason="AddressSanitizer reserves terabytes of address space")
def test_a_huge_external_constant_is_not_read_into_memory(tmp_path):
    """A 145-byte-scale model whose Constant points at a 512 MiB sparse file: converted in 300 MB
    of address space (the bytes are copied file to file)."""
    count = 128 << 20  # floats: 512 MiB
    with open(tmp_path / "huge.bin", "wb") as f:
        f.truncate(4 * count)
    src, dst = tmp_path / "in.onnx", tmp_path / "out" / "out.onnx"
    dst.parent.mkdir()
    onnx.save(constant_model("huge.bin", count), str(src))
    r = run_qconv_limited(300 << 20, "convert", str(src), str(dst), "--format", "qdq", "--no-saturation-check")
    assert r.returncode == 0, r.stderr
    assert os.path.getsize(data_file(str(dst))) >= 4 * count


def function_model(location: str) -> onnx.ModelProto:
    body = [helper.make_node("Constant", [], ["k"], value=external("k", location, None, 4)),
            helper.make_node("Mul", ["a", "k"], ["b"])]
    f = helper.make_function("local", "scale_by_k", ["a"], ["b"], body, [helper.make_opsetid("", 13)])
    g = helper.make_graph([helper.make_node("scale_by_k", ["x"], ["y"], domain="local", name="call")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("local", 1)],
                          functions=[f])
    m.ir_version = 8
    return m


def test_external_data_in_a_function_is_checked_and_read_in(tmp_path):
    k = np.array([1, 2, 3, 4], np.float32)
    (tmp_path / "k.bin").write_bytes(k.tobytes())
    src, dst = tmp_path / "in.onnx", tmp_path / "out" / "out.onnx"
    dst.parent.mkdir()
    onnx.save(function_model("k.bin"), str(src))
    r = run_qconv("convert", str(src), str(dst), "--format", "qdq")
    assert r.returncode == 0, r.stderr
    value = onnx.load(str(dst)).functions[0].node[0].attribute[0].t
    assert value.data_location == TensorProto.DEFAULT and value.raw_data == k.tobytes()
    x = np.full(4, 2, np.float32)
    np.testing.assert_array_equal(session(str(dst)).run(None, {"x": x})[0], x * k)


def test_an_unsafe_location_in_a_function_is_bad_input(tmp_path):
    src = tmp_path / "in.onnx"
    onnx.save(function_model("../escape.bin"), str(src))
    r = run_qconv("convert", str(src), str(tmp_path / "out.onnx"), "--format", "qdq")
    assert r.returncode == 3
    assert "function 'scale_by_k' node" in r.stderr and "contains '..'" in r.stderr
    assert not (tmp_path / "out.onnx").exists()
