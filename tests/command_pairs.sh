#!/bin/sh
# Paired repeats of command tasks (gpuexec --command-pairs N; docs/tasks.md "Paired
# repeats") on the host backend, with the fixture task of tests/command_tasks.sh: the
# step is scored by each case's median over N performance runs of the baseline and N of
# the candidate, alternated; a candidate run that fails or changes its report's cases is
# the candidate's verdict; a baseline run that fails falls back to the kept baseline
# times (neither the candidate's verdict nor an unscored step).
# usage: command_pairs.sh BIN_DIR SOURCE_DIR
set -u
BIN=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
FIX=$SRC/tests/fixtures/command
CAND=$FIX/candidates
. "$SRC/tests/lib.sh" # check, cleanup on EXIT/INT/TERM, ka_stack
ka_init command_pairs

cp -r "$FIX/tasks" "$WORK/tasks"
rm -rf "$WORK/tasks/suite/demo/gpu_only"
# bench_copy NAME: a copy of sum_py as suite/demo/sum_py_NAME whose performance command
# is scripts/bench_NAME.py: the Python on stdin (os, sys, common and .bench_runs's count
# of earlier runs in this folder, n, at hand), then the harness's own bench.py
bench_copy() {
  d=$WORK/tasks/suite/demo/sum_py_$1
  cp -r "$WORK/tasks/suite/demo/sum_py" "$d"
  {
    cat <<'EOP'
import os
import runpy
import sys

import common

n = int(open(".bench_runs").read()) if os.path.exists(".bench_runs") else 0
with open(".bench_runs", "w") as f:
    f.write(str(n + 1))
EOP
    cat
    cat <<'EOP'
sys.argv[0] = "bench.py"
runpy.run_path(os.path.join(os.path.dirname(__file__), "bench.py"), run_name="__main__")
EOP
  } >"$d/scripts/bench_$1.py"
  sed -i "s|^  - python3 scripts/bench.py|  - python3 scripts/bench_$1.py|" "$d/config.yaml"
}
# fails from its second run in one folder on: its baseline pass (one run) passes, its
# second baseline run of the pairs fails
bench_copy once <<'EOP'
if n >= 1:
    sys.exit("bench_once: only one run per folder")
EOP
# fails the third run of a folder whose kernel.py is not marked CANDIDATE (the
# baseline's): the fallback after the candidate's third run
bench_copy third <<'EOP'
if n >= 2 and not getattr(common.load_kernel(), "CANDIDATE", False):
    sys.exit("bench_third: the baseline's third run fails")
EOP
# sleeps 2 s / SPEED, with timeouts such that the pairs together (3 x 2 s + 2 x 1 s for
# a 2x candidate) take longer than the task's timeout_s (1.5 + 1.5 + 4 s) and each run
# far less than its 4 s: each baseline run has its own deadline
bench_copy slow <<'EOP'
import time

time.sleep(2.0 / float(getattr(common.load_kernel(), "SPEED", 1.0)))
EOP
S=$WORK/tasks/suite/demo/sum_py_slow
sed -i 's|^compile_timeout: .*|compile_timeout: 1.5|; s|^correctness_timeout: .*|correctness_timeout: 1.5|; s|^performance_timeout: .*|performance_timeout: 4|' \
  "$S/config.yaml"

# a bad count is refused at start, naming the flag
"$BIN/gpuexec" --command-pairs 0 --tasks "$WORK/tasks" >"$WORK/bad.out" 2>&1
rc=$?
check "gpuexec --command-pairs 0: exit 2, naming the flag (got $rc)" sh -c \
  "[ $rc -eq 2 ] && grep -q 'command-pairs' '$WORK/bad.out'"

ka_stack "$WORK/tasks" -- --command-pairs 3
LIST="baseline drift flaky_perf rename_perf fast"
AGENT="set -- $LIST; shift \$KA_STEP; f=\$1; case \$f in baseline) ;; *) cp $CAND/\$f.py kernel.py ;; esac"
ka_run "$BIN/envctl" episode --server "$URL" --task suite/demo/sum_py --seed 3 --max-steps 5 \
  --verbose --workspace "$WORK/ws" --agent "command:$AGENT" >"$WORK/episode.out" 2>&1
rc=$?
cat "$WORK/episode.out"
check "the episode exits 0" [ "$rc" -eq 0 ]
expect() { # expect FILE STEP WHAT STATUS REWARD
  check "step $2 ($3): $4, reward $5" sh -c \
    "grep '^step $2:' '$1' | grep 'status $4,' | grep -q 'reward $5'"
}
expect "$WORK/episode.out" 1 "the baseline against itself" OK 220.00
expect "$WORK/episode.out" 2 "drift: 4x, 2x, 1x; the median 2x" OK 320.00
expect "$WORK/episode.out" 3 "flaky_perf: fails in its second run" RUNTIME_ERROR 20.00
expect "$WORK/episode.out" 4 "rename_perf: its second report has other cases" RUNTIME_ERROR 20.00
expect "$WORK/episode.out" 5 "fast: 2x in every run" OK 320.00
check "the pairs are announced on every scored step" \
  awk '/pairs: 3 pairs of performance runs/ {n++} END {exit !(n == 5)}' "$WORK/episode.out"
check "drift's case lines: its three times and their median" \
  grep -q "case rows8_cols16: candidate ms 0.5 1 2 (median 1), baseline ms 2 2 2 (median 2)" "$WORK/episode.out"
check "flaky_perf's verdict names the pair" grep -q "pair 2 of 3: the performance command" \
  "$WORK/episode.out"
