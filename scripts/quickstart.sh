#!/bin/sh
# Sets up kernelarena and runs one episode: hip2hip/gelu with its baseline and with a
# faster candidate where an NVIDIA GPU is present, host/gelu (on the CPU) otherwise.
# usage: scripts/quickstart.sh [extra envctl episode options]
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
if ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1 '; then
  TASK=hip2hip/gelu
  FAST=tests/candidates/hip_gelu
else
  echo "quickstart: no NVIDIA driver found; running the CPU task host/gelu instead"
  TASK=host/gelu
  FAST=tests/candidates/host_gelu_fast
fi
echo "== $TASK, baseline"
./build/bin/envctl episode --task "$TASK" --seed 1 "$@"
echo "== $TASK, a faster candidate ($FAST)"
./build/bin/envctl episode --task "$TASK" --seed 1 --agent "files:$FAST" "$@"
