"""The wheel installs where nothing was built (issue 37, deliverable 2; issue 48 for every
CPython): a new venv of the Python running these tests holding nothing but pip and onnx, the
binary wheel for that Python installed into it with `--no-index --only-binary :all:` (never a
source build), the command and the API run from a folder outside the repository; nothing they
load resolves outside the wheel but the C and C++ runtime libraries; auditwheel names a manylinux
policy; the wheel's tags are the ones this Python installs (cpXY, or cp312-abi3 from 3.12)."""
from __future__ import annotations

import glob
import os
import re
import subprocess
import sys

import pytest

from wheel_env import EXAMPLE, ONNX_VERSION, ROOT

# What a manylinux policy lets a wheel take from the system (auditwheel's whitelist, the part
# qconv's files link): the C and C++ runtimes, and zlib (protobuf's).
SYSTEM = {"linux-vdso.so.1", "libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2",
          "libpthread.so.0", "libdl.so.2", "librt.so.1", "libz.so.1"}


@pytest.fixture(scope="module")
def fresh(wheel, tmp_path_factory):
    """(the new venv, a folder outside the repository)."""
    base = tmp_path_factory.mktemp("fresh")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    listed = subprocess.run([str(venv / "bin" / "pip"), "list", "--format=freeze"], capture_output=True, text=True)
    assert {line.split("==")[0] for line in listed.stdout.split()} <= {"pip", "setuptools"}  # nothing but pip
    pip = [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check"]
    r = subprocess.run([*pip, f"onnx=={ONNX_VERSION}"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # pip chooses from the folder the wheels are in: the one for this Python, or none (an error)
    r = subprocess.run([*pip, "--no-index", "--only-binary", ":all:", "--find-links", os.path.dirname(wheel), "qconv"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    listed = subprocess.run([str(venv / "bin" / "pip"), "list", "--format=freeze"], capture_output=True, text=True)
    assert "qconv==0.1.0" in listed.stdout.split()
    work = base / "work"
    work.mkdir()
    assert not str(work).startswith(ROOT)
    return venv, work


def test_the_wheel_is_the_one_this_python_installs(wheel):
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    name = os.path.basename(wheel)
    if sys.version_info >= (3, 12):
        assert "-cp312-abi3-" in name, name  # one stable-ABI wheel for 3.12 and every later CPython
    else:
        assert f"-{tag}-{tag}-" in name, name


def test_the_command_runs_from_the_fresh_venv(fresh):
    venv, work = fresh
    out = work / "small_cnn_qop.onnx"
    r = subprocess.run([str(venv / "bin" / "qconv"), "convert", EXAMPLE, str(out), "--format", "qop"],
                       capture_output=True, text=True, cwd=str(work), env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert "3 QLinearConv" in r.stderr and out.stat().st_size > 0
    r = subprocess.run([str(venv / "bin" / "python"), "-m", "qconv", "verify", str(out), "--target", "onnxruntime",
                        "--ignore", "saturation"], capture_output=True, text=True, cwd=str(work))
    assert r.returncode == 0, r.stderr


def test_the_api_runs_from_the_fresh_venv(fresh):
    venv, work = fresh
    script = f"""
import os, qconv, onnx
assert qconv.__file__.startswith({str(venv)!r}), qconv.__file__
r = qconv.convert({EXAMPLE!r}, target="openvino")
assert isinstance(r.model, onnx.ModelProto)
print(qconv.__version__, qconv.onnx_version, len(r.model.graph.node), r.summary)
"""
    r = subprocess.run([str(venv / "bin" / "python"), "-c", script], capture_output=True, text=True, cwd=str(work),
                       env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("0.1.0 1.23.2 ")


def test_nothing_resolves_outside_the_wheel_but_the_c_and_cxx_runtimes(fresh):
    venv, _ = fresh
    site = glob.glob(str(venv / "lib" / "python3*" / "site-packages"))[0]
    files = glob.glob(os.path.join(site, "qconv", "_qconv*.so")) + [os.path.join(site, "qconv", "bin", "qconv")]
    assert len(files) == 2
    for f in files:
        r = subprocess.run(["ldd", f], capture_output=True, text=True, check=True)
        libs = [line.split()[0] for line in r.stdout.splitlines() if line.strip()]
        for line in r.stdout.splitlines():
            name = os.path.basename(line.split()[0])
            where = line.split("=>")[1].split("(")[0].strip() if "=>" in line else ""
            if name in SYSTEM:
                continue
            assert "not found" not in line, line
            assert os.path.realpath(where).startswith(os.path.realpath(os.path.join(site, "qconv.libs"))), line
        grafted = [os.path.basename(x) for x in libs if "qconv.libs" in x or re.search(r"-[0-9a-f]{8}\.so", x)]
        # protobuf's lite runtime is the one Debian library linked shared (fmt and spdlog are
        # compiled in: third_party/, issue 39)
        assert {g.split("-")[0] for g in grafted} == {"libprotobuf"}, r.stdout


def test_auditwheel_names_a_manylinux_policy(wheel):
    auditwheel = os.path.join(ROOT, "build", "deps", "wheel-tools", "bin", "auditwheel")
    r = subprocess.run([auditwheel, "show", wheel], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert re.search(r'consistent with the following platform tag: "manylinux_2_\d+_x86_64"', text), text
    tag = re.search(r"manylinux_2_(\d+)_x86_64\.whl$", wheel)
    assert tag, wheel
    # the floor docs/python.md states: glibc 2.34 (GCC 12's condition_variable::wait alone made it 2.35)
    assert int(tag.group(1)) <= 34, wheel
