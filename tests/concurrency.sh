#!/bin/sh
# Several evaluations in flight per device (issue 15 item 3; gpuexec --jobs-per-device,
# gpuexec/runner/devlock.h), on the host backend: episodes with honest, wrong, crashing,
# FLAGGED and endless candidates run at once against one executor with 3 evaluation slots
# on its one device. Checks: evaluations overlapped (the executor's own log), every
# verdict is what the candidate earns alone, the runners took the device lock (their
# phase logs), a verdict that a neighbour could have caused (the endless loop's TIMEOUT:
# a deadline counts the waits for a shared device) was evaluated again alone and kept,
# saying so, and one that no neighbour causes (CPU work outside the calls: FLAGGED) was
# not given a second try.
# usage: concurrency.sh BIN_DIR SOURCE_DIR
set -u
BIN=$1
SRC=$2
CAND=$SRC/tests/candidates/host_gelu
. "$SRC/tests/lib.sh"
ka_init concurrency

# small cases and a short deadline: the endless loop costs two deadlines (the second
# alone), and the honest evaluations finish far inside one even three at a time
ka_task_copy host/gelu "s/^timeout_s: .*/timeout_s: 8/; s/n: 1048576/n: 65536/" \
  "s/n: 2097152/n: 131072/"
ka_stack "$WORK/tasks" -- --jobs-per-device 3 --verbose
# Health counts the three slots and the one device they share (their workers all poll
# within a second of the start)
n=0
until "$BIN/envctl" health --server "$URL" --timeout 2 2>/dev/null | grep -q "executors=3"; do
  n=$((n + 1)); [ $n -ge 20 ] && break; sleep 0.25
done
check "health: executors=3 devices=1 (three slots of one device)" \
  sh -c "'$BIN/envctl' health --server '$URL' | grep -q 'executors=3 devices=1 '"

# name:file of each episode; the two honest ones take 3 steps, so that whichever episode
# waits for a slot still finds evaluations in flight when it runs
EPS="ok1:$SRC/tasks/host/gelu/baseline/gelu.c ok2:$CAND/../host_gelu_fast/gelu.c \
wrong:$CAND/wrong.c crash:$CAND/crash.c spin:$SRC/tests/adversarial/host/bg_spin.c \
hang:$CAND/hang.c"
pids=""
for e in $EPS; do
  name=${e%%:*}
  file=${e#*:}
  steps=1
  case $name in ok*) steps=3 ;; esac
  "$BIN/envctl" episode --server "$URL" --task host/gelu --seed 3 --max-steps $steps \
    --workspace "$WORK/ws-$name" --agent "command:cp $file gelu.c" >"$WORK/$name.out" 2>&1 &
  pids="$pids $!"
done
rc=0
for p in $pids; do wait "$p" || rc=1; done
for e in $EPS; do echo "== ${e%%:*}"; cat "$WORK/${e%%:*}.out"; done
check "every episode exits 0" [ "$rc" -eq 0 ]

st() { grep '^step 1:' "$WORK/$1.out" | sed 's/.*status \([A-Z_]*\).*/\1/'; }
nok() { grep -c '^step [0-9]*: status OK' "$WORK/$1.out"; }
check "baseline: 3 steps OK (got $(nok ok1))" [ "$(nok ok1)" -eq 3 ]
check "faster candidate: 3 steps OK (got $(nok ok2))" [ "$(nok ok2)" -eq 3 ]
check "wrong: INCORRECT (got $(st wrong))" [ "$(st wrong)" = INCORRECT ]
check "crash: RUNTIME_ERROR (got $(st crash))" [ "$(st crash)" = RUNTIME_ERROR ]
check "background spinner: FLAGGED (got $(st spin))" [ "$(st spin)" = FLAGGED ]
check "endless loop: TIMEOUT (got $(st hang))" [ "$(st hang)" = TIMEOUT ]

# evaluations overlapped: the executor's log has a job start while another is running
check "evaluations overlapped on the one device" awk '
  / job .* \(host\/gelu\)$/ {n++; if (n > max) max = n}
  / -> status / {n--}
  END {print "most in flight at once: " max; exit !(max >= 2)}' "$WORK/gpuexec.log"

DB=$STATE/trace.db
nlock=$(sqlite3 "$DB" "SELECT count(*) FROM steps WHERE runtime_log LIKE '%device lock: %exclusive holds%'")
check "runners took the device lock (steps whose log says so: $nlock)" [ "${nlock:-0}" -ge 2 ]
# a runner keeps its exclusive hold over consecutive calls for a slice (runner_case.c
# RN_SLICE_S) instead of handing it over after every call: a hold per call would make a
# case's exclusive holds its warm-up and timed calls (its calls less its verification
# runs, which are at most its reps); a slice over two calls or more makes them fewer
sqlite3 "$DB" "SELECT runtime_log FROM steps WHERE status = 1" >"$WORK/ok_logs.txt"
check "exclusive holds span several calls (runner_case.c RN_SLICE_S)" awk '
  / phases \(/ { s = $0; sub(/.*fresh inputs, /, "", s); split(s, a, " ")
    calls[$3] = a[1]; reps[$3] = a[3] }
  / device lock: [0-9]+ exclusive holds/ { n++; if ($6 < calls[$3] - reps[$3]) few++
    if (n <= 4) print "case " $3 ": " $6 " exclusive holds, " calls[$3] " calls, " reps[$3] " reps" }
  END { print few + 0 " of " n + 0 " cases with fewer holds than calls less reps"; exit !(few >= 1) }' \
  "$WORK/ok_logs.txt"
# the endless loop's TIMEOUT came while others were in flight: evaluated again alone, kept
nalone=$(sqlite3 "$DB" "SELECT count(*) FROM steps WHERE status = 5 AND runtime_log LIKE '%evaluated again alone on the device%ended TIMEOUT%'")
check "TIMEOUT with neighbours was evaluated again alone and kept ($nalone)" [ "${nalone:-0}" -ge 1 ]
# CPU work outside the calls is the candidate's own doing: no second try for that reason
# (a first evaluation that timed out under the load may still be run again)
nspin=$(sqlite3 "$DB" "SELECT count(*) FROM steps WHERE runtime_log LIKE '%evaluated again alone%ended FLAGGED (%work outside the timed calls%'")
check "FLAGGED for work outside the calls kept without a second try ($nspin)" [ "${nspin:-1}" -eq 0 ]
nsteps=$(sqlite3 "$DB" "SELECT count(*) FROM steps")
check "every step in the trace store once ($nsteps of 10)" [ "${nsteps:-0}" -eq 10 ]
check "gpuexec still running" kill -0 "$GX_PID"
[ $fail -eq 0 ] && echo "concurrency: all checks passed"
exit $fail
