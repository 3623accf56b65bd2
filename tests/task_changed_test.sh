#!/bin/sh
# A task edited on disk while gpuexec runs (review 2026-12-03): the runner loads the task
# from its folder, the worker drew the reference's inputs from the copy it loaded at
# start, so a runner whose copy has another version refuses the job (INFRA_ERROR, naming
# both versions) instead of scoring honest outputs against a reference of other inputs.
# A step before the edit is OK; the step after it is INFRA_ERROR with that message.
# usage: task_changed_test.sh BIN_DIR SOURCE_DIR
set -u
BIN=$1
SRC=$2
. "$SRC/tests/lib.sh"
ka_init taskchanged
ka_task_copy host/gelu "s/^timeout_s: .*/timeout_s: 30/; s/n: 1048576/n: 65536/" \
  "s/n: 2097152/n: 131072/"
ka_stack "$WORK/tasks"
ka_run "$BIN/envctl" episode --server "$URL" --task host/gelu --seed 3 --max-steps 1 \
  >"$WORK/before.out" 2>&1
check "a step before the edit is OK" grep -q "step 1: status OK" "$WORK/before.out" ||
  cat "$WORK/before.out"
# the edit: a new description, so a new version of the task (its files' hash)
sed -i 's/^description: .*/description: "edited while gpuexec runs"/' "$WORK/tasks/host/gelu/task.yaml"
ka_run "$BIN/envctl" episode --server "$URL" --task host/gelu --seed 4 --max-steps 1 --verbose \
  >"$WORK/after.out" 2>&1
check "the step after the edit is INFRA_ERROR, not counted" \
  grep -q "could not evaluate step 1 (INFRA_ERROR).*the step was not counted" "$WORK/after.out" ||
  cat "$WORK/after.out"
check "its message names the change and both versions" \
  grep -q "task host/gelu changed on disk since the executor loaded it (version [0-9a-f]*, the executor's [0-9a-f]*)" \
  "$WORK/after.out"
exit $fail
