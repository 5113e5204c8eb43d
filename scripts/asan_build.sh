#!/usr/bin/env bash
# The one sanitized build, build-asan/: clang with AddressSanitizer, UndefinedBehaviorSanitizer
# and libFuzzer's coverage, so that scripts/sanitize.sh (the whole test suite under the
# sanitizers) and scripts/fuzz.sh (the fuzzer) share one compile (CI builds it once).
# Usage: scripts/asan_build.sh [TARGET...]   (default: everything: the tests, qconv, fuzz_convert)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh --no-venv
# an older build-asan (g++, without the fuzzer's coverage) is configured again
if [ ! -f build-asan/build.ninja ] || ! grep -q '^QCONV_FUZZ:BOOL=ON' build-asan/CMakeCache.txt; then
  rm -rf build-asan
  CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DQCONV_SANITIZE=address,undefined -DQCONV_FUZZ=ON -DQCONV_BUILD_BENCH=OFF >/dev/null
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build build-asan "${targets[@]}" -- -j"$(nproc)" >/dev/null || cmake --build build-asan "${targets[@]}"
