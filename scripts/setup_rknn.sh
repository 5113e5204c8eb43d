#!/usr/bin/env bash
# The RKNN toolkit's own venv (tests/rknn-requirements.txt), for the --target rknn tests.
# It is large (5.6 GB) and the same for every checkout, so it is kept outside the tree, in the
# user's cache ($XDG_CACHE_HOME/qconv, ~/.cache/qconv), under the hash of the requirements file:
# made once per machine (about 90 s), found by every later run. Prints the venv's python.
# A machine where it cannot be made (no python3.11, no network) prints nothing and exits 0: the
# rknn tests then skip, saying why (tests/integration/runtimes.py).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
req=tests/rknn-requirements.txt
hash=$(sha256sum "$req" | cut -c1-12)
venv="${XDG_CACHE_HOME:-$HOME/.cache}/qconv/rknn-venv-$hash"
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
  py=$(command -v python3.11 || true)
  if [ -z "$py" ]; then
    echo "setup_rknn: no python3.11 on PATH: the rknn tests will skip" >&2
    exit 0
  fi
  echo "setup_rknn: creating the RKNN toolkit's venv in $venv (once per machine)" >&2
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  if ! { "$py" -m venv "$venv" && "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"; } >&2; then
    echo "setup_rknn: could not install $req: the rknn tests will skip" >&2
    rm -rf "$venv"
    exit 0
  fi
  touch "$venv/.complete"
fi
echo "$venv/bin/python"
