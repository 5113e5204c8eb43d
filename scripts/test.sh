#!/usr/bin/env bash
# The whole test suite: set up (packages, .venv, build), then the Catch2 unit tests (ctest), the
# integration tests (pytest: the ONNX reference judges the numbers, onnxruntime runs every
# output), and the Python API's tests (tests/python) in a fresh venv holding the wheel
# (scripts/build_wheel.sh) and the tests' own tools, importing qconv from the installed wheel. Exits non-zero if anything fails.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh
# the RKNN toolkit's own venv (cached per machine; empty where it cannot be made: its tests skip)
QCONV_RKNN_PYTHON="$(scripts/setup_rknn.sh)"
export QCONV_RKNN_PYTHON
echo "== unit tests (Catch2, ctest)"
ctest --test-dir build --output-on-failure -j"$(nproc)"
echo "== integration tests (pytest: the ONNX reference judges, onnxruntime second)"
QCONV_BIN="$root/build/tools/qconv" .venv/bin/python -m pytest -q tests/integration "$@"
echo "== the wheel (scripts/build_wheel.sh: pip wheel ., auditwheel repair), installed into a fresh venv"
wheel="$root/$(scripts/build_wheel.sh)"
rm -rf build/wheel-venv
python3 -m venv build/wheel-venv
build/wheel-venv/bin/pip install -q --disable-pip-version-check "$wheel" -r tests/python/requirements.txt
echo "== the Python API's tests (tests/python), against the installed wheel"
QCONV_BIN="$root/build/tools/qconv" QCONV_WHEEL="$wheel" build/wheel-venv/bin/python -m pytest -q tests/python "$@"
