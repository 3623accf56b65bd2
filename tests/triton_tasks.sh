#!/bin/sh
# The triton2triton tasks on a machine without a GPU: `envctl tasks` lists each with
# language triton, and an episode of one is refused at reset with an answer that names the
# cuda device it needs (never a crash, never an INFRA_ERROR of a step).
# usage: triton_tasks.sh BIN_DIR SOURCE_DIR
set -u
BIN=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
WORK=$(mktemp -d /tmp/ka-triton-tasks-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
fail=0
check() { # check DESCRIPTION COMMAND...
  desc=$1
  shift
  if "$@"; then echo "ok   - $desc"; else echo "FAIL - $desc"; fail=1; fi
}
n=$(find "$SRC/tasks/triton2triton" -name task.yaml | wc -l)
"$BIN/envctl" tasks --tasks "$SRC/tasks" >"$WORK/tasks" 2>&1
rc=$?
grep triton "$WORK/tasks"
check "envctl tasks: exit 0" [ $rc -eq 0 ]
check "envctl tasks: the $n triton2triton tasks (at least 4), each language triton on cuda" \
  sh -c "[ $n -ge 4 ] && [ \$(grep -cE '^triton2triton/[a-z0-9_]+ +triton2triton +triton +rtc +cuda ' \
'$WORK/tasks') -eq $n ]"

cd "$WORK" || exit 1
TMPDIR="$WORK" "$BIN/envctl" episode --tasks "$SRC/tasks" --task triton2triton/gelu \
  >"$WORK/ep" 2>&1
rc=$?
cat "$WORK/ep"
check "episode of triton2triton/gelu without a GPU: refused (exit != 0)" [ $rc -ne 0 ]
check "the refusal comes at reset and names the cuda device the task needs" \
  grep -q "reset: UNAVAILABLE: task triton2triton/gelu needs a cuda device" "$WORK/ep"
check "no crash, no infrastructure error" sh -c "! grep -qiE 'INFRA_ERROR|segmentation|abort' '$WORK/ep'"
exit $fail
