"""The output pair (issue 16, deliverable 1): OUT and the data file it names are consistent at
every instant, for a failed commit (tests/unit/test_output_pair.cpp) and for concurrent writers
(here). The data file is OUT.<hash of its bytes>.data: a new content is a new file, renamed in
before the model, and the old one is removed only once no model at OUT names it."""
import os
import subprocess
import threading

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import data_file, qconv_bin, run_qconv, save_external, session


def weights_model(folder, name: str, value: float) -> str:
    """y = x + w, w 4096 floats all `value`, graph named `name`, w in external data: two of these
    differ only in the bytes of their data files, so a model of one with the data of the other
    loads and runs, with the wrong numbers."""
    w = numpy_helper.from_array(np.full(4096, value, np.float32), "w")
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4096])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4096])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    os.makedirs(os.path.join(folder, name), exist_ok=True)
    return save_external(m, os.path.join(folder, name))


def read_pair(out: str):
    """OUT's graph name and its w as read through the data file OUT names; None when a commit
    removed that data file after the model was read (a reader spanning two commits)."""
    try:
        m = onnx.load(out)
    except (FileNotFoundError, onnx.onnx_cpp2py_export.checker.ValidationError):
        return None
    except RuntimeError as e:  # onnx's C++ side, when the file goes between two of its checks
        if "No such file or directory" not in str(e):
            raise
        return None
    return m.graph.name, numpy_helper.to_array(m.graph.initializer[0])


def test_concurrent_writers_never_leave_a_model_with_the_others_data(tmp_path):
    values = {"a": 1.0, "b": 2.0}
    sources = {name: weights_model(str(tmp_path), name, v) for name, v in values.items()}
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = str(out_dir / "out.onnx")
    assert run_qconv("convert", sources["a"], out, "--format", "qdq").returncode == 0

    failures, seen = [], {"a": 0, "b": 0, "between": 0}
    done = threading.Event()

    def writer(name: str):
        for _ in range(25):
            r = subprocess.run([qconv_bin(), "convert", sources[name], out, "--format", "qdq"], capture_output=True,
                               text=True, timeout=60)
            if r.returncode != 0:
                failures.append(r.stderr)

    def reader():
        while not done.is_set():
            pair = read_pair(out)
            if pair is None:
                seen["between"] += 1
                continue
            name, w = pair
            seen[name] += 1
            if not np.all(w == values[name]):
                failures.append(f"model {name} read weights {np.unique(w)}")

    threads = [threading.Thread(target=writer, args=(n,)) for n in ("a", "b")]
    watch = threading.Thread(target=reader)
    watch.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    watch.join()
    assert failures == []
    assert seen["a"] + seen["b"] > 0, seen
    # at rest: one model, the one data file it names, nothing else
    name, w = read_pair(out)
    assert np.all(w == values[name])
    assert sorted(os.listdir(out_dir)) == sorted(["out.onnx", os.path.basename(data_file(out))])


def test_each_conversion_leaves_only_its_own_data_file(tmp_path):
    a = weights_model(str(tmp_path), "a", 1.0)
    b = weights_model(str(tmp_path), "b", 2.0)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = str(out_dir / "out.onnx")
    names = []
    for src in (a, b, a):
        assert run_qconv("convert", src, out, "--format", "qdq").returncode == 0
        names.append(os.path.basename(data_file(out)))
        assert sorted(os.listdir(out_dir)) == sorted(["out.onnx", names[-1]])
        assert np.all(session(out).run(None, {"x": np.zeros(4096, np.float32)})[0] == (1.0 if src == a else 2.0))
    assert names[0] == names[2] != names[1]  # named by content: deterministic
    # a data file left by a run killed between its two renames (named, but by no model) goes too:
    # b's, as a killed run would have left it (its bytes hash to its name: qconv wrote it)
    with open(out_dir / names[0], "rb") as f:
        a_bytes = f.read()
    assert run_qconv("convert", b, out, "--format", "qdq").returncode == 0
    with open(out_dir / names[0], "wb") as f:  # a's data back, named by no model now
        f.write(a_bytes)
    # a file only named like a data file (its bytes are not what its name says) is not qconv's
    look_alike = out_dir / "out.onnx.00000000000000aa.data"
    look_alike.write_bytes(b"\0" * 4096)
    assert run_qconv("convert", b, out, "--format", "qdq", "--inline-data").returncode == 0
    assert sorted(os.listdir(out_dir)) == ["out.onnx", look_alike.name] and data_file(out) is None

