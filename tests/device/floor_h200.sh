#!/bin/sh
# The flops bound of the physics floor and the verification of timed calls drawn after the
# calls (docs/integrity.md, properties 5 and 7), on the H200. Three one-step episodes of
# the baseline (prebuilt binaries only; build/ carried):
#   1. cuda2cuda/matmul_bf16 as it is: OK, every case with verified calls drawn after the
#      calls and a floor below its time;
#   2. a copy of it whose `flops` is 1e4 times too large (and `bytes` left as it is): the
#      flops bound puts the floor above any real time, so FLAGGED, naming "task flops";
#   3. hip2hip/quant_int8 (int8 output: 1 element in 256 equals its random poison), which
#      failed its timed-call verification before that was fixed: OK.
# Prints a table last: episode, expected, status, flag or note.
#   device run: OUT=$OUT sh tests/device/floor_h200.sh   (carry: build)
set -u
OUT=${OUT:-/tmp/ka-out}
mkdir -p "$OUT"
W=$(mktemp -d)
mkdir -p "$W/tasks/cuda2cuda" "$W/flops/cuda2cuda" "$W/tasks/hip2hip"
cp -r tasks/cuda2cuda/matmul_bf16 "$W/tasks/cuda2cuda/"
cp -r tasks/cuda2cuda/matmul_bf16 "$W/flops/cuda2cuda/"
cp -r tasks/hip2hip/quant_int8 "$W/tasks/hip2hip/"
sed -i 's/^flops: .*/flops: "2 * m * n * k * 10000"/' "$W/flops/cuda2cuda/matmul_bf16/task.yaml"
build/bin/envctl episode --task cuda2cuda/matmul_bf16 --tasks "$W/tasks" --seed 3 \
  --max-steps 1 >"$OUT/floor_plain.txt" 2>&1
build/bin/envctl episode --task cuda2cuda/matmul_bf16 --tasks "$W/flops" --seed 3 \
  --max-steps 1 >"$OUT/floor_flops.txt" 2>&1
build/bin/envctl episode --task hip2hip/quant_int8 --tasks "$W/tasks" --seed 3 \
  --max-steps 1 >"$OUT/floor_quant.txt" 2>&1
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
} >"$OUT/floor_header.txt"
cat "$OUT/floor_header.txt" "$OUT/floor_plain.txt" "$OUT/floor_flops.txt" "$OUT/floor_quant.txt"
echo
echo "episode            expected status    note"
row() { # name expected file
  st=$(sed -n 's/^step 1: status \([A-Z_]*\),.*/\1/p' "$3" | head -1)
  after=$(grep -c "drawn after the calls" "$3")
  note="$after cases verified after the calls"
  if grep -q "task flops" "$3"; then note="flagged by the flops bound"; fi
  ok=$([ "$st" = "$2" ] && echo ok || echo MISMATCH)
  printf "%-18s %-8s %-9s %s  %s\n" "$1" "$2" "${st:-?}" "$note" "$ok"
}
row matmul_bf16 OK "$OUT/floor_plain.txt"
row matmul_bf16_flops FLAGGED "$OUT/floor_flops.txt"
row quant_int8 OK "$OUT/floor_quant.txt"
