#!/bin/sh
# Runs every libFuzzer target for SECONDS each from its seeded corpus (fuzz/corpus/T,
# read-only: new inputs go to a temporary folder, as do the targets' own files) and fails if any target finds a crash,
# a leak or a sanitizer report. Crash inputs are left in $KA_FUZZ_ARTIFACTS (default a
# temporary folder, printed).
# usage: fuzz/run.sh BIN_DIR [SECONDS]
set -u
BIN=$1
SECS=${2:-20}
HERE=$(cd "$(dirname "$0")" && pwd)
ART=${KA_FUZZ_ARTIFACTS:-}
own_art=0
[ -z "$ART" ] && ART=$(mktemp -d /tmp/ka-fuzz-art-XXXXXX) && own_art=1
mkdir -p "$ART"
fail=0
for t in request task_yaml plan; do
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
    fail=1
  fi
  rm -rf "$work"
done
[ $fail -eq 0 ] && [ $own_art -eq 1 ] && rm -rf "$ART"
exit $fail
