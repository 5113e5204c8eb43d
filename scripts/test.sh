#!/usr/bin/env bash
# The whole test suite: set up (packages, .venv, build), then the Catch2 unit tests (ctest)
# and the integration tests (pytest: the ONNX reference judges the numbers, onnxruntime runs every
# output). Exits non-zero if anything fails.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh
echo "== unit tests (Catch2, ctest)"
ctest --test-dir build --output-on-failure -j"$(nproc)"
echo "== integration tests (pytest: the ONNX reference judges, onnxruntime second)"
QCONV_BIN="$root/build/tools/qconv" .venv/bin/python -m pytest -q tests/integration "$@"
