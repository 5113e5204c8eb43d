#!/usr/bin/env bash
# The CPython interpreters qconv's wheels are built for and tested on (scripts/build_wheel.sh,
# scripts/test.sh), oldest first, one path a line: QCONV_PYTHONS (paths, space-separated) if set,
# else each of python3.10 ... python3.13 found on PATH or, failing that, under ~/.pyenv/versions/.
set -euo pipefail
if [ -n "${QCONV_PYTHONS:-}" ]; then
  tr ' ' '\n' <<<"$QCONV_PYTHONS" | grep -v '^$'
  exit 0
fi
# each as the interpreter's own path (sys.executable): a pyenv shim on PATH runs only the versions
# pyenv's setting selects
for minor in 10 11 12 13; do
  exe=""
  for py in "$(command -v "python3.$minor" || true)" \
            $(ls -d "$HOME"/.pyenv/versions/3."$minor".*/bin/python3."$minor" 2>/dev/null | sort -rV); do
    [ -n "$py" ] || continue
    exe=$("$py" -c 'import sys; print(sys.executable)' 2>/dev/null) && break
  done
  if [ -n "$exe" ]; then echo "$exe"; fi
done
