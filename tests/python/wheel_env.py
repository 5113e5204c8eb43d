"""What the Python API's tests share: the repository, the bundled example, and the commands (the
wheel's `qconv`, and build/tools/qconv for comparison)."""
from __future__ import annotations

import os
import subprocess
import sysconfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "test_data", "examples", "small_cnn_qdq.onnx")
# the onnx qconv is built on (third_party/onnx.pin), which the API's tests install beside the wheel
with open(os.path.join(ROOT, "third_party", "onnx.pin")) as _pin:
    ONNX_VERSION = next(line.split("=", 1)[1].strip() for line in _pin if line.startswith("version="))


def wheel_cli() -> str:
    """The `qconv` script the wheel installed into this environment (python/qconv_command.py)."""
    return os.path.join(sysconfig.get_path("scripts"), "qconv")


def run_cli(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([wheel_cli(), *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def build_cli() -> str:
    """The command scripts/setup.sh builds (build/tools/qconv), from the same sources."""
    return os.environ.get("QCONV_BIN", os.path.join(ROOT, "build", "tools", "qconv"))
