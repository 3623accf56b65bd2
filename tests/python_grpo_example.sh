#!/bin/sh
# examples/grpo_step.py against a real envserver + gpuexec (host backend): a group of 4
# rollouts of host/gelu sharing one seed, all in flight, rewards and group advantages.
# Usage: python_grpo_example.sh BIN_DIR SOURCE_DIR PYTHON
set -u
BIN=$1
SRC=$2
PY=$3
. "$SRC/tests/lib.sh" # check, cleanup on EXIT/INT/TERM, ka_task_copy, ka_stack
ka_init grpo
# the test profile: host/gelu with small cases (the example's flow is under test, not
# the kernel's speed)
ka_task_copy host/gelu "s/n: 1048576}/n: 65536}/; s/n: 2097152}/n: 131072}/; s/n: 1000003}/n: 65537}/"
ka_stack "$WORK/tasks"
ka_run "$PY" "$SRC/examples/grpo_step.py" --url "$URL" --task host/gelu -n 4 --seed 3 \
  --timeout 600 >"$WORK/out.txt" 2>&1
rc=$?
cat "$WORK/out.txt"
check "grpo_step.py exits 0" [ "$rc" -eq 0 ]
check "4 rollouts listed" [ "$(grep -cE '^ +[0-3] ep-' "$WORK/out.txt")" -eq 4 ]
check "baseline rollouts are OK" grep -qE '^ +0 ep-[0-9a-f]+ +OK ' "$WORK/out.txt"
check "broken rollouts are COMPILE_ERROR" grep -qE '^ +1 ep-[0-9a-f]+ +COMPILE_ERROR ' "$WORK/out.txt"
check "advantages of both signs" sh -c "grep -q ' +[0-9.]*$' '$WORK/out.txt' && grep -q ' -[0-9.]*$' '$WORK/out.txt'"
check "summary line, no errors" grep -qE '^mean reward .* errors 0$' "$WORK/out.txt"
[ $fail -eq 0 ] || { echo "--- server log"; tail -20 "$WORK/server.log"; echo "--- gpuexec log"; tail -20 "$WORK/gpuexec.log"; }
exit $fail
