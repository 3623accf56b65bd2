#!/bin/sh
# Reward integrity on the GPU (docs/integrity.md): one episode of cuda2cuda/gelu whose
# steps submit the runs of tests/adversarial/manifest.yaml with harness integrity_h200,
# in file order (the honest baseline, the fast candidate, the adversarial CUDA
# candidates of tests/adversarial/cuda/, the fast candidate again); then one step of the
# baseline on a copy of the task whose `bytes` puts the physics floor far above any real
# time. Prebuilt binaries only (build/ carried; build/bin/adversarial_list reads the
# manifest). Prints a table last:
#   step, run, expected status, status, reward, geometric-mean speedup, ok
# and the fast candidate's speedup before and after the adversarial runs.
# Run on the H200 machine from the repository root:
#   device run: OUT=$OUT sh tests/device/integrity_h200.sh   (carry: build)
# HARNESS=triton_h200 runs that harness's runs instead (an episode of their first run's
# task, triton2triton/gelu; tests/device/triton_h200.sh does).
set -u
OUT=${OUT:-/tmp/ka-out}
HARNESS=${HARNESS:-integrity_h200}
mkdir -p "$OUT"
R=$(pwd)
W=$(mktemp -d)
TAB=$(printf '\t')
if ! build/bin/adversarial_list tests/adversarial/manifest.yaml "$HARNESS" >"$W/runs.tsv" ||
  [ ! -s "$W/runs.tsv" ]; then
  echo "cannot read the $HARNESS runs of tests/adversarial/manifest.yaml"
  exit 1
fi
TASK=$(head -1 "$W/runs.tsv" | cut -f4)
mkdir -p "$W/tasks/${TASK%%/*}" "$W/floor/${TASK%%/*}"
cp -r "tasks/$TASK" "$W/tasks/${TASK%%/*}/"
cp -r "tasks/$TASK" "$W/floor/${TASK%%/*}/"
# any task: its own bytes expression, a million times over
sed -i 's/^bytes: "\(.*\)"$/bytes: "(\1) * 1000000"/' "$W/floor/$TASK/task.yaml"
SOURCE=$(sed -n 's/^source: *//p' "tasks/$TASK/task.yaml")
PLAN=$(sed -n 's/^launch_plan: *//p' "tasks/$TASK/task.yaml")
# step k (KA_STEP) submits the k-th "file:plan" of LIST as the task's source and plan
LIST=""
n=0
while IFS="$TAB" read -r name file plan task backend imports timeout expect text; do
  [ "$plan" = "-" ] && plan=tasks/$TASK/baseline/$PLAN
  LIST="$LIST $file:$plan"
  n=$((n + 1))
done <"$W/runs.tsv"
AGENT="set -- $LIST; shift \$KA_STEP; cp $R/\${1%%:*} $SOURCE; cp $R/\${1#*:} $PLAN"
build/bin/envctl episode --task "$TASK" --tasks "$W/tasks" --seed 5 --max-steps "$n" \
  --workspace "$W/ws" --agent "command:$AGENT" >"$OUT/integrity.txt" 2>&1
build/bin/envctl episode --task "$TASK" --tasks "$W/floor" --seed 5 --max-steps 1 \
  >"$OUT/integrity_floor.txt" 2>&1
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
} | tee -a "$OUT/integrity.txt"
cat "$OUT/integrity.txt" "$OUT/integrity_floor.txt"
echo
printf '%-4s %-18s %-11s %-11s %-7s %-8s %s\n' step run expected status reward speedup ok
k=0
fails=0
first_sp=""
last_sp=""
{
  cat "$W/runs.tsv"
  printf 'floor_baseline\t-\t-\t%s\t-\t-\t0\tFLAGGED\t-\n' "$TASK"
} >"$W/rows.tsv"
while IFS="$TAB" read -r name file plan task backend imports timeout expect text; do
  k=$((k + 1))
  if [ "$name" = floor_baseline ]; then f=$OUT/integrity_floor.txt; s=1; else f=$OUT/integrity.txt; s=$k; fi
  line=$(grep "^step $s:" "$f" | head -1)
  st=$(echo "$line" | sed -n 's/.*status \([A-Z_]*\),.*/\1/p')
  rw=$(echo "$line" | sed -n 's/.*reward \([0-9.]*\).*/\1/p')
  sp=$(awk -v s="$s" '$0 ~ "^step "s":" {on=1; next} on && /^step / {on=0} on && /geometric-mean speedup/ {print $3; exit}' "$f")
  ok=MISMATCH
  for w in $(echo "$expect" | tr '|' ' '); do [ "$st" = "$w" ] && ok=ok; done
  [ $ok = ok ] || fails=$((fails + 1))
  case $name in
    fast_first) first_sp=$sp ;;
    fast_last) last_sp=$sp ;;
  esac
  printf '%-4s %-18s %-11s %-11s %-7s %-8s %s\n' "$k" "$name" "$expect" "${st:-?}" "${rw:-?}" "${sp:--}" "$ok"
done <"$W/rows.tsv"
echo "fast candidate speedup before / after the adversarial runs: ${first_sp:-?} / ${last_sp:-?}"
echo "mismatches: $fails"
