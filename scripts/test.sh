#!/usr/bin/env bash
# The whole test suite: set up (packages, .venv, build), then the Catch2 unit tests (ctest),
# the wheel built and installed into .venv, and the integration tests and the Python API's tests
# (pytest: the ONNX reference judges the numbers, onnxruntime runs every output; tests/python
# imports qconv from the installed wheel). Exits non-zero if anything fails.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh
echo "== unit tests (Catch2, ctest)"
ctest --test-dir build --output-on-failure -j"$(nproc)"
echo "== the wheel (scripts/build_wheel.sh: pip wheel ., auditwheel repair), installed into .venv"
wheel="$root/$(scripts/build_wheel.sh)"
.venv/bin/pip install -q --disable-pip-version-check --force-reinstall --no-deps "$wheel"
echo "== integration tests (pytest: the ONNX reference judges, onnxruntime second) and the Python API's, against the wheel"
QCONV_BIN="$root/build/tools/qconv" QCONV_WHEEL="$wheel" .venv/bin/python -m pytest -q tests/integration tests/python "$@"
