#!/bin/sh
# Configures and builds kernelarena into ./build (or $KA_BUILD_DIR).
# Extra arguments go to cmake's configure step (e.g. -DKA_SANITIZER=address).
set -eu
cd "$(dirname "$0")/.."
BUILD=${KA_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