check "rename_perf's verdict names the case its report lost" grep -q \
  "pair 2 of 3: its report does not have the first run's case 'rows32_cols64' once" \
  "$WORK/episode.out"
# ABBA: pair 1 C B (C the pass's own run), pair 2 B C, pair 3 C B: for a step that
# completes, 3 baseline runs and 2 more of the candidate, in that order (step 1's log
# follows its "step 1:" line)
order=$(awk '/^step 2:/ {exit} /pair [0-9] of 3, / {sub(":", "", $NF); printf "%s%s", s, $NF; s=" "}' \
  "$WORK/episode.out")
check "step 1's runs in ABBA order (got: $order)" \
  [ "$order" = "baseline baseline candidate candidate baseline" ]

# A baseline run of the pairs that fails: scored against the kept baseline times.
ka_run "$BIN/envctl" episode --server "$URL" --task suite/demo/sum_py_once --seed 3 \
  --max-steps 1 --verbose --workspace "$WORK/ws-once" --agent "command:cp $CAND/fast.py kernel.py" \
  >"$WORK/once.out" 2>&1
cat "$WORK/once.out"
expect "$WORK/once.out" 1 "a baseline run of the pairs fails: the kept baseline" OK 320.00
check "... saying so" grep -q "the baseline's run 2 failed (the performance command .* exited with code 1); scored against the cached baseline" \
  "$WORK/once.out"
check "... the baseline's folder ran its compile and correctness commands, as the candidate's" \
  sh -c "sed -n '/the baseline.s folder, compiled and checked/,/pair 1 of 3/p' '$WORK/once.out' | grep -q 'correctness: \\$ python3 scripts/check.py'"

# The baseline's third run fails, after the candidate's third (drift: 4x, 2x, 1x): the
# fallback scores the median of the candidate's runs so far (2x), not its first (4x).
ka_run "$BIN/envctl" episode --server "$URL" --task suite/demo/sum_py_third --seed 3 \
  --max-steps 1 --verbose --workspace "$WORK/ws-third" --agent "command:cp $CAND/drift.py kernel.py" \
  >"$WORK/third.out" 2>&1
cat "$WORK/third.out"
expect "$WORK/third.out" 1 "the baseline's third run fails: the candidate's median so far, 2x" OK 320.00
check "... saying so" grep -q "the baseline's run 3 failed (.*); scored against the cached baseline, with the median of the candidate's 3 runs so far" \
  "$WORK/third.out"

# Each run of the pairs has its own deadline: the pairs take longer than the task's
# timeout_s in all, each run well within its performance_timeout.
ka_run "$BIN/envctl" episode --server "$URL" --task suite/demo/sum_py_slow --seed 3 \
  --max-steps 1 --verbose --workspace "$WORK/ws-slow" --agent "command:cp $CAND/fast.py kernel.py" \
  --timeout 120 >"$WORK/slow.out" 2>&1
cat "$WORK/slow.out"
expect "$WORK/slow.out" 1 "pairs longer than timeout_s, each run within its own 4 s" OK 320.00
check "... every pair ran (no fallback)" sh -c \
  "grep -q 'case rows8_cols16: candidate ms 1 1 1 (median 1), baseline ms 2 2 2 (median 2)' '$WORK/slow.out' && ! grep -q 'scored against the cached baseline' '$WORK/slow.out'"

# ... but the candidate's own runs share one budget, its pass's (the task's timeout_s):
# one that stalls in its later runs is cut where that budget ends (TIMEOUT, its verdict),
# so a step of a stalling candidate takes no longer than without pairs.
ka_run "$BIN/envctl" episode --server "$URL" --task suite/demo/sum_py_slow --seed 3 \
  --max-steps 1 --verbose --workspace "$WORK/ws-stall" --agent "command:cp $CAND/stall_perf.py kernel.py" \
  --timeout 120 >"$WORK/stall.out" 2>&1
cat "$WORK/stall.out"
expect "$WORK/stall.out" 1 "stall_perf: its third run past its own budget" TIMEOUT 20.00
check "... cut at what was left of its budget, in pair 3" grep -q \
  "pair 3 of 3: the performance command .* within its deadline (.* s: what was left of the evaluation's time)" \
  "$WORK/stall.out"

# System V IPC made by a command ends with it (its own IPC namespace, or the calls
# refused): nothing of it reaches the baseline's runs or a later step.
KEY=$((20000 + $$ % 10000))
ka_run "$BIN/envctl" episode --server "$URL" --task suite/demo/sum_py --seed 3 --max-steps 1 \
  --verbose --workspace "$WORK/ws-sysv" \
  --agent "command:sed 's/^KEY = 19265/KEY = $KEY/' $CAND/sysv_keep.py >kernel.py" \
  >"$WORK/sysv.out" 2>&1
cat "$WORK/sysv.out"
expect "$WORK/sysv.out" 1 "sysv_keep: System V objects in every command" OK 220.00
check "... its commands ran its code" grep -q "sysv_keep: shmget" "$WORK/sysv.out"
check "... and no segment or semaphore set of its key outlived them" sh -c \
  "! awk -v k=$KEY '\$1 == k' /proc/sysvipc/shm /proc/sysvipc/sem | grep -q ."

check "no evaluation folder is left behind" sh -c "[ -z \"\$(find '$WORK/tmp' -name 'ka-cmd-*')\" ]"
left=$(ka_procs_in "$WORK/tmp")
check "no process of a command is left behind" [ -z "$left" ]
[ $fail -eq 0 ] && echo "command_pairs: all checks passed"
exit $fail
