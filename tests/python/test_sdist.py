"""The sdist (issue 48, deliverable 2): qconv-VERSION.tar.gz carries what the build needs (the ONNX
pin and the script that fetches ONNX's source distribution by name) and nothing of build/; `pip
install` builds it in a fresh venv from a folder outside the repository, ONNX included, on a
machine with the Debian packages; the installed command and API convert the bundled example to the
bytes the CMake build's command writes. scripts/test.sh runs this on the newest CPython present
(QCONV_SDIST: the sdist scripts/build_wheel.sh made); a build takes minutes, so the other
interpreters' runs skip it."""
from __future__ import annotations

import os
import subprocess
import sys
import tarfile

import pytest

from wheel_env import EXAMPLE, ONNX_VERSION, ROOT, build_cli

SDIST = os.environ.get("QCONV_SDIST", "")
pytestmark = pytest.mark.skipif(not SDIST, reason="the sdist is built and installed on the newest CPython only "
                                                  "(scripts/test.sh sets QCONV_SDIST there)")


def test_the_sdist_carries_what_the_build_needs_and_nothing_of_build():
    assert os.path.basename(SDIST) == "qconv-0.1.0.tar.gz"
    with tarfile.open(SDIST) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for needed in ("pyproject.toml", "CMakeLists.txt", "third_party/onnx.pin", "third_party/QconvDependencies.cmake",
                   "scripts/build_onnx.sh", "python/module.cpp", "python/qconv/__init__.py", "lib/CMakeLists.txt",
                   "tools/CMakeLists.txt", "README.md"):
        assert needed in names, needed
    assert not [n for n in names if n.startswith(("build/", ".venv/", "tests/", "test_data/", "bench/"))]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the venv the sdist was built and installed into, a folder outside the repository)."""
    base = tmp_path_factory.mktemp("sdist")
    assert not str(base).startswith(ROOT)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    work = base / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ONNX_", "CMAKE_", "SKBUILD"))}
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
                        f"onnx=={ONNX_VERSION}", "--no-binary", "qconv", SDIST],
                       capture_output=True, text=True, cwd=str(work), env=env)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    return venv, work


def test_the_sdist_installs_a_qconv_that_converts_as_the_command_does(installed, tmp_path):
    venv, work = installed
    site = subprocess.run([str(venv / "bin" / "python"), "-c", "import qconv; print(qconv.__file__)"],
                          capture_output=True, text=True, cwd=str(work), check=True).stdout.strip()
    assert site.startswith(str(venv)), site
    theirs = tmp_path / "cmake.onnx"
    subprocess.run([build_cli(), "convert", EXAMPLE, str(theirs), "--format", "qop", "--quiet"], check=True)
    ours = work / "sdist.onnx"
    r = subprocess.run([str(venv / "bin" / "qconv"), "convert", EXAMPLE, str(ours), "--format", "qop", "--quiet"],
                       capture_output=True, text=True, cwd=str(work))
    assert r.returncode == 0, r.stderr
    assert ours.read_bytes() == theirs.read_bytes()
    script = f"""
import qconv
r = qconv.convert({EXAMPLE!r}, format="qop", quiet=True)
print(qconv.__version__, qconv.onnx_version, r.model_bytes == open({str(theirs)!r}, "rb").read())
"""
    r = subprocess.run([str(venv / "bin" / "python"), "-c", script], capture_output=True, text=True, cwd=str(work))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0.1.0", ONNX_VERSION, "True"]
