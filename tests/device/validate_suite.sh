#!/bin/sh
# `envctl validate --backends cuda` over every GPU task (tasks/hip2hip/*, tasks/cuda2cuda/*)
# on the H200, one task per ka-validate run so that a run cut short still leaves the
# reports of the tasks done. Builds nothing (the build folder is carried).
#   device run: sh tests/device/validate_suite.sh            (carry: build)
#   a subset:   TASKS="hip2hip/gelu cuda2cuda/gelu" sh tests/device/validate_suite.sh
#   BUDGET_S (default 540): no new task starts after this many seconds; the skipped ones
#   are listed, so a second run with TASKS=... can finish them.
# Writes $OUT/validate-report.txt (every task's text report), $OUT/validate-report.json
# (a JSON array of the per-task reports), $OUT/validate/<family>_<name>.{txt,json,err},
# and prints a short table last: task, verdict, baseline time per case.
set -u
OUT=${OUT:-/tmp/ka-out}
BIN=${BIN:-build/bin}
BUDGET_S=${BUDGET_S:-540}
mkdir -p "$OUT/validate"
REPORT=$OUT/validate-report.txt
: >"$REPORT"
start=$(date +%s)
if [ -z "${TASKS:-}" ]; then
  TASKS=$(for y in tasks/hip2hip/*/task.yaml tasks/cuda2cuda/*/task.yaml; do
    [ -f "$y" ] || continue
    d=${y%/task.yaml}
    echo "${d#tasks/}"
  done)
fi
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem,temperature.gpu \
    --format=csv,noheader 2>&1
  echo "command, per task: $BIN/envctl validate --backends cuda --tasks tasks TASK \\"
  echo "  --report OUT/validate/TASK.txt --report OUT/validate/TASK.json"
} | tee "$OUT/validate-header.txt"
cat "$OUT/validate-header.txt" >>"$REPORT"
: >"$OUT/validate-rows.txt"
skipped=""
for t in $TASKS; do
  now=$(date +%s)
  if [ $((now - start)) -ge "$BUDGET_S" ]; then
    skipped="$skipped $t"
    continue
  fi
  f=$(echo "$t" | tr / _)
  "$BIN/envctl" validate --backends cuda --tasks tasks "$t" --report "$OUT/validate/$f.txt" \
    --report "$OUT/validate/$f.json" >/dev/null 2>"$OUT/validate/$f.err"
  rc=$?
  if [ -f "$OUT/validate/$f.txt" ]; then
    echo >>"$REPORT"
    sed -n '/^== /,/^== summary/p' "$OUT/validate/$f.txt" | sed '$d' >>"$REPORT"
    grep -E "^$t " "$OUT/validate/$f.txt" >>"$OUT/validate-rows.txt" ||
      echo "$t ? (no summary row, exit $rc)" >>"$OUT/validate-rows.txt"
  else
    echo "$t NO-REPORT (exit $rc; see validate/$f.err)" >>"$OUT/validate-rows.txt"
    tail -5 "$OUT/validate/$f.err" >>"$REPORT"
  fi
done
# one JSON array of the per-task reports
{
  echo "["
  first=1
  for j in "$OUT"/validate/*.json; do
    [ -f "$j" ] || continue
    [ $first -eq 1 ] || echo ","
    cat "$j"
    first=0
  done
  echo "]"
} >"$OUT/validate-report.json"
{
  echo
  echo "== summary (wall $(($(date +%s) - start)) s)"
  printf '%-28s %-7s %s\n' TASK VERDICT "BASELINE PER CASE (ms; * held-out)"
  cat "$OUT/validate-rows.txt"
  [ -n "$skipped" ] && echo "not started (time budget ${BUDGET_S} s):$skipped"
  echo "verdicts: $(awk '{print $2}' "$OUT/validate-rows.txt" | sort | uniq -c | tr '\n' ' ')"
} | tee -a "$REPORT"
