#!/bin/sh
# Downloads the wheels the Python client needs on the GPU machine (CPython 3.12,
# manylinux x86_64, no package registry there) into .whl/ (git-ignored), so that they
# travel with the working tree. tests/device/python_h200.sh installs them from there.
#   scripts/fetch-wheels.sh [PYTHON_VERSION]   (default 3.12)
set -eu
cd "$(dirname "$0")/.."
PYV=${1:-3.12}
ABI=cp$(echo "$PYV" | tr -d .)
PIP="python3 -m pip"
mkdir -p .whl
# pynng (+ cffi, sniffio), gymnasium (+ numpy, cloudpickle, typing_extensions,
# farama-notifications) and protobuf (the GPU machine has 7.36 already; a wheel here
# makes the venv independent of it).
$PIP download --quiet --dest .whl --only-binary=:all: --implementation cp \
  --python-version "$PYV" --abi "$ABI" --abi abi3 --abi none \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux_2_28_x86_64 --platform any \
  'pynng>=0.8' 'gymnasium>=1.0' 'numpy>=1.26' 'protobuf>=5.29'
echo "fetch-wheels: $(ls .whl | wc -l) wheels in .whl/ for CPython $PYV:"
ls .whl
