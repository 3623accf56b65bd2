#!/bin/sh
# A runner killed from outside (kill -9 by an operator or the OOM killer) before its
# deadline is the infrastructure's fault, never a score against the agent (issue 14,
# item 6): the step comes back INFRA_ERROR (not counted, retryable), the executor lives
# on, and the next step is evaluated normally. The candidate spins for seconds in its
# first call so that its runner is alive when the test kills it.
# usage: outside_kill.sh BIN_DIR SOURCE_DIR
set -u
BIN=$1
SRC=$2
. "$SRC/tests/lib.sh"
ka_init outside-kill
ka_task_copy host/gelu "s/^timeout_s: .*/timeout_s: 120/" "s/n: 1048576/n: 65536/" \
  "s/n: 2097152/n: 131072/" "s/n: 1000003/n: 1003/"
ka_stack "$WORK/tasks"
mkdir -p "$WORK/slow"
cat >"$WORK/slow/gelu.c" <<'C'
#include <math.h>
static volatile long spin;
void gelu_forward(const float *x, float *y, long long n) {
  for (long k = 0; k < 4000000000L; k++) spin = k; /* seconds of work: the runner is alive */
  for (long long i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
}
C
"$BIN/envctl" episode --server "$URL" --task host/gelu --agent "files:$WORK/slow" \
  >"$WORK/killed.out" 2>&1 &
EP=$!
KA_PIDS="$EP"
# the runner: a ka-runner without arguments (the supervisor has --supervise, module
# processes --host-module) working in this test's evaluation folders
runner=""
i=0
while [ -z "$runner" ] && [ $i -lt 300 ]; do
  for p in $(ka_procs_in "$WORK/tmp"); do
    args=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)
    case $args in *ka-runner\ ) runner=$p ;; esac
  done
  [ -z "$runner" ] && sleep 0.1
  i=$((i + 1))
done
check "the evaluation's runner is found" [ -n "$runner" ]
sleep 0.5
[ -n "$runner" ] && kill -9 "$runner"
wait "$EP"
cat "$WORK/killed.out"
check "the step is INFRA_ERROR, not counted" grep -q "INFRA_ERROR" "$WORK/killed.out"
check "it says the runner was killed from outside" grep -q "killed from outside" "$WORK/killed.out"
check "no reward was given" sh -c "! grep -q '^step 1: status' '$WORK/killed.out'"
check "gpuexec still running" kill -0 "$GX_PID"
# the operator sees the cause on gpuexec's stderr (the client sees only the message)
check "gpuexec's log names the INFRA_ERROR and its cause" \
  grep -q "INFRA_ERROR: .*killed from outside" "$WORK/gpuexec.log"
ka_run "$BIN/envctl" episode --server "$URL" --task host/gelu >"$WORK/next.out" 2>&1
check "the next step is evaluated: OK" grep -q "^step 1: status OK" "$WORK/next.out"
exit $fail
