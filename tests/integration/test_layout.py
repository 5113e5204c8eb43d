"""The folders show the pipeline (issue 26, docs/architecture.md "The phases"): each pass's file
is in its phase's folder, and the layering stays one-way.

- a phase folder of lib/qconv/passes/ includes from its own folder, common/ and the top level
  (pass.h, driver.h), never from another phase's;
- common/ includes no phase's files;
- outside passes/ (ir, io, analysis, pipeline, tools) nothing reaches a phase's files: only the
  top level and common/;
- tests/unit/ mirrors lib/qconv/: every test file's folder is one of lib/qconv's."""
from __future__ import annotations

import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LIB = os.path.join(ROOT, "lib", "qconv")
PASSES = os.path.join(LIB, "passes")
PHASES = ["read", "canonical", "qop", "target"]
INCLUDE = re.compile(r'#include "qconv/passes/([^"]+)"')


def sources(folder: str):
    for root, _, files in os.walk(folder):
        for f in files:
            if f.endswith((".h", ".cpp", ".inc", ".def")):
                yield os.path.join(root, f)


def included_folders(path: str) -> set[str]:
    """The passes/ subfolders `path` includes from ("" for the top level)."""
    with open(path, encoding="utf-8") as f:
        return {os.path.dirname(m) for m in INCLUDE.findall(f.read())}


def test_the_phase_folders_are_the_four_phases_and_common():
    folders = sorted(d for d in os.listdir(PASSES) if os.path.isdir(os.path.join(PASSES, d)))
    assert folders == sorted(PHASES + ["common"])
    assert sorted(f for f in os.listdir(PASSES) if os.path.isfile(os.path.join(PASSES, f))) == \
        ["driver.h", "pass.cpp", "pass.h", "passes.def"]


def test_a_phase_uses_its_own_folder_common_and_the_top_never_another_phase():
    wrong = []
    for phase in PHASES + ["common"]:
        allowed = {"", "common", phase}
        for path in sources(os.path.join(PASSES, phase)):
            wrong += [(os.path.relpath(path, LIB), d) for d in included_folders(path) - allowed]
    assert wrong == []


def test_nothing_outside_passes_reaches_a_phase():
    wrong = []
    for folder in (LIB, os.path.join(ROOT, "tools"), os.path.join(ROOT, "python")):
        for path in sources(folder):
            if path.startswith(PASSES + os.sep):
                continue
            wrong += [(os.path.relpath(path, ROOT), d) for d in included_folders(path) - {"", "common"}]
    assert wrong == []


def test_every_registered_pass_is_in_its_phases_folder():
    text = open(os.path.join(PASSES, "passes.def"), encoding="utf-8").read()
    entries = re.findall(r'^QCONV_PASS\("([^"]+)", \w+, \w+, (\w+),', text, re.M)
    assert len(entries) == 48  # scalarize-one-channel: issue 36; the NPU targets' five: issue 38; widen-packed: issue 46; check-ops, approximate-gelu, declare-shapes, requantize-shared-bias, fold-shapes, trim-padding, reflect-pad-as-gather, global-max-pool-as-reduce-max, fold-constant-weights: issue 47
    folder = {"Read": "read", "Canonical": "canonical", "Qop": "qop", "Target": "target"}
    for name, phase in entries:
        assert os.path.exists(os.path.join(PASSES, folder[phase], name.replace("-", "_") + ".cpp")), name
    # grouped: each phase's lines together, the phases in pipeline order
    order = [p for i, (_, p) in enumerate(entries) if i == 0 or entries[i - 1][1] != p]
    assert order == ["Read", "Canonical", "Qop", "Target"]


def test_the_unit_tests_mirror_the_library():
    unit = os.path.join(ROOT, "tests", "unit")
    for root, _, files in os.walk(unit):
        rel = os.path.relpath(root, unit)
        if any(f.endswith(".cpp") for f in files) and rel != ".":
            assert os.path.isdir(os.path.join(LIB, rel)), rel


def test_no_registry_file_host_is_written_in_the_repository():
    """Issue 36, item 9: third_party/onnx.pin held a download URL on a package registry's file host;
    ONNX's source distribution is fetched by name and version with pip (scripts/build_onnx.sh),
    its sha256 still checked. No tracked file names such a host."""
    import subprocess
    hosts = ["files." + "pythonhosted.org", "pypi." + "org/packages", "deb." + "debian.org/debian/pool",
             "download." + "pytorch.org", "github" + ".com/onnx/onnx/archive"]
    tracked = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True, check=True).stdout.split()
    found = []
    for rel in tracked:
        path = os.path.join(ROOT, rel)
        if not os.path.isfile(path) or os.path.getsize(path) > 4_000_000:
            continue
        text = open(path, "rb").read().decode("utf-8", "replace")
        found += [f"{rel}: {h}" for h in hosts if h in text]
    assert found == [], found
    pin = open(os.path.join(ROOT, "third_party", "onnx.pin")).read()
    assert "url=" not in pin and "sha256=" in pin
    script = open(os.path.join(ROOT, "scripts", "build_onnx.sh")).read()
    assert "pip\" download" in script or "pip download" in script or '/bin/pip" download' in script
