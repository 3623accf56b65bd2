#!/bin/sh
# Several evaluations in flight per device (issue 15 item 3; gpuexec --jobs-per-device,
# gpuexec/devlock.h), on the host backend: episodes with honest, wrong, crashing and
# FLAGGED candidates run at once against one executor with 3 evaluation slots on its one
# device. Checks: evaluations overlapped (the executor's own log), every verdict is what
# the candidate earns alone, the runners took the device lock (their phase logs), and a
# verdict that a neighbour could have caused (here FLAGGED) was evaluated again alone and
# kept, saying so.
# usage: concurrency.sh BIN_DIR SOURCE_DIR
set -u
BIN=$1
SRC=$2
CAND=$SRC/tests/candidates/host_gelu
. "$SRC/tests/lib.sh"
ka_init concurrency

ka_task_copy host/gelu "s/^timeout_s: .*/timeout_s: 30/; s/n: 1048576/n: 262144/" \
  "s/n: 2097152/n: 524288/"
ka_stack "$WORK/tasks" -- --jobs-per-device 3 --verbose

# name:file of each episode's single step
EPS="ok1:$SRC/tasks/host/gelu/baseline/gelu.c ok2:$CAND/../host_gelu_fast/gelu.c \
wrong:$CAND/wrong.c crash:$CAND/crash.c spin:$SRC/tests/adversarial/host/bg_spin.c"
pids=""
for e in $EPS; do
  name=${e%%:*}
  file=${e#*:}
  "$BIN/envctl" episode --server "$URL" --task host/gelu --seed 3 --max-steps 1 \
    --workspace "$WORK/ws-$name" --agent "command:cp $file gelu.c" >"$WORK/$name.out" 2>&1 &
  pids="$pids $!"
done
rc=0
for p in $pids; do wait "$p" || rc=1; done
for e in $EPS; do echo "== ${e%%:*}"; cat "$WORK/${e%%:*}.out"; done
check "every episode exits 0" [ "$rc" -eq 0 ]

st() { grep '^step 1:' "$WORK/$1.out" | sed 's/.*status \([A-Z_]*\).*/\1/'; }
check "baseline: OK (got $(st ok1))" [ "$(st ok1)" = OK ]
check "faster candidate: OK (got $(st ok2))" [ "$(st ok2)" = OK ]
check "wrong: INCORRECT (got $(st wrong))" [ "$(st wrong)" = INCORRECT ]
check "crash: RUNTIME_ERROR (got $(st crash))" [ "$(st crash)" = RUNTIME_ERROR ]
check "background spinner: FLAGGED (got $(st spin))" [ "$(st spin)" = FLAGGED ]

# evaluations overlapped: the executor's log has a job start while another is running
check "evaluations overlapped on the one device" awk '
  / job .* \(host\/gelu\)$/ {n++; if (n > max) max = n}
  / -> status / {n--}
  END {print "most in flight at once: " max; exit !(max >= 2)}' "$WORK/gpuexec.log"

DB=$STATE/trace.db
nlock=$(sqlite3 "$DB" "SELECT count(*) FROM steps WHERE runtime_log LIKE '%device lock: %exclusive holds%'")
check "runners took the device lock (steps whose log says so: $nlock)" [ "${nlock:-0}" -ge 2 ]
# the spinner's FLAGGED came while others were in flight: evaluated again alone, kept
nalone=$(sqlite3 "$DB" "SELECT count(*) FROM steps WHERE status = 7 AND runtime_log LIKE '%evaluated again alone on the device%ended FLAGGED%'")
check "FLAGGED with neighbours was evaluated again alone and kept ($nalone)" [ "${nalone:-0}" -ge 1 ]
nsteps=$(sqlite3 "$DB" "SELECT count(*) FROM steps")
check "one step per episode in the trace store ($nsteps)" [ "${nsteps:-0}" -eq 5 ]
check "gpuexec still running" kill -0 "$GX_PID"
[ $fail -eq 0 ] && echo "concurrency: all checks passed"
exit $fail
