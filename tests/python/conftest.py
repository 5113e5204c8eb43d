"""The Python API's tests run against the installed wheel (scripts/test.sh builds the wheels with
scripts/build_wheel.sh and, for each CPython present, installs the one for it into a fresh venv,
build/wheel-venv-cpXY, with tests/python/requirements.txt, then runs these tests from a folder
outside the repository): `import qconv` must come from site-packages, never from the source tree,
and the `qconv` command is the one the wheel installed. QCONV_WHEEL: that wheel's file."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from wheel_env import EXAMPLE, ROOT


@pytest.fixture(scope="session")
def wheel() -> str:
    path = os.environ.get("QCONV_WHEEL", "")
    assert path and os.path.isfile(path), "QCONV_WHEEL: the repaired wheel scripts/build_wheel.sh made"
    return path


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> list[str]:
    """The test corpus: the bundled example, the hostile corpus, and one model per dialect qconv
    reads (tests/fuzz/make_seeds.py, the fuzzer's seeds), each a file."""
    out = tmp_path_factory.mktemp("corpus")
    # made by the repository's test environment (.venv: the producers the builders use), not this one
    maker = os.environ.get("QCONV_SEEDS_PYTHON", os.path.join(ROOT, ".venv", "bin", "python"))
    subprocess.run([maker, os.path.join(ROOT, "tests", "fuzz", "make_seeds.py"), str(out)], check=True,
                   capture_output=True)
    shutil.copy(EXAMPLE, out / "example_small_cnn_qdq.onnx")
    for folder in (os.path.join(ROOT, "test_data"), os.path.join(ROOT, "tests", "hostile", "corpus")):
        for dirpath, _, files in os.walk(folder):
            for f in files:
                if f.endswith(".onnx") and not (out / f).exists():
                    shutil.copy(os.path.join(dirpath, f), out / f)
    return sorted(str(p) for p in out.iterdir() if p.suffix == ".onnx")
