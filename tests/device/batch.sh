#!/bin/sh
# Runs several device scripts in one device call, each under its own time limit, so one
# session's GPU time is spent in few calls. Prebuilt binaries only (carry: build, and
# .whl for python_h200.sh).
#   device run: SCRIPTS="integrity_h200:150 sandbox_h200:120" OUT=$OUT sh tests/device/batch.sh
# SCRIPTS: space-separated NAME:SECONDS (NAME is tests/device/NAME.sh). Each script's
# output goes to $OUT/NAME.out (and its own files under $OUT/NAME/); the last 25 lines of
# each are printed at the end, followed by one line per script: exit status and wall time.
set -u
OUT=${OUT:-/tmp/ka-out}
mkdir -p "$OUT"
SUMMARY=$OUT/batch-summary.txt
: >"$SUMMARY"
for spec in ${SCRIPTS:-}; do
  name=${spec%%:*}
  limit=${spec#*:}
  [ "$limit" = "$spec" ] && limit=300
  mkdir -p "$OUT/$name"
  t0=$(date +%s)
  OUT=$OUT/$name timeout -k 5 "$limit" sh "tests/device/$name.sh" >"$OUT/$name.out" 2>&1
  rc=$?
  t1=$(date +%s)
  printf '%-20s exit %-3s %4d s (limit %s s)\n' "$name" "$rc" $((t1 - t0)) "$limit" >>"$SUMMARY"
done
for spec in ${SCRIPTS:-}; do
  name=${spec%%:*}
  echo "==== $name (last 25 lines; full output in $name.out)"
  tail -25 "$OUT/$name.out"
done
echo "==== batch summary"
cat "$SUMMARY"
