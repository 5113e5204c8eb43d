#!/usr/bin/env bash
# The whole test suite: set up (packages, .venv, build), then the Catch2 unit tests (ctest), the
# integration tests (pytest: the ONNX reference judges the numbers, onnxruntime runs every
# output), and the Python API's tests (tests/python) on each CPython from 3.10 present
# (scripts/pythons.sh), each in a fresh venv holding the binary wheel for it (scripts/build_wheel.sh)
# and the tests' own tools, importing qconv from the installed wheel; on the newest, the sdist is
# built and installed too (test_sdist.py). Exits non-zero if anything fails.
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
echo "== the wheels and the sdist (scripts/build_wheel.sh: cp310, cp311, cp312-abi3 for 3.12 and later, auditwheel repair)"
mapfile -t built < <(scripts/build_wheel.sh)
sdist=""
for f in "${built[@]}"; do case "$f" in *.tar.gz) sdist="$root/$f" ;; esac; done
mapfile -t pythons < <(scripts/pythons.sh)
newest="${pythons[${#pythons[@]}-1]}"
for py in "${pythons[@]}"; do
  tag=$("$py" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
  # the wheel this Python installs: its own below 3.12, the stable-ABI one from 3.12 on
  wheel=$(ls build/dist/qconv-*-"$tag"-"$tag"-*.whl 2>/dev/null || ls build/dist/qconv-*-abi3-*.whl)
  echo "== the Python API's tests (tests/python) on $("$py" --version), against $(basename "$wheel") installed in a fresh venv"
  venv="build/wheel-venv-$tag"
  rm -rf "$venv"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r tests/python/requirements.txt
  # the binary wheel only, never a source build: pip picks the one for this Python from build/dist/
  "$venv/bin/pip" install -q --disable-pip-version-check --no-index --only-binary :all: --find-links build/dist qconv
  # from a folder outside the repository: `import qconv` can only be the installed package
  work=$(mktemp -d)
  extra=()
  [ "$py" = "$newest" ] && [ -n "$sdist" ] && extra=(QCONV_SDIST="$sdist")
  (cd "$work" && env QCONV_BIN="$root/build/tools/qconv" QCONV_WHEEL="$root/$wheel" "${extra[@]}" \
     "$root/$venv/bin/python" -m pytest -q -p no:cacheprovider --rootdir "$root/tests/python" "$root/tests/python" "$@")
  rm -rf "$work"
done
