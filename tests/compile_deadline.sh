#!/bin/sh
# A compile that never finishes is the candidate's COMPILE_ERROR, not a TIMEOUT (issue 16,
# class 9): the runner gives the candidate's compile its own deadline (half the task's
# timeout, at most 60 s; RunnerJob.compile_timeout_s) and reports COMPILE_ERROR when it
# runs out. The host backend's C compiler is replaced (KA_HOST_CC) by one that never
# finishes on a source marked KA_SLOW_COMPILE and compiles everything else, so the
# baseline still builds. Then an honest step still passes: nothing was left behind.
# usage: compile_deadline.sh BIN_DIR SOURCE_DIR
set -u
BIN=$1
SRC=$2
WORK=$(mktemp -d /tmp/ka-cdl-XXXXXX)
fail=0
cleanup() {
  [ -n "${GX_PID:-}" ] && kill "$GX_PID" 2>/dev/null
  [ -n "${SRV_PID:-}" ] && kill "$SRV_PID" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
check() { # check DESCRIPTION COMMAND...
  desc=$1
  shift
  if "$@"; then echo "ok   - $desc"; else echo "FAIL - $desc"; fail=1; fi
}
mkdir -p "$WORK/tasks/host"
cp -r "$SRC/tasks/host/gelu" "$WORK/tasks/host/"
sed -i -e "s/^timeout_s: .*/timeout_s: 30/" -e "s/n: 1048576/n: 65536/" \
  -e "s/n: 2097152/n: 131072/" -e "s/n: 1000003/n: 1003/" "$WORK/tasks/host/gelu/task.yaml"
# the compiler must be in a folder the sandbox lets the candidate's compile execute from
# (docs/sandbox.md: system folders and those of KA_BACKEND_PATH; the host backend loads no
# module from there)
mkdir -p "$WORK/cc"
cat >"$WORK/cc/slowcc" <<'CC'
#!/bin/sh
for a in "$@"; do
  case $a in *.c) if grep -q KA_SLOW_COMPILE "$a" 2>/dev/null; then while :; do sleep 1; done; fi ;; esac
done
exec cc "$@"
CC
chmod +x "$WORK/cc/slowcc"
"$BIN/envserver" --state "$WORK/state" --tasks "$WORK/tasks" --quiet >"$WORK/server.log" 2>&1 &
SRV_PID=$!
KA_HOST_CC=$WORK/cc/slowcc KA_BACKEND_PATH=$WORK/cc KA_ADAPTIVE_REPS=1 "$BIN/gpuexec" --server "ipc://$WORK/state/exec.ipc" \
  --tasks "$WORK/tasks" --backends host >"$WORK/gpuexec.log" 2>&1 &
GX_PID=$!
URL="ipc://$WORK/state/env.ipc"
i=0
until "$BIN/envctl" health --server "$URL" --timeout 2 2>/dev/null | grep -q "executors=[1-9]"; do
  i=$((i + 1))
  [ $i -gt 150 ] && { echo "FAIL - server/executor did not come up"; cat "$WORK"/*.log; exit 1; }
  sleep 0.2
done
AGENT="cp $SRC/tasks/host/gelu/baseline/gelu.c gelu.c; [ \$KA_STEP = 0 ] && echo '/* KA_SLOW_COMPILE */' >> gelu.c; true"
t0=$(date +%s)
"$BIN/envctl" episode --server "$URL" --task host/gelu --max-steps 2 --workspace "$WORK/ws" \
  --agent "command:$AGENT" >"$WORK/out" 2>&1
rc=$?
t1=$(date +%s)
cat "$WORK/out"
check "episode exits 0" [ "$rc" -eq 0 ]
check "step 1 (a compile that never ends): COMPILE_ERROR, reward 0" \
  sh -c "grep '^step 1:' '$WORK/out' | grep -q 'status COMPILE_ERROR, compiled no, reward 0.00'"
check "step 1 names the compile deadline" grep -q "did not finish within its 15 s limit" "$WORK/out"
check "step 2 (the baseline) after it: OK" sh -c "grep '^step 2:' '$WORK/out' | grep -q 'status OK'"
check "no compiler left running" sh -c "! pgrep -f '[s]lowcc -std=gnu11' >/dev/null"
echo "($((t1 - t0)) s)"
exit $fail
