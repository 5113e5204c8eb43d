#!/usr/bin/env bash
# Install everything qconv needs on a fresh Debian machine, then build it.
#   Debian packages: the compiler, CMake, Ninja and the libraries qconv links (only those);
#   ONNX: the version third_party/onnx.pin names, built from source by scripts/build_onnx.sh (~1 min once);
#   for the tests: time, strace (what a run opens), clang and its libFuzzer runtime (tests/fuzz),
#   headless Chromium (the HTML report).
#   .venv/: the Python reference (onnx, onnxruntime, numpy, pytest) for tests and benchmarks.
# Safe to run again: each step is skipped when already done.
# Usage: scripts/setup.sh [--no-venv] [--command-only]
#   --no-venv        no .venv/ (the example needs none)
#   --command-only   build the qconv command alone (scripts/example.sh); the test script builds the rest
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

debs=(g++ cmake ninja-build pkg-config libprotobuf-dev protobuf-compiler libcli11-dev
      libspdlog-dev libfmt-dev nlohmann-json3-dev catch2 python3 python3-venv time strace clang libclang-rt-14-dev
      qemu-user help2man dpkg-dev file zsh)  # qemu-user: an emulated x86 CPU without VNNI for the saturation tests
# (test_targets.py); help2man: the man page; dpkg-dev, file: CPack's .deb and its dependencies (cpack -G DEB);
# zsh: the zsh completion is checked by it (test_install.py)
# chromium: the HTML report is checked in a real browser, headless (test_report_views.py); not for
# --command-only (the example)
case " $* " in *" --command-only "*) ;; *) debs+=(chromium) ;; esac
missing=()
for p in "${debs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

venv=1; targets=()
for arg in "$@"; do
  case "$arg" in
    --no-venv) venv=0 ;;
    --command-only) targets=(--target qconv) ;;
    *) echo "setup.sh: unknown option $arg (--no-venv, --command-only)" >&2; exit 2 ;;
  esac
done

if ((venv)); then
  stamp=.venv/.requirements
  if [ ! -x .venv/bin/python ] || ! cmp -s tests/requirements.txt "$stamp"; then
    echo "setup: creating the Python reference environment in .venv/"
    python3 -m venv .venv
    .venv/bin/pip install -q --disable-pip-version-check -r tests/requirements.txt
    cp tests/requirements.txt "$stamp"
  fi
fi

# ONNX (third_party/onnx.pin): built from PyPI's source distribution once, cached in build/deps/.
scripts/build_onnx.sh >/dev/null

if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build build "${targets[@]}" -- -j"$(nproc)" >/dev/null || cmake --build build "${targets[@]}"  # show errors on failure
