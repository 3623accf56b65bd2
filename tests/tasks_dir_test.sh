#!/bin/sh
# The default task folder (ka_tasks_dir, common/ka_opt.h): ./tasks when there is one,
# else the source tree's, whose path is compiled in, wherever the binary and the working
# folder are. Reproduces `cmake -B ../kb && ../kb/bin/envctl tasks` run from another
# folder: envctl is copied into a build folder outside the source tree and run from a
# folder without tasks/. Also: a folder of no task that loads (empty, or all broken) is
# an error of `envctl tasks`, not an empty table.
# usage: tasks_dir_test.sh BIN_DIR SOURCE_DIR
set -u
BIN=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
WORK=$(mktemp -d /tmp/ka-tasksdir-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
fail=0
check() { # check DESCRIPTION COMMAND...
  desc=$1
  shift
  if "$@"; then echo "ok   - $desc"; else echo "FAIL - $desc"; fail=1; fi
}
mkdir -p "$WORK/kb/bin" "$WORK/elsewhere" "$WORK/here/tasks/host"
cp "$BIN/envctl" "$WORK/kb/bin/envctl"
n_src=$(find "$SRC/tasks" -name task.yaml | wc -l)

(cd "$WORK/elsewhere" && "$WORK/kb/bin/envctl" tasks) >"$WORK/out" 2>&1
rc=$?
cat "$WORK/out"
check "out-of-tree envctl, no ./tasks: exit 0" [ $rc -eq 0 ]
check "out-of-tree envctl, no ./tasks: the source tree's $n_src tasks are listed" \
  sh -c "[ \$(grep -c '^[a-z0-9_]*/' '$WORK/out') -eq $n_src ] && grep -q '^host/gelu ' '$WORK/out'"

# ./tasks comes first: a folder holding one task lists that one only
cp -r "$SRC/tasks/host/gelu" "$WORK/here/tasks/host/"
(cd "$WORK/here" && "$WORK/kb/bin/envctl" tasks) >"$WORK/out2" 2>&1
rc=$?
check "./tasks first: exit 0 and only host/gelu listed" \
  sh -c "[ $rc -eq 0 ] && [ \$(grep -c '^[a-z0-9_]*/' '$WORK/out2') -eq 1 ] && grep -q '^host/gelu ' '$WORK/out2'" ||
  cat "$WORK/out2"

# --tasks wins over both, and a missing one is an error naming it
(cd "$WORK/here" && "$WORK/kb/bin/envctl" tasks --tasks "$WORK/nope") >"$WORK/out3" 2>&1
rc=$?
check "--tasks of a missing folder: exit 1, names the folder and why" \
  sh -c "[ $rc -eq 1 ] && grep -q '$WORK/nope: cannot open: No such file or directory' '$WORK/out3'" ||
  cat "$WORK/out3"

# a folder without a task that loads is an error, not an empty table: exit 1, the
# folder named with the count of folders skipped
mkdir -p "$WORK/empty" "$WORK/broken/suite/bad"
printf 'source_file_path: k.py\nperformance_command: ["true"]\ncorrectness_timeout: abc\n' \
  >"$WORK/broken/suite/bad/config.yaml"
echo 'x = 1' >"$WORK/broken/suite/bad/k.py"
"$WORK/kb/bin/envctl" tasks --tasks "$WORK/empty" >"$WORK/out4" 2>&1
rc=$?
check "--tasks of an empty folder: exit 1, 'no tasks loaded from DIR (0 skipped'" \
  sh -c "[ $rc -eq 1 ] && grep -q 'no tasks loaded from $WORK/empty (0 skipped' '$WORK/out4' && ! grep -q '^TASK ' '$WORK/out4'" ||
  cat "$WORK/out4"
"$WORK/kb/bin/envctl" tasks --tasks "$WORK/broken" >"$WORK/out5" 2>&1
rc=$?
check "--tasks of an all-broken folder: exit 1, the skip named and counted" \
  sh -c "[ $rc -eq 1 ] && grep -q 'skipping task $WORK/broken/suite/bad' '$WORK/out5' && grep -q 'no tasks loaded from $WORK/broken (1 skipped' '$WORK/out5'" ||
  cat "$WORK/out5"
# envserver on such a folder serves nothing: it says so at start (and keeps running)
timeout 3 "$BIN/envserver" --state "$WORK/st" --tasks "$WORK/broken" >"$WORK/out6" 2>&1
check "envserver on an all-broken folder warns: no task loaded, 1 skipped" \
  grep -q "envserver: warning: no task loaded from --tasks $WORK/broken (1 skipped" "$WORK/out6" ||
  cat "$WORK/out6"
exit $fail
