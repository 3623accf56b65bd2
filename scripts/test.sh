#!/bin/sh
# Installs what the tests need, builds with warnings as errors, and runs every test.
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
KA_BUILD_DIR=${KA_BUILD_DIR:-build} ./scripts/build.sh -DKA_WERROR=ON
cd "${KA_BUILD_DIR:-build}"
ctest --output-on-failure --timeout 900
