#!/usr/bin/env bash
# The whole test suite (ctest and pytest) against a build with AddressSanitizer and
# UndefinedBehaviorSanitizer (clang, scripts/asan_build.sh; any report fails the test that triggered it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh
scripts/asan_build.sh  # clang; the fuzzer's build too (scripts/fuzz.sh)
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
echo "== unit tests under ASan+UBSan"
ctest --test-dir build-asan --output-on-failure -j"$(nproc)"
echo "== integration tests under ASan+UBSan"
QCONV_SANITIZED=1 QCONV_BIN="$root/build-asan/tools/qconv" .venv/bin/python -m pytest -q tests/integration "$@"
