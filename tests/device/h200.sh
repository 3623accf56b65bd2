#!/bin/sh
# GPU checks of issue 2, run on the H200 machine from the repository root with the
# build folder carried (built on the CPU machine: scripts/build.sh).
#   device run: sh tests/device/h200.sh   (carry: build)
# Writes the full log to $OUT/h200.log and prints a short table last.
set -u
OUT=${OUT:-/tmp/ka-out}
mkdir -p "$OUT"
LOG=$OUT/h200.log
BIN=build/bin
: >"$LOG"
say() { echo "$@" | tee -a "$LOG"; }
run() { # run NAME COMMAND...: logs the output, records the exit code
  name=$1
  shift
  say "=== $name: $*"
  "$@" >"$OUT/$name.txt" 2>&1
  rc=$?
  cat "$OUT/$name.txt" >>"$LOG"
  echo "$name $rc" >>"$OUT/rcs"
}
: >"$OUT/rcs"
say "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,temperature.gpu \
  --format=csv,noheader 2>&1 | tee -a "$LOG"
run nvrtc "$BIN/nvrtc_compile_test" tasks
run hip_baseline "$BIN/envctl" episode --task hip2hip/gelu --seed 1
run hip_fast "$BIN/envctl" episode --task hip2hip/gelu --seed 1 --agent files:tests/candidates/hip_gelu
run cuda_baseline "$BIN/envctl" episode --task cuda2cuda/gelu --seed 1
run cuda_fast "$BIN/envctl" episode --task cuda2cuda/gelu --seed 1 --agent files:tests/candidates/cuda_gelu
run host_baseline "$BIN/envctl" episode --task host/gelu --seed 1
say ""
say "run            exit  status  reward   geomean"
while read -r name rc; do
  st=$(grep -o 'status [A-Z_]*' "$OUT/$name.txt" | head -1 | cut -d' ' -f2)
  rw=$(grep -o 'reward [0-9.]*' "$OUT/$name.txt" | head -1 | cut -d' ' -f2)
  gm=$(grep -o 'speedup [0-9.]*x' "$OUT/$name.txt" | head -1 | cut -d' ' -f2)
  printf '%-14s %-5s %-7s %-8s %s\n' "$name" "$rc" "${st:--}" "${rw:--}" "${gm:--}" | tee -a "$LOG"
done <"$OUT/rcs"
