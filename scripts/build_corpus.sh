#!/usr/bin/env bash
# The real-model corpus (test_data/corpus.json, issue 47), built once into ~/.cache/qconv/ by the
# test venv's onnxruntime (scripts/build_corpus.py). Prints the folder.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec "$root/.venv/bin/python" "$root/scripts/build_corpus.py"
