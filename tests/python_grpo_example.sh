#!/bin/sh
# examples/grpo_step.py against a real envserver + gpuexec (host backend): a group of 4
# rollouts of host/gelu sharing one seed, all in flight, rewards and group advantages.
# Usage: python_grpo_example.sh BIN_DIR SOURCE_DIR PYTHON
set -u
BIN=$1
SRC=$2
PY=$3
WORK=$(mktemp -d /tmp/ka-grpo-XXXXXX)
STATE=$WORK/state
mkdir -p "$STATE"
cleanup() {
  kill "$GX" "$SRV" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$WORK"
}
SRV=""
GX=""
trap cleanup EXIT
"$BIN/envserver" --state "$STATE" --tasks "$SRC/tasks" >"$WORK/server.log" 2>&1 &
SRV=$!
"$BIN/gpuexec" --server "ipc://$STATE/exec.ipc" --tasks "$SRC/tasks" --backends host \
  >"$WORK/gpuexec.log" 2>&1 &
GX=$!
fail=0
"$PY" "$SRC/examples/grpo_step.py" --url "ipc://$STATE/env.ipc" --task host/gelu -n 4 --seed 3 \
  --timeout 600 >"$WORK/out.txt" 2>&1
rc=$?
cat "$WORK/out.txt"
check() { # check NAME COMMAND...
  name=$1
  shift
  if "$@"; then echo "ok   - $name"; else echo "FAIL - $name"; fail=1; fi
}
check "grpo_step.py exits 0" [ "$rc" -eq 0 ]
check "4 rollouts listed" [ "$(grep -cE '^ +[0-3] ep-' "$WORK/out.txt")" -eq 4 ]
check "baseline rollouts are OK" grep -qE '^ +0 ep-[0-9a-f]+ +OK ' "$WORK/out.txt"
check "broken rollouts are COMPILE_ERROR" grep -qE '^ +1 ep-[0-9a-f]+ +COMPILE_ERROR ' "$WORK/out.txt"
check "advantages of both signs" sh -c "grep -q ' +[0-9.]*$' '$WORK/out.txt' && grep -q ' -[0-9.]*$' '$WORK/out.txt'"
check "summary line, no errors" grep -qE '^mean reward .* errors 0$' "$WORK/out.txt"
[ $fail -eq 0 ] || { echo "--- server log"; tail -20 "$WORK/server.log"; echo "--- gpuexec log"; tail -20 "$WORK/gpuexec.log"; }
exit $fail
