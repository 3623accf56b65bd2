#!/bin/sh
# Builds a wheel of the Python package with the server programs inside it
# (docs/install.md, "A wheel with the server"): the `cmake --install` tree of BUILD_DIR
# (bin/, libexec/kernelarena/, share/kernelarena/tasks/) is copied into the package
# kernelarena_server of a staged copy of clients/python, and pip builds the wheel from
# that copy (no build isolation: nothing is downloaded; setuptools and wheel come from
# the venv of scripts/install-python-deps.sh). The wheel is tagged for this platform
# (linux_<arch>): the programs link nng, mbedtls, protobuf-c, libyaml and sqlite
# statically and need glibc and libgomp there.
#   scripts/build-wheel.sh [BUILD_DIR [OUT_DIR]]     (defaults: build, dist)
# Environment: KA_PYTHON (default .venv/bin/python3). Prints the wheel's path.
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=${2:-dist}
PY=${KA_PYTHON:-.venv/bin/python3}
[ -x "$BUILD/bin/envctl" ] || { echo "build-wheel: no $BUILD/bin/envctl (build first)" >&2; exit 2; }
STAGE=$(mktemp -d "${TMPDIR:-/tmp}/ka-wheel.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT INT TERM
mkdir -p "$STAGE/pkg"
(cd clients/python && tar cf - --exclude=__pycache__ --exclude='*.egg-info' --exclude=build \
  pyproject.toml README.md kernelarena kernelarena_server kernelarena_verifiers.py) | (cd "$STAGE/pkg" && tar xf -)
cmake --install "$BUILD" --prefix "$STAGE/prefix" >"$STAGE/install.log" 2>&1 ||
  { cat "$STAGE/install.log" >&2; exit 1; }
S=$STAGE/pkg/kernelarena_server
cp -R "$STAGE/prefix/bin" "$STAGE/prefix/libexec" "$S/"
mkdir -p "$S/share"
cp -R "$STAGE/prefix/share/kernelarena" "$S/share/"
printf '[bdist_wheel]\nplat_name = linux_%s\n' "$(uname -m)" >"$STAGE/pkg/setup.cfg"
mkdir -p "$OUT"
"$PY" -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir "$STAGE/dist" "$STAGE/pkg" \
  >"$STAGE/wheel.log" 2>&1 || { cat "$STAGE/wheel.log" >&2; exit 1; }
whl=$(ls "$STAGE/dist"/*.whl)
cp "$whl" "$OUT/"
echo "$OUT/$(basename "$whl")"
