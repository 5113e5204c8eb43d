#!/usr/bin/env bash
# Build the ONNX pinned in third_party/onnx.pin from its PyPI source distribution, once:
#   build/deps/onnx-<version>/install   headers, libonnx.a, libonnx_proto.a, the CMake package
# It builds against Debian's protobuf (libprotobuf-dev, protoc), as a static library with
# position-independent code, with ONNX_ML (the onnx-ml.proto that producers write), and on
# protobuf's lite runtime: qconv uses no reflection, and the full runtime's descriptors cost each
# run of the command their registration at start (a third of `qconv --version`).
# A second run finds the stamp and costs nothing. Prints the install prefix on stdout.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pin() { sed -n "s/^$1=//p" "$root/third_party/onnx.pin"; }
version="$(pin version)"; sha="$(pin sha256)"; cmake_pin="$(pin cmake)"
deps="$root/build/deps"; dir="$deps/onnx-$version"; prefix="$dir/install"
stamp="$prefix/.qconv-built"
# -O1: ONNX's 400 operator schemas are most of its compiling, and qconv runs them little (a
# schema is built when a model uses its operator): -O3 took 136 s of a fresh clone's first build
# here, -O1 82 s, for 0.7% more instructions in a ResNet-50-shape conversion, 1.9% in the bundled
# example's (callgrind; docs/benchmarks.md, issue 39). ONNX_USE_UNITY_BUILD, ONNX's own option:
# its sources compiled in batches, each heavy header parsed once per batch (108 -> 45 s here).
options=(-DONNX_ML=ON -DONNX_NAMESPACE=onnx -DONNX_USE_LITE_PROTO=ON -DONNX_BUILD_PYTHON=OFF -DONNX_BUILD_TESTS=OFF
         -DONNX_GEN_PB_TYPE_STUBS=OFF -DONNX_USE_PROTOBUF_SHARED_LIBS=ON -DONNX_BUILD_CUSTOM_PROTOBUF=OFF
         -DONNX_USE_UNITY_BUILD=ON "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG")
built_as() { cat "$root/third_party/onnx.pin"; echo "options=${options[*]}"; }  # what the stamp holds
if [ -f "$stamp" ] && cmp -s "$stamp" <(built_as); then
  echo "$prefix"; exit 0
fi
start=$(date +%s)
mkdir -p "$dir"
# A venv of our own supplies pip (and CMake below when Debian's is too old): python3-venv
# brings pip with it on Debian, where the system python has none.
tools="$deps/tools"
if [ ! -x "$tools/bin/pip" ]; then python3 -m venv "$tools"; fi
tarball="$dir/onnx-$version.tar.gz"
if [ ! -f "$tarball" ] || ! echo "$sha  $tarball" | sha256sum -c --status; then
  # Fetched by name and version with the registry's own client; only the sha256 is pinned here.
  echo "build_onnx: fetching onnx $version's source distribution with pip download" >&2
  rm -rf "$dir/download"
  "$tools/bin/pip" download -q --disable-pip-version-check --no-deps --no-binary onnx \
    -d "$dir/download" "onnx==$version" >&2
  got="$dir/download/onnx-$version.tar.gz"
  [ -f "$got" ] || { echo "build_onnx: pip download gave no onnx-$version.tar.gz" >&2; exit 1; }
  echo "$sha  $got" | sha256sum -c --status || { echo "build_onnx: onnx-$version.tar.gz: sha256 mismatch (pinned $sha)" >&2; exit 1; }
  mv "$got" "$tarball"; rm -rf "$dir/download"
fi
rm -rf "$dir/src" "$dir/build" "$prefix"
mkdir -p "$dir/src"
tar xzf "$tarball" -C "$dir/src" --strip-components=1

# ONNX's CMakeLists names its minimum CMake; take one from PyPI when Debian's is older.
need="$(sed -n 's/^cmake_minimum_required(VERSION \([0-9.]*\).*/\1/p' "$dir/src/CMakeLists.txt" | head -1)"
cmake=cmake
have="$(cmake --version | sed -n 's/^cmake version //p')"
if [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1)" != "$need" ]; then
  if [ ! -x "$tools/bin/cmake" ] || [ "$("$tools/bin/cmake" --version | sed -n 's/^cmake version //p')" != "$cmake_pin" ]; then
    echo "build_onnx: CMake $have is older than the $need onnx needs; installing cmake==$cmake_pin from PyPI" >&2
    "$tools/bin/pip" install -q --disable-pip-version-check "cmake==$cmake_pin"
  fi
  cmake="$tools/bin/cmake"
fi

echo "build_onnx: building onnx $version (C++ only) into $prefix" >&2
generator=(); command -v ninja >/dev/null && generator=(-G Ninja)
"$cmake" -S "$dir/src" -B "$dir/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_POSITION_INDEPENDENT_CODE=ON "${options[@]}" \
  >"$dir/configure.log" 2>&1 || { tail -30 "$dir/configure.log" >&2; exit 1; }
"$cmake" --build "$dir/build" -j"$(nproc)" >"$dir/build.log" 2>&1 || { tail -40 "$dir/build.log" >&2; exit 1; }
"$cmake" --install "$dir/build" >/dev/null
rm -rf "$dir/build" "$dir/src"
built_as >"$stamp"
echo "build_onnx: onnx $version built in $(( $(date +%s) - start ))s" >&2
echo "$prefix"
