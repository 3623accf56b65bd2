#!/bin/sh
# gpuexec worker heartbeats: a job that runs longer than the server's --heartbeat-timeout
# is not declared lost while its worker sends heartbeats (gpuexec --heartbeat-interval
# well below it), and the step is recorded once with status OK. Control: the same job
# with heartbeats further apart than the timeout is declared lost (so the first check
# can fail). Real envserver + gpuexec on the host backend, bench/tasks' bench/copy with
# a candidate whose first call spins for 6 s.
# usage: heartbeat_test.sh BIN_DIR SOURCE_DIR
set -u
BIN=$1
SRC=$2
. "$SRC/tests/lib.sh" # check, cleanup on EXIT/INT/TERM
ka_init hb

# run NAME INTERVAL: server (heartbeat timeout 3 s) + gpuexec sending heartbeats every
# INTERVAL s, one episode of one step with the slow candidate; leaves $WORK/NAME.*
run() {
  name=$1
  STATE=$WORK/$name-state
  "$BIN/envserver" --state "$STATE" --tasks "$SRC/bench/tasks" --heartbeat-timeout 3 \
    >"$WORK/$name.server.log" 2>&1 &
  SRV_PID=$!
  "$BIN/gpuexec" --server "ipc://$STATE/exec.ipc" --tasks "$SRC/bench/tasks" --backends host \
    --heartbeat-interval "$2" --verbose >"$WORK/$name.gpuexec.log" 2>&1 &
  GX_PID=$!
  URL="ipc://$STATE/env.ipc"
  i=0
  until "$BIN/envctl" health --server "$URL" --timeout 2 2>/dev/null | grep -q "executors=[1-9]"; do
    i=$((i + 1))
    if [ $i -gt 150 ]; then
      echo "FAIL - server/executor did not come up"; cat "$WORK/$name.server.log"; exit 1
    fi
    sleep 0.2
  done
  ka_run "$BIN/envctl" episode --server "$URL" --task bench/copy --seed 3 --max-steps 1 \
    --workspace "$WORK/$name-ws" \
    --agent "command:cp $SRC/tests/candidates/bench_copy_slow/copy.c copy.c" \
    >"$WORK/$name.out" 2>&1
  echo $? >"$WORK/$name.rc"
  kill "$GX_PID" "$SRV_PID" 2>/dev/null
  wait "$GX_PID" "$SRV_PID" 2>/dev/null
  GX_PID= SRV_PID=
  DB=$STATE/trace.db
}

run live 0.3
cat "$WORK/live.out"
check "heartbeats: episode exits 0" [ "$(cat "$WORK/live.rc")" -eq 0 ]
check "heartbeats: the long step is OK" sh -c "grep '^step 1:' '$WORK/live.out' | grep -q 'status OK'"
check "heartbeats: the worker was not declared lost" sh -c "! grep -q 'lost while holding' '$WORK/live.server.log'"
check "heartbeats: evaluated once" [ "$(grep -c '(bench/copy)$' "$WORK/live.gpuexec.log")" -eq 1 ]
n=$(sqlite3 "$DB" "SELECT count(*) || ',' || min(step) || ',' || min(status) FROM steps")
check "heartbeats: one step record, step 1, OK (got $n)" [ "$n" = "1,1,1" ]

run sparse 30
cat "$WORK/sparse.out"
check "control (heartbeats 30 s apart): worker declared lost" \
  grep -q "lost while holding" "$WORK/sparse.server.log"
check "control: the step is not OK" sh -c "! grep '^step 1:' '$WORK/sparse.out' | grep -q 'status OK'"
[ $fail -ne 0 ] && { echo "--- logs"; cat "$WORK"/*.log; }
exit $fail
