#!/bin/sh
# The instruction2triton tasks (docs/tasks.md, "Starter files"): the agent gets the
# specification, never the hidden baseline that times it.
#   1. `envctl tasks` lists at least 8, each language triton on cuda;
#   2. what a server gives the agent (`envctl tasks --prompts --all-tasks`: ListTasks'
#      prompt and starting files, the same files a workspace and a step's left-out files
#      come from, ka_task_baseline_path) is each task's starter/, byte for byte, and
#      neither the prompt nor those files hold any line of the hidden baseline's kernels
#      (its lines that call tl.*) or its launch plan (its grid and constexpr lines);
#   3. the same check finds the baseline in a triton2triton task's files (the check can
#      fail: those tasks show their baseline);
#   4. a copy of a task whose starter/ lacks an editable file is skipped at load (not
#      listed), the message naming the file; a changed starter file changes the task's version.
# usage: instruction_tasks.sh BIN_DIR SOURCE_DIR
set -u
BIN=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
WORK=$(mktemp -d /tmp/ka-instr-tasks-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
fail=0
check() { # check DESCRIPTION COMMAND...
  desc=$1
  shift
  if "$@"; then echo "ok   - $desc"; else echo "FAIL - $desc"; fail=1; fi
}
n=$(find "$SRC/tasks/instruction2triton" -name task.yaml | wc -l)
"$BIN/envctl" tasks --tasks "$SRC/tasks" >"$WORK/tasks" 2>&1
check "envctl tasks: exit 0" [ $? -eq 0 ]
check "envctl tasks: the $n instruction2triton tasks (at least 8), each language triton on cuda" \
  sh -c "[ $n -ge 8 ] && [ \$(grep -cE '^instruction2triton/[a-z0-9_]+ +instruction2triton +triton +rtc +cuda ' \
'$WORK/tasks') -eq $n ]"

cd "$WORK" || exit 1
TMPDIR="$WORK" "$BIN/envctl" tasks --prompts --all-tasks --tasks "$SRC/tasks" >"$WORK/prompts.jsonl" \
  2>"$WORK/prompts.err"
rc=$?
check "envctl tasks --prompts --all-tasks: exit 0" [ $rc -eq 0 ]
[ $rc -eq 0 ] || cat "$WORK/prompts.err"
python3 - "$SRC/tasks" "$WORK/prompts.jsonl" <<'PY'
import json, os, re, sys
root, rows = sys.argv[1], [json.loads(l) for l in open(sys.argv[2])]
fail = 0
def check(ok, what):
    global fail
    print(("ok   - " if ok else "FAIL - ") + what)
    fail |= not ok
def baseline_lines(task):
    """The hidden baseline's telling lines: kernel lines that call tl.*, plan lines with
    a grid or constexprs."""
    d = os.path.join(root, task, "baseline")
    out = set()
    for line in open(os.path.join(d, "kernels.py")):
        s = line.strip()
        if "tl." in s and not s.startswith("#") and len(s) > 12:
            out.add(s)
    for line in open(os.path.join(d, "launch.yaml")):
        s = line.strip()
        if s.startswith(("grid:", "constexprs:")) and s != "grid: [1]":
            out.add(s)
    return out
def leaks(row):
    text = row["prompt"] + "\n" + "\n".join(row["files"].values())
    lines = {l.strip() for l in text.splitlines()}
    return sorted(baseline_lines(row["task_id"]) & lines)
instr = [r for r in rows if r["task_id"].startswith("instruction2triton/")]
check(len(instr) >= 8, f"ListTasks gives prompts and files of {len(instr)} instruction2triton tasks")
for r in instr:
    t = r["task_id"]
    st = os.path.join(root, t, "starter")
    same = sorted(r["files"]) == sorted(os.listdir(st)) and all(
        r["files"][f] == open(os.path.join(st, f)).read() for f in r["files"])
    check(same, f"{t}: the agent's files are starter/'s")
    lk = leaks(r)
    check(not lk and len(baseline_lines(t)) >= 3,
          f"{t}: no line of the hidden baseline in the prompt or files "
          f"({len(baseline_lines(t))} lines checked){': ' + lk[0] if lk else ''}")
shown = [r for r in rows if r["task_id"].startswith("triton2triton/")]
check(bool(shown) and all(leaks(r) for r in shown),
      f"the check finds the baseline in every triton2triton task's files ({len(shown)} tasks)")
sys.exit(fail)
PY
[ $? -eq 0 ] || fail=1

mkdir -p "$WORK/t/instruction2triton"
cp -r "$SRC/tasks/instruction2triton/knn" "$WORK/t/instruction2triton/"
version() { # the task's version from ListTasks
  "$BIN/envctl" tasks --prompts --all-tasks --tasks "$WORK/t" 2>/dev/null |
    python3 -c "import json, sys; print(json.loads(sys.stdin.readline())['version'])"
}
v1=$(version)
echo "# a comment" >>"$WORK/t/instruction2triton/knn/starter/kernels.py"
v2=$(version)
check "a changed starter file changes the version ($v1 -> $v2)" \
  sh -c "[ -n '$v1' ] && [ -n '$v2' ] && [ '$v1' != '$v2' ]"
rm "$WORK/t/instruction2triton/knn/starter/launch.yaml"
"$BIN/envctl" tasks --tasks "$WORK/t" >"$WORK/bad" 2>&1
rc=$?
cat "$WORK/bad"
check "a starter/ without launch.yaml: the task is skipped at load, naming the file" \
  sh -c "grep -q 'knn/task.yaml:[0-9]*: starter/launch.yaml is missing' '$WORK/bad' &&
         ! grep -q '^instruction2triton/knn ' '$WORK/bad'"
exit $fail
