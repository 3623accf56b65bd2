#!/bin/sh
# Installs what the tests need, builds with warnings as errors, and runs every test.
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/install-python-deps.sh
KA_BUILD_DIR=${KA_BUILD_DIR:-build} ./scripts/build.sh -DKA_WERROR=ON
cd "${KA_BUILD_DIR:-build}"
ctest --output-on-failure --timeout 900
cd - >/dev/null
# A short run of the libFuzzer targets (fuzz/run.sh) in their own clang build folder.
CC=clang cmake -S . -B build-fuzz -DKA_FUZZ=ON -DKA_BUILD_CUDA=OFF >/dev/null
cmake --build build-fuzz -j2 --target fuzz_request fuzz_task_yaml fuzz_plan
(cd build-fuzz && ctest --output-on-failure -R fuzz_short)
