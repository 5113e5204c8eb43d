#!/usr/bin/env bash
# Fuzz parse + every pass + emit with libFuzzer (clang, ASan, UBSan) for a bounded time,
# seeded from test_data/, the hostile corpus, and one model per dialect from the test builders
# (tests/fuzz/make_seeds.py, with the test environment scripts/test.sh makes). Usage: scripts/fuzz.sh [seconds, default 60]
# Prints libFuzzer's execution count; a crash leaves crash-* in build-fuzz/artifacts/ and
# exits non-zero (each one found becomes a case in tests/hostile/make_corpus.py).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
seconds="${1:-60}"
scripts/asan_build.sh fuzz_convert  # the sanitized build scripts/sanitize.sh runs the tests on (built once)
mkdir -p build-fuzz/corpus build-fuzz/artifacts
seeds=$(find test_data tests/hostile/corpus -name '*.onnx' -size -1024k | sort)
mkdir -p build-fuzz/seeds && cp $seeds build-fuzz/seeds/ 2>/dev/null || true
[ -x .venv/bin/python ] || { echo "fuzz: no .venv: run scripts/test.sh first (the dialect seeds need it)"; exit 1; }
.venv/bin/python tests/fuzz/make_seeds.py build-fuzz/seeds 2>/dev/null | sed 's/^/fuzz: /'
echo "== fuzzing for ${seconds}s, seeds: $(ls build-fuzz/seeds | wc -l) models"
start=$(date +%s)
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  build-asan/fuzz_convert -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=1048576 -print_final_stats=1 \
  -artifact_prefix=build-fuzz/artifacts/ build-fuzz/corpus build-fuzz/seeds 2>build-fuzz/fuzz.log \
  || { tail -60 build-fuzz/fuzz.log; exit 1; }
grep -E "stat::number_of_executed_units|stat::peak_rss_mb|INITED|DONE" build-fuzz/fuzz.log | sed 's/^/fuzz: /'
echo "fuzz: no crash in $(( $(date +%s) - start ))s"
