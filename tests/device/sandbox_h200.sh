#!/bin/sh
# The evaluation sandbox on the GPU machine (docs/sandbox.md), with the prebuilt binaries
# of build/ (nothing is built here):
#   1. build/bin/sandbox_test: the seccomp and Landlock layers on this machine's kernel.
#   2. One cuda2cuda/gelu episode whose steps submit the runs of
#      tests/adversarial/manifest.yaml with harness sandbox_h200 (read with
#      build/bin/adversarial_list), in file order: the baseline (the CUDA driver and
#      NVRTC must work under Landlock and both seccomp stages), an #include of
#      /etc/passwd, scratch buffers larger than the device (OOM), an illegal-address
#      kernel, an endless kernel, then the baseline again; the executor must survive
#      each, and device memory must be back where it was. Prints a table last (step,
#      run, expected, got, ok) and the baseline's speedup before and after the faults.
# Run from the repository root with the build carried:
#   device run: OUT=$OUT sh tests/device/sandbox_h200.sh   (carry: build)
set -u
OUT=${OUT:-/tmp/ka-out}
mkdir -p "$OUT"
R=$(pwd)
W=$(mktemp -d)
TAB=$(printf '\t')
if ! build/bin/adversarial_list tests/adversarial/manifest.yaml sandbox_h200 >"$W/runs.tsv" ||
  [ ! -s "$W/runs.tsv" ]; then
  echo "cannot read the sandbox_h200 runs of tests/adversarial/manifest.yaml"
  exit 1
fi
TASK=$(head -1 "$W/runs.tsv" | cut -f4)
DEADLINE=$(head -1 "$W/runs.tsv" | cut -f7)
[ "${DEADLINE:-0}" -gt 0 ] || DEADLINE=20
mkdir -p "$W/tasks/${TASK%%/*}"
cp -r "tasks/$TASK" "$W/tasks/${TASK%%/*}/"
sed -i "s/^timeout_s: .*/timeout_s: $DEADLINE/" "$W/tasks/$TASK/task.yaml"
SOURCE=$(sed -n 's/^source: *//p' "tasks/$TASK/task.yaml")
PLAN=$(sed -n 's/^launch_plan: *//p' "tasks/$TASK/task.yaml")
# step k (KA_STEP) submits the k-th "file:plan" of LIST as the task's source and plan
LIST=""
NSTEPS=0
while IFS="$TAB" read -r name file plan task backend imports timeout expect text; do
  [ "$plan" = "-" ] && plan=tasks/$TASK/baseline/$PLAN
  LIST="$LIST $file:$plan"
  NSTEPS=$((NSTEPS + 1))
done <"$W/runs.tsv"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "kernel: $(uname -r)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
} | tee "$OUT/sandbox_h200.txt"

echo "== 1. sandbox_test (layers on this kernel)" | tee -a "$OUT/sandbox_h200.txt"
build/bin/sandbox_test >"$OUT/sandbox_test.txt" 2>&1
unit=$?
grep -v '^ok   - include check\|^ok   - log shows\|^ *->\|^#\|^lude' "$OUT/sandbox_test.txt" |
  tee -a "$OUT/sandbox_h200.txt"

mem() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1; }
MEM0=$(mem)
echo "== 2. faults through the loop (device memory used before: ${MEM0:-?} MiB)" |
  tee -a "$OUT/sandbox_h200.txt"
AGENT="set -- $LIST; shift \$KA_STEP; cp $R/\${1%%:*} $SOURCE; cp $R/\${1#*:} $PLAN"
build/bin/envctl episode --task "$TASK" --tasks "$W/tasks" --seed 5 --max-steps "$NSTEPS" \
  --workspace "$W/ws" --agent "command:$AGENT" >"$OUT/sandbox_episode.txt" 2>&1
echo "episode exit code: $?" | tee -a "$OUT/sandbox_h200.txt"
# the embedded server's executor ends its warm runners as it stops; their contexts go
# with their processes, which the driver reaps a moment later: wait up to 15 s
i=0
MEM1=$(mem)
while [ "${MEM1:-0}" != "${MEM0:-0}" ] && [ $i -lt 30 ]; do
  sleep 0.5
  i=$((i + 1))
  MEM1=$(mem)
done
grep -c 'root:' "$OUT/sandbox_episode.txt" | sed 's/^/lines of \/etc\/passwd in the output (want 0): /' |
  tee -a "$OUT/sandbox_h200.txt"
grep -i 'forbidden system call\|sandbox:' "$OUT/sandbox_episode.txt" | head -5 |
  sed 's/^/sandbox message (want none): /' | tee -a "$OUT/sandbox_h200.txt"

echo
{
  printf '%-5s %-19s %-15s %-15s %-8s %s\n' step run expected got speedup ok
  i=1
  while IFS="$TAB" read -r name file plan task backend imports timeout want text; do
    got=$(sed -n "s/^step $i: status \([A-Z_]*\).*/\1/p" "$OUT/sandbox_episode.txt" | head -1)
    sp=$(awk -v s="$i" '$0 ~ "^step "s":" {on=1; next} on && /^step / {on=0} on && /geometric-mean speedup/ {print $3; exit}' "$OUT/sandbox_episode.txt")
    mark=MISMATCH
    for w in $(echo "$want" | tr '|' ' '); do [ "$got" = "$w" ] && mark=ok; done
    printf '%-5s %-19s %-15s %-15s %-8s %s\n' "$i" "$name" "$want" "${got:-none}" "${sp:--}" "$mark"
    i=$((i + 1))
  done <"$W/runs.tsv"
} | tee -a "$OUT/sandbox_h200.txt"
first_sp=$(awk '/^step 1:/ {on=1; next} on && /^step / {exit} on && /geometric-mean speedup/ {print $3; exit}' "$OUT/sandbox_episode.txt")
last_sp=$(awk -v s="$NSTEPS" '$0 ~ "^step "s":" {on=1; next} on && /^step / {on=0} on && /geometric-mean speedup/ {print $3; exit}' "$OUT/sandbox_episode.txt")
echo "baseline speedup before / after the faults: ${first_sp:-?} / ${last_sp:-?}" |
  tee -a "$OUT/sandbox_h200.txt"
echo "sandbox_test exit: $unit; device memory used before/after: ${MEM0:-?} / ${MEM1:-?} MiB" |
  tee -a "$OUT/sandbox_h200.txt"
