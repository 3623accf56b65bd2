#!/bin/sh
# Reward integrity on the GPU (docs/integrity.md): one episode of cuda2cuda/gelu whose
# steps submit the honest baseline, the fast candidate, the adversarial CUDA candidates
# of tests/candidates/integrity/cuda/ and the fast candidate again; then one step of the
# baseline on a copy of the task whose `bytes` puts the physics floor far above any real
# time. Prebuilt binaries only (build/ carried). Prints a table last:
#   step, candidate, expected status, status, reward, geometric-mean speedup.
# Run on the H200 machine from the repository root:
#   device run: OUT=$OUT sh tests/device/integrity_h200.sh   (carry: build)
set -u
OUT=${OUT:-/tmp/ka-out}
mkdir -p "$OUT"
W=$(mktemp -d)
mkdir -p "$W/tasks/cuda2cuda" "$W/floor/cuda2cuda"
cp -r tasks/cuda2cuda/gelu "$W/tasks/cuda2cuda/"
cp -r tasks/cuda2cuda/gelu "$W/floor/cuda2cuda/"
sed -i 's/^bytes: .*/bytes: "8 * n * 1000000"/' "$W/floor/cuda2cuda/gelu/task.yaml"
C=$(pwd)/tests/candidates/integrity/cuda
FAST=$(pwd)/tests/candidates/cuda_gelu
BASE=$(pwd)/tasks/cuda2cuda/gelu/baseline
# step k (KA_STEP) submits the k-th entry: name expected-status
LIST="baseline:OK fast:OK zero_inputs:INCORRECT lazy:INCORRECT nan_sentinel:OK nan_wild:INCORRECT scribble_later:INCORRECT persist_l2:OK fast:OK"
AGENT="set -- $LIST; shift \$KA_STEP; n=\${1%%:*}; case \$n in
baseline) cp $BASE/gelu.cu $BASE/launch.yaml . ;;
fast) cp $FAST/gelu.cu $FAST/launch.yaml . ;;
*) cp $C/\$n.cu gelu.cu; cp $BASE/launch.yaml . ;;
esac"
build/bin/envctl episode --task cuda2cuda/gelu --tasks "$W/tasks" --seed 5 --max-steps 9 \
  --workspace "$W/ws" --agent "command:$AGENT" >"$OUT/integrity.txt" 2>&1
build/bin/envctl episode --task cuda2cuda/gelu --tasks "$W/floor" --seed 5 --max-steps 1 \
  >"$OUT/integrity_floor.txt" 2>&1
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
} | tee -a "$OUT/integrity.txt"
cat "$OUT/integrity.txt" "$OUT/integrity_floor.txt"
echo
echo "step candidate        expected    status      reward  speedup"
k=0
for e in $LIST floor_baseline:FLAGGED; do
  k=$((k + 1))
  n=${e%%:*}
  x=${e#*:}
  if [ "$n" = floor_baseline ]; then f=$OUT/integrity_floor.txt; s=1; else f=$OUT/integrity.txt; s=$k; fi
  line=$(grep "^step $s:" "$f" | head -1)
  st=$(echo "$line" | sed -n 's/.*status \([A-Z_]*\),.*/\1/p')
  rw=$(echo "$line" | sed -n 's/.*reward \([0-9.]*\).*/\1/p')
  sp=$(awk -v s="$s" '$0 ~ "^step "s":" {on=1; next} on && /^step / {on=0} on && /geometric-mean speedup/ {print $3; exit}' "$f")
  ok=$([ "$st" = "$x" ] && echo ok || echo MISMATCH)
  printf "%-4s %-16s %-11s %-11s %-7s %-8s %s\n" "$k" "$n" "$x" "${st:-?}" "${rw:-?}" "${sp:--}" "$ok"
done
