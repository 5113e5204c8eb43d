"""The docs' commands run literally (issue 29, deliverable 8): every fenced block that README.md
or a docs/*.md file marks runnable (an HTML comment `<!-- runnable -->` on the line before the
fence) is run as written, with bash -euo pipefail, in a fresh folder where `qconv` is the built
binary on PATH, `test_data/` is the repository's, and `models/` holds three copies of the
bundled example. A block that fails (any command of it) fails its test, named by file and line.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess

import pytest

from conftest import EXAMPLE, ROOT, qconv_bin

MARK = "<!-- runnable -->"
DOCS = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))


def runnable_blocks() -> list[tuple[str, int, str]]:
    """(file relative to the root, line of the fence, the block's text) for each marked block."""
    found = []
    for path in DOCS:
        lines = open(path, encoding="utf-8").read().split("\n")
        for i, line in enumerate(lines):
            if line.strip() != MARK:
                continue
            fence = lines[i + 1] if i + 1 < len(lines) else ""
            assert fence.startswith("```"), f"{path}:{i + 1}: {MARK} is not followed by a fenced block"
            end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
            found.append((os.path.relpath(path, ROOT), i + 2, "\n".join(lines[i + 2:end])))
    return found


BLOCKS = runnable_blocks()


def test_the_docs_mark_their_runnable_blocks():
    files = {f for f, _, _ in BLOCKS}
    assert {"README.md", "docs/cli.md"} <= files, files
    assert len(BLOCKS) >= 6


@pytest.mark.parametrize("doc, line, text", BLOCKS, ids=[f"{f}:{n}" for f, n, _ in BLOCKS])
def test_a_runnable_block_runs_as_written(tmp_path, doc, line, text):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(qconv_bin(), bin_dir / "qconv")
    work = tmp_path / "work"
    work.mkdir()
    os.symlink(os.path.join(ROOT, "test_data"), work / "test_data")
    (work / "models").mkdir()
    for name in ("a", "b", "c"):
        shutil.copy(EXAMPLE, work / "models" / f"{name}.onnx")
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=work, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, f"{doc}:{line} fails (exit {r.returncode}):\n{text}\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}"
    # nothing it wrote is outside its folder: the models are as they were
    for name in ("a", "b", "c"):
        assert open(work / "models" / f"{name}.onnx", "rb").read() == open(EXAMPLE, "rb").read()
