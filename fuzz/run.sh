#!/bin/sh
# Runs every libFuzzer target for SECONDS each from its seeded corpus (fuzz/corpus/T,
# read-only: new inputs go to a temporary folder, as do the targets' own files) and fails if any target finds a crash,
# a leak or a sanitizer report. Crash inputs are left in $KA_FUZZ_ARTIFACTS (default a
# temporary folder, printed).
# usage: fuzz/run.sh BIN_DIR [SECONDS]   (KA_FUZZ_JOBS: targets at a time, default nproc)
set -u
BIN=$1
SECS=${2:-15}
HERE=$(cd "$(dirname "$0")" && pwd)
ART=${KA_FUZZ_ARTIFACTS:-}
own_art=0
[ -z "$ART" ] && ART=$(mktemp -d /tmp/ka-fuzz-art-XXXXXX) && own_art=1
mkdir -p "$ART"
# The targets run KA_FUZZ_JOBS at a time (default: the number of cores), each on its own
# core, so that a target gets the same executions as when run alone.
JOBS=${KA_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
run_one() { # run_one TARGET: its lines of output in $ART/TARGET.out, status in .rc
  t=$1
  work=$(mktemp -d /tmp/ka-fuzz-corpus-XXXXXX)
  mkdir "$work/tmp" "$work/new"
  dict=
  [ -f "$HERE/$t.dict" ] && dict=-dict=$HERE/$t.dict
  TMPDIR=$work/tmp "$BIN/fuzz_$t" -max_total_time="$SECS" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 $dict -artifact_prefix="$ART/$t-" "$work/new" "$HERE/corpus/$t" \
    >"$ART/$t.log" 2>&1
  rc=$?
  stats=$(grep -E "^stat::(number_of_executed_units|peak_rss_mb)|cov: " "$ART/$t.log" | tail -3 |
    tr '\n' ' ')
  if [ $rc -eq 0 ]; then
    echo "ok   - fuzz_$t ${SECS}s: $stats"
  else
    echo "FAIL - fuzz_$t (exit $rc); log and crash input in $ART"
    tail -40 "$ART/$t.log"
  fi >"$ART/$t.out"
  echo $rc >"$ART/$t.rc"
  rm -rf "$work"
}
TARGETS="request task_yaml plan"
n=0
pids=""
for t in $TARGETS; do
  run_one "$t" &
  pids="$pids $!"
  n=$((n + 1))
  if [ $n -ge "$JOBS" ]; then
    for p in $pids; do wait "$p"; done
    n=0
    pids=""
  fi
done
for p in $pids; do wait "$p"; done
fail=0
for t in $TARGETS; do
  cat "$ART/$t.out"
  [ "$(cat "$ART/$t.rc" 2>/dev/null)" = 0 ] || fail=1
  rm -f "$ART/$t.out" "$ART/$t.rc"
done
[ $fail -eq 0 ] && [ $own_art -eq 1 ] && rm -rf "$ART"
exit $fail
