#!/bin/sh
# Context churn beside timed calls (issue 15): the baseline timed against itself
# (bench/step_latency.sh's fidelity table, STEPS steps per task of TASKS) once on a quiet
# device and once with build/bin/context_churn beside it (CUDA contexts made and destroyed
# in other processes, outside the device lock, one after another), side by side. If the
# churn leaves the self-speedup's spread where it is, a runner's context open and teardown
# need not hold the device lock (each costs a step ~100 ms of device time now);
# if it widens it, the lock stays. Prebuilt binaries only.
#   device run: OUT=$OUT sh tests/device/churn_h200.sh      (carry: build/bin)
#   env: TASKS (default hip2hip/gelu hip2hip/argmax hip2hip/softmax), STEPS (default 10),
#        MIB (each churned context's allocation, default 1024)
set -u
OUT=${OUT:-/tmp/ka-out}
TASKS=${TASKS:-"hip2hip/gelu hip2hip/argmax hip2hip/softmax"}
STEPS=${STEPS:-10}
mkdir -p "$OUT/quiet" "$OUT/churn"
[ -x build/bin/context_churn ] || { echo "churn_h200: no build/bin/context_churn (carry build/bin)"; exit 2; }
OUT=$OUT/quiet BUILDS="quiet=build/bin" INFLIGHT=" " TASKS=$TASKS STEPS=$STEPS \
  sh bench/step_latency.sh >"$OUT/quiet.txt" 2>&1
build/bin/context_churn 100000 "${MIB:-1024}" >"$OUT/churn_prog.txt" 2>&1 &
CH=$!
sleep 1
OUT=$OUT/churn BUILDS="churn=build/bin" INFLIGHT=" " TASKS=$TASKS STEPS=$STEPS \
  sh bench/step_latency.sh >"$OUT/churn.txt" 2>&1
kill -TERM "$CH" 2>/dev/null
wait "$CH" 2>/dev/null
echo "== timing fidelity, quiet against churn (the baseline against itself)"
sed -n '/^== timing fidelity/,/^== phase lines/p' "$OUT/quiet.txt" | grep -v "^== "
sed -n '/^== timing fidelity/,/^== phase lines/p' "$OUT/churn.txt" | grep -v "^== \|^build"
echo "== step latency"
sed -n '/^== step latency/,/^$/p' "$OUT/quiet.txt" | grep -v "^== "
sed -n '/^== step latency/,/^$/p' "$OUT/churn.txt" | grep -v "^== \|^build"
echo "churn program: $(cat "$OUT/churn_prog.txt")"
