"""The Python in the docs runs as written: each ```python block README.md or docs/*.md marks
`<!-- runnable python -->` runs with this environment's Python (the installed wheel) in a fresh
folder where `test_data/` is the repository's."""
from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest

from wheel_env import ROOT

MARK = "<!-- runnable python -->"


def blocks() -> list[tuple[str, int, str]]:
    found = []
    for path in [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))):
        lines = open(path, encoding="utf-8").read().split("\n")
        for i, line in enumerate(lines):
            if line.strip() == MARK:
                assert lines[i + 1].startswith("```python"), f"{path}:{i + 1}: {MARK} needs a ```python block"
                end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
                found.append((os.path.relpath(path, ROOT), i + 2, "\n".join(lines[i + 2:end])))
    return found


BLOCKS = blocks()


def test_the_readme_has_its_python_quick_start():
    assert any(f == "README.md" and "qconv.convert" in text for f, _, text in BLOCKS)


@pytest.mark.parametrize("doc, line, text", BLOCKS, ids=[f"{f}:{n}" for f, n, _ in BLOCKS])
def test_a_python_block_runs_as_written(tmp_path, doc, line, text):
    os.symlink(os.path.join(ROOT, "test_data"), tmp_path / "test_data")
    r = subprocess.run([sys.executable, "-c", text], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{doc}:{line} fails:\n{r.stderr}"
    assert r.stderr == "" or "pre-processing before quantization" in r.stderr  # onnxruntime's own advice only
    if "result.summary" in text:
        assert "QLinearConv" in r.stdout
