#!/usr/bin/env bash
# Build qconv's binary wheels for every CPython from 3.10 up, repair them for installing where
# nothing was built, and build the sdist:
#   pip wheel .          per interpreter, scikit-build-core drives the CMake build (pyproject.toml) in
#                        build/wheel/, which every interpreter shares: the engine is compiled once and
#                        only the extension is rebuilt for the next Python; the pinned ONNX from build/deps/
#   auditwheel repair    the shared library it links from Debian (protobuf's lite runtime) copied into the
#                        wheel, which then carries a manylinux tag
#   abi3audit --strict   the stable-ABI wheel calls nothing outside CPython 3.12's limited API
#   python -m build --sdist   qconv-VERSION.tar.gz (what `pip install` builds from where no wheel fits)
# One wheel per version below 3.12 (cp310, cp311), one stable-ABI wheel (cp312-abi3) from the oldest
# 3.12 or later present, which every later CPython installs. The interpreters are scripts/pythons.sh's:
# QCONV_PYTHONS (paths, space-separated) if set, else python3.10 ... python3.13 on PATH or under ~/.pyenv/versions/.
# Prints the wheels' and the sdist's paths (build/dist/...), one a line, on stdout; says on stderr
# which interpreters it built for and how long each took.
# Needs the Debian packages scripts/setup.sh installs. Usage: scripts/build_wheel.sh [--no-sdist]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
sdist=1
for arg in "$@"; do
  case "$arg" in
    --no-sdist) sdist=0 ;;
    *) echo "build_wheel.sh: unknown option $arg (--no-sdist)" >&2; exit 2 ;;
  esac
done

tools=build/deps/wheel-tools
if [ ! -x "$tools/bin/auditwheel" ] || ! cmp -s python/requirements-wheel.txt "$tools/.requirements"; then
  rm -rf "$tools"
  python3 -m venv "$tools"
  "$tools/bin/pip" install -q --disable-pip-version-check -r python/requirements-wheel.txt
  cp python/requirements-wheel.txt "$tools/.requirements"
fi

# the interpreters, oldest first
mapfile -t pythons < <(scripts/pythons.sh)
((${#pythons[@]})) || { echo "build_wheel: no CPython 3.10 or later found (set QCONV_PYTHONS)" >&2; exit 1; }

rm -rf build/dist
mkdir -p build/dist/raw
abi3=""
for py in "${pythons[@]}"; do
  version=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if [ -n "$abi3" ]; then
    echo "build_wheel: CPython $version: covered by the stable-ABI wheel built with $abi3" >&2
    continue
  fi
  case "$version" in
    3.10|3.11) ;;
    3.1[2-9]|3.[2-9][0-9]) abi3="$version" ;;
    *) echo "build_wheel: $py is CPython $version: qconv's wheels need 3.10 or later" >&2; exit 1 ;;
  esac
  start=$(date +%s)
  # a venv per interpreter: the pip of that Python builds its wheel (build requirements isolated, from pyproject.toml)
  venv=build/deps/wheel-build-cp${version/./}
  [ -x "$venv/bin/pip" ] || "$py" -m venv "$venv"
  before=$(ls build/dist/raw)
  "$venv/bin/pip" wheel -q --disable-pip-version-check --no-deps -w build/dist/raw . >&2
  raw=$(comm -13 <(echo "$before") <(ls build/dist/raw) | head -1)
  [ -n "$raw" ] || { echo "build_wheel: pip wrote no wheel for CPython $version" >&2; exit 1; }
  PATH="$root/$tools/bin:$PATH" "$tools/bin/auditwheel" repair --strip -w build/dist "build/dist/raw/$raw" \
    >build/dist/repair.log 2>&1 || { cat build/dist/repair.log >&2; exit 1; }
  echo "build_wheel: CPython $version ($py): $raw, built and repaired in $(( $(date +%s) - start ))s" >&2
done
if [ -n "$abi3" ]; then
  "$tools/bin/abi3audit" --strict --summary build/dist/qconv-*-abi3-*.whl >&2
fi
if ((sdist)); then
  start=$(date +%s)
  "$tools/bin/python" -m build --sdist --outdir build/dist . >build/dist/sdist.log 2>&1 || { cat build/dist/sdist.log >&2; exit 1; }
  echo "build_wheel: sdist built in $(( $(date +%s) - start ))s" >&2
fi
ls build/dist/qconv-*manylinux*.whl
((sdist)) && ls build/dist/qconv-*.tar.gz
exit 0
