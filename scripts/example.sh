#!/usr/bin/env bash
# Build qconv if needed and convert the bundled example (a small CNN that onnxruntime's
# quantize_static wrote in QDQ form) to QOp: build/example/small_cnn_qop.onnx.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh --no-venv --command-only  # the command alone: scripts/test.sh builds the rest
mkdir -p build/example
build/tools/qconv convert test_data/examples/small_cnn_qdq.onnx build/example/small_cnn_qop.onnx --format qop "$@"
echo "wrote build/example/small_cnn_qop.onnx"
