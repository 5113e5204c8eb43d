#!/usr/bin/env bash
# Build qconv's wheel and repair it for installing where nothing was built:
#   pip wheel .          scikit-build-core drives the CMake build (pyproject.toml) in build/wheel/,
#                        which a second run reuses; the pinned ONNX from build/deps/ (built once)
#   auditwheel repair    the shared library it links from Debian (protobuf's lite runtime) copied into the
#                        wheel, which then carries a manylinux tag
# Prints the repaired wheel's path (build/dist/qconv-VERSION-TAGS.whl) on stdout.
# Needs the Debian packages scripts/setup.sh installs. Usage: scripts/build_wheel.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
tools=build/deps/wheel-tools
if [ ! -x "$tools/bin/auditwheel" ] || ! cmp -s python/requirements-wheel.txt "$tools/.requirements"; then
  python3 -m venv "$tools"
  "$tools/bin/pip" install -q --disable-pip-version-check -r python/requirements-wheel.txt
  cp python/requirements-wheel.txt "$tools/.requirements"
fi
rm -rf build/dist
start=$(date +%s)
"$tools/bin/pip" wheel -q --disable-pip-version-check --no-deps -w build/dist/raw . >&2
PATH="$root/$tools/bin:$PATH" "$tools/bin/auditwheel" repair --strip -w build/dist build/dist/raw/qconv-*.whl >build/dist/repair.log 2>&1 || { cat build/dist/repair.log >&2; exit 1; }
echo "build_wheel: built and repaired in $(( $(date +%s) - start ))s" >&2
ls build/dist/qconv-*manylinux*.whl
