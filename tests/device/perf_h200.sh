#!/bin/sh
# Evaluation speed on the H200 after device-resident staging (docs/integrity.md, 3):
# nvrtc_compile_test (with a GPU it also checks copy_device / compare_device on device
# memory), then one baseline step of a few GPU tasks, each timed with the host clock
# around the whole `envctl episode` (server start, compile, correctness trial, 3 warm-up
# and 20 timed calls of baseline and candidate per case). Before the change one
# evaluation of hip2hip/argmax took 26 s. Prebuilt binaries only (build/ carried).
#   device run: OUT=$OUT sh tests/device/perf_h200.sh   (carry: build)
# The runner's per-case phase times ("case X phases (device staging, ...)") are in each
# step's runtime_log (trace store, `envctl export`). Prints a table last.
set -u
OUT=${OUT:-/tmp/ka-out}
BIN=${BIN:-build/bin}
TASKS=${TASKS:-"hip2hip/argmax cuda2cuda/gelu hip2hip/softmax"}
mkdir -p "$OUT"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader 2>&1
} | tee "$OUT/perf.txt"
"$BIN/nvrtc_compile_test" tasks >"$OUT/perf_nvrtc.txt" 2>&1
nv_rc=$?
grep -E "device (rotate|compare|copy|staging)|trusted|passed" "$OUT/perf_nvrtc.txt" | tail -8
: >"$OUT/perf_rows"
for task in $TASKS; do
  f=$OUT/perf_$(echo "$task" | tr / _).txt
  t0=$(date +%s.%N)
  "$BIN/envctl" episode --task "$task" --seed 1 >"$f" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  st=$(grep -o 'status [A-Z_]*' "$f" | head -1 | cut -d' ' -f2)
  s=$(echo "$t0 $t1" | awk '{printf "%.1f", $2 - $1}')
  echo "$task $rc ${st:-?} $s" >>"$OUT/perf_rows"
  cat "$f"
done
echo
echo "nvrtc_compile_test exit $nv_rc (0: all checks passed)"
echo "task                 exit status        seconds"
while read -r task rc st s; do
  printf "%-20s %-4s %-13s %s\n" "$task" "$rc" "$st" "$s"
done <"$OUT/perf_rows"
