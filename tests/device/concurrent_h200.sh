#!/bin/sh
# Faults beside honest evaluations on one shared GPU (issue 15 item 3: gpuexec
# --jobs-per-device, gpuexec/runner/devlock.h), prebuilt binaries only:
# one envserver + gpuexec (cuda, JOBS evaluation slots, --call-limit LIMIT) and, all at
# once, HONEST episodes of the baseline (STEPS steps each) and one single-step episode per
# fault run of tests/adversarial/manifest.yaml with harness sandbox_h200 (the include of
# /etc/passwd, scratch larger than the device, an illegal address, an endless kernel).
# Then one more honest episode alone. Checks: every fault gets its verdict, every honest
# step is OK with the baseline's speedup near 1, the executor survives, and device memory
# is back where it was. Prints a table last.
#   device run: OUT=$OUT sh tests/device/concurrent_h200.sh   (carry: build/bin)
set -u
OUT=${OUT:-/tmp/ka-out}
JOBS=${JOBS:-4}
LIMIT=${LIMIT:-5}
HONEST=${HONEST:-4}
STEPS=${STEPS:-3}
mkdir -p "$OUT"
R=$(pwd)
B=$R/build/bin
W=$(mktemp -d)
TAB=$(printf '\t')
"$B/adversarial_list" tests/adversarial/manifest.yaml sandbox_h200 >"$W/runs.tsv" || exit 1
TASK=cuda2cuda/gelu
mkdir -p "$W/tasks/cuda2cuda"
cp -r "tasks/$TASK" "$W/tasks/cuda2cuda/"
sed -i "s/^timeout_s: .*/timeout_s: 30/" "$W/tasks/$TASK/task.yaml"
SOURCE=$(sed -n 's/^source: *//p' "tasks/$TASK/task.yaml")
PLAN=$(sed -n 's/^launch_plan: *//p' "tasks/$TASK/task.yaml")
mem() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1; }
MEM0=$(mem)
ST=$W/state
mkdir -p "$ST"
"$B/envserver" --state "$ST" --tasks "$W/tasks" --quiet >"$OUT/conc_server.log" 2>&1 &
SV=$!
"$B/gpuexec" --server "ipc://$ST/exec.ipc" --tasks "$W/tasks" --backends cuda \
  --jobs-per-device "$JOBS" --call-limit "$LIMIT" --verbose >"$OUT/conc_gpuexec.log" 2>&1 &
GX=$!
URL=ipc://$ST/env.ipc
i=0
until "$B/envctl" health --server "$URL" --timeout 2 2>/dev/null | grep -q "executors=[1-9]"; do
  i=$((i + 1))
  [ $i -gt 150 ] && { echo "server did not come up"; cat "$OUT"/conc_*.log; exit 1; }
  sleep 0.2
done
t0=$(date +%s.%N)
pids=""
k=0
while IFS="$TAB" read -r name file plan task backend imports timeout want text; do
  case $name in baseline*) continue ;; esac
  [ "$plan" = "-" ] && plan=tasks/$TASK/baseline/$PLAN
  "$B/envctl" episode --server "$URL" --task "$TASK" --seed $((50 + k)) --max-steps 1 \
    --workspace "$W/ws-$name" --agent "command:cp $R/$file $SOURCE; cp $R/$plan $PLAN" \
    >"$OUT/conc_fault_$name.txt" 2>&1 &
  pids="$pids $!"
  echo "$name$TAB$want" >>"$W/faults.tsv"
  k=$((k + 1))
done <"$W/runs.tsv"
i=0
while [ $i -lt "$HONEST" ]; do
  "$B/envctl" episode --server "$URL" --task "$TASK" --seed $((10 + i)) --max-steps "$STEPS" \
    >"$OUT/conc_honest_$i.txt" 2>&1 &
  pids="$pids $!"
  i=$((i + 1))
done
for p in $pids; do wait "$p"; done
t1=$(date +%s.%N)
"$B/envctl" episode --server "$URL" --task "$TASK" --seed 99 --max-steps 1 \
  >"$OUT/conc_after.txt" 2>&1
alive=no
kill -0 "$GX" 2>/dev/null && alive=yes
kill "$GX" "$SV" 2>/dev/null
wait "$GX" "$SV" 2>/dev/null
sleep 2
MEM1=$(mem)

echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  jobs per device: $JOBS  call limit: $LIMIT s"
echo "all at once: $k fault episodes and $HONEST honest episodes x $STEPS steps in" \
  "$(echo "$t0 $t1" | awk '{printf "%.1f", $2 - $1}') s"
printf '%-20s %-16s %-16s %s\n' run expected got ok
bad=0
while IFS="$TAB" read -r name want; do
  got=$(sed -n 's/^step 1: status \([A-Z_]*\).*/\1/p' "$OUT/conc_fault_$name.txt" | head -1)
  mark=MISMATCH
  for w in $(echo "$want" | tr '|' ' '); do [ "$got" = "$w" ] && mark=ok; done
  [ $mark = ok ] || bad=$((bad + 1))
  printf '%-20s %-16s %-16s %s\n' "$name" "$want" "${got:-none}" "$mark"
done <"$W/faults.tsv"
hs=$(cat "$OUT"/conc_honest_*.txt | grep -c '^step [0-9]*: status OK')
sp=$(cat "$OUT"/conc_honest_*.txt | awk '/geometric-mean speedup/ {sub("x", "", $3); printf "%s ", $3}')
[ "$hs" -eq $((HONEST * STEPS)) ] || bad=$((bad + 1))
printf '%-20s %-16s %-16s %s\n' honest_steps "$((HONEST * STEPS)) OK" "$hs OK" \
  "$([ "$hs" -eq $((HONEST * STEPS)) ] && echo ok || echo MISMATCH)"
echo "honest speedups (baseline against itself): $sp"
after=$(sed -n 's/^step 1: status \([A-Z_]*\).*/\1/p' "$OUT/conc_after.txt" | head -1)
[ "$after" = OK ] || bad=$((bad + 1))
echo "honest episode alone afterwards: ${after:-none}; gpuexec alive: $alive"
grep -h "evaluated again alone" "$OUT"/conc_*.txt | head -3
echo "device memory used before/after: ${MEM0:-?} / ${MEM1:-?} MiB"
[ "$alive" = yes ] || bad=$((bad + 1))
echo "concurrent_h200: $bad problem(s)"
exit $((bad > 0))
