#!/usr/bin/env bash
# Line coverage of each pass file when qconv converts the fuzzing seeds (tests/fuzz/make_seeds.py
# and test_data/examples) five ways: --format qop --approximate; --format qdq; --format qop
# --weight-type uint8 --raise-weight-scale; --format qdq --activation-type int8 --weight-type int8 --opset 21;
# --format qop --contrib. That is what
# the fuzzer starts from (docs/robustness.md). Needs gcc's gcov and the test environment.
# Usage: scripts/pass_coverage.sh   (builds into build-cov/)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# QCONV_SANITIZED: a normal exit, so that the counters are written (qconv otherwise _Exit()s)
cmake -S . -B build-cov -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS="--coverage -O0 -DQCONV_SANITIZED" \
  -DQCONV_BUILD_TESTS=OFF -DQCONV_BUILD_BENCH=OFF >/dev/null
cmake --build build-cov --target qconv >/dev/null
find build-cov -name '*.gcda' -delete
seeds=$(mktemp -d) out=$(mktemp -d)
trap 'rm -rf "$seeds" "$out"' EXIT
.venv/bin/python tests/fuzz/make_seeds.py "$seeds" >/dev/null 2>&1
for f in "$seeds"/*.onnx test_data/examples/*.onnx; do
  b=$(basename "$f" .onnx)
  build-cov/tools/qconv convert "$f" "$out/$b-1.onnx" --format qop --approximate -q >/dev/null 2>&1 || true
  build-cov/tools/qconv convert "$f" "$out/$b-2.onnx" --format qdq -q >/dev/null 2>&1 || true
  build-cov/tools/qconv convert "$f" "$out/$b-3.onnx" --format qop --weight-type uint8 --raise-weight-scale -q >/dev/null 2>&1 || true
  build-cov/tools/qconv convert "$f" "$out/$b-4.onnx" --format qdq --activation-type int8 --weight-type int8 --opset 21 -q >/dev/null 2>&1 || true
  build-cov/tools/qconv convert "$f" "$out/$b-5.onnx" --format qop --contrib -q >/dev/null 2>&1 || true
done
cd build-cov/lib/CMakeFiles/qconv_lib.dir/qconv/passes
gcov -n ./*/*.gcda ./*.gcda 2>/dev/null |
  awk -F"'" '/^File /{f=$2; next} /^Lines executed:/{ if (f ~ /passes\/([a-z]+\/)?[^\/]*\.cpp$/) { sub(/.*passes\//, "", f); split($0, a, /[:% ]+/); printf "| %s | %s%% of %s lines |\n", f, a[3], a[5] } f="" }' | sort
