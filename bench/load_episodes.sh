#!/bin/sh
# Runs bench/load_episodes.py with the repository's Python environment (.venv, made by
# scripts/install-python-deps.sh) against the binaries in BIN_DIR (default build/bin).
# usage: bench/load_episodes.sh [BIN_DIR] [load_episodes.py options...]
set -eu
SRC=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$SRC/build/bin}
[ $# -gt 0 ] && shift
PY=$SRC/.venv/bin/python3
[ -x "$PY" ] || PY=python3
exec "$PY" "$SRC/bench/load_episodes.py" --bin "$BIN" "$@"
