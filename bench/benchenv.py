"""What every benchmark script needs, checked before it starts, with the fix in one line:
  - the test environment, .venv/ (onnx, onnxruntime, numpy; scripts/setup.sh makes it): run the
    scripts as `.venv/bin/python bench/NAME.py`;
  - a built qconv, build/tools/qconv (scripts/example.sh or scripts/setup.sh builds it);
  - --work DIR, where a script puts its models: created when it does not exist.
"""
from __future__ import annotations

import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def require(modules: tuple[str, ...] = ("numpy", "onnx"), qconv: str | None = None) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        sys.exit(f"{os.path.basename(sys.argv[0])}: needs {', '.join(missing)} from the test environment: run "
                 f"scripts/setup.sh once, then .venv/bin/python {os.path.relpath(sys.argv[0], ROOT)}")
    binary = qconv or os.path.join(ROOT, "build", "tools", "qconv")
    if not os.access(binary, os.X_OK):
        sys.exit(f"{os.path.basename(sys.argv[0])}: no qconv at {binary}: build it with scripts/setup.sh")


def work_dir(given: str | None, prefix: str) -> str:
    """--work DIR (created, with its parents, when missing), else a new temporary folder."""
    if given:
        os.makedirs(given, exist_ok=True)
        return given
    import tempfile
    return tempfile.mkdtemp(prefix=prefix)
