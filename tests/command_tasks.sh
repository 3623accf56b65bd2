#!/bin/sh
# End to end test of command tasks (issue 19; docs/tasks.md "Command tasks") on the host
# backend: envserver + gpuexec + envctl with tests/fixtures/command/tasks, a Python task in
# the seed system's config.yaml format whose fake commands write every report shape.
# Each candidate of tests/fixtures/command/candidates gets its verdict (their README);
# the baseline is measured once per executor; a harness file changed while the commands
# run is FLAGGED; a step naming a harness file is refused; a GPU-only task is refused at
# reset on this host-only executor with the reason.
# usage: command_tasks.sh BIN_DIR SOURCE_DIR
set -u
BIN=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
FIX=$SRC/tests/fixtures/command
CAND=$FIX/candidates
. "$SRC/tests/lib.sh" # check, cleanup on EXIT/INT/TERM, ka_stack
ka_init command_tasks

# The task folder is copied, so that a run can never change the fixture in the source tree.
cp -r "$FIX/tasks" "$WORK/tasks"
# the same task with its correctness command exec'd by the shell (quiet_sleep below)
cp -r "$WORK/tasks/suite/demo/sum_py" "$WORK/tasks/suite/demo/sum_py_exec"
sed -i 's|^  - python3 scripts/check.py|  - exec python3 scripts/check.py|' \
  "$WORK/tasks/suite/demo/sum_py_exec/config.yaml"
# the same task with its source file in a folder (source/kernel.py), as the seed's tasks
# keep theirs: a command agent's workspace must get the folder (envctl made none before)
N=$WORK/tasks/suite/demo/sum_py_nested
cp -r "$WORK/tasks/suite/demo/sum_py" "$N"
mkdir "$N/source" && mv "$N/kernel.py" "$N/source/kernel.py"
sed -i 's|^  - kernel.py|  - source/kernel.py|' "$N/config.yaml"
echo source/kernel.py >"$N/scripts/kernel_path"
# the same task whose correctness report always passes: failure only in its output (2d)
O=$WORK/tasks/suite/demo/sum_py_outonly
cp -r "$WORK/tasks/suite/demo/sum_py" "$O"
sed -i 's|json.dump({"passed": passed}, f)|json.dump({"passed": True}, f)|' "$O/scripts/check.py"
before=$(cd "$WORK/tasks" && find . -type f | sort | xargs sha256sum)

# 1. Loading: envctl tasks lists both command tasks with their kind and backends.
"$BIN/envctl" tasks --tasks "$WORK/tasks" >"$WORK/tasks.out" 2>&1
cat "$WORK/tasks.out"
check "envctl tasks lists suite/demo/sum_py as a command task on host" \
  grep -Eq "^suite/demo/sum_py +python2python +python +command +host +harness" "$WORK/tasks.out"
check "envctl tasks lists suite/demo/gpu_only on cuda" \
  grep -Eq "^suite/demo/gpu_only +triton2triton +python +command +cuda" "$WORK/tasks.out"

# 2. One episode, a step per candidate, on a long-running server and executor.
ka_stack "$WORK/tasks"
LIST="baseline fast timing_mean ori_opt wall_only garbage no_time none wrong syntax hang crash network tamper fast daemon one_case escape exit125 forge_ori forge_fast stale notfile link forge_names"
AGENT="set -- $LIST; shift \$KA_STEP; f=\$1; case \$f in baseline) ;; *) cp $CAND/\$f.py kernel.py ;; esac"
ka_run "$BIN/envctl" episode --server "$URL" --task suite/demo/sum_py --seed 3 --max-steps 25 \
  --verbose --workspace "$WORK/ws" --agent "command:$AGENT" >"$WORK/episode.out" 2>&1
rc=$?
cat "$WORK/episode.out"
check "the episode exits 0" [ "$rc" -eq 0 ]
check "the prompt states the command task's rules (mean speedup, flagged harness changes)" sh -c \
  "grep -q 'runs the task.s own compile, correctness and performance commands' '$WORK/ws/prompt.md' && grep -q 'speedup is the mean' '$WORK/ws/prompt.md'"
# step N: the N-th of LIST, its status and reward
expect() {
  check "step $1 ($2): $3, reward $4" sh -c \
    "grep '^step $1:' '$WORK/episode.out' | grep 'status $3,' | grep -q 'reward $4'"
}
expect 1 baseline OK 220.00
expect 2 fast OK 320.00
expect 3 timing_mean OK 520.00
expect 4 ori_opt OK 245.00
expect 5 wall_only RUNTIME_ERROR 20.00
expect 6 garbage RUNTIME_ERROR 20.00
expect 7 no_time RUNTIME_ERROR 20.00
expect 8 none RUNTIME_ERROR 20.00
expect 9 wrong INCORRECT 20.00
expect 10 syntax COMPILE_ERROR 0.00
expect 11 hang TIMEOUT 20.00
expect 12 crash RUNTIME_ERROR 20.00
expect 13 network OK 220.00
expect 14 tamper FLAGGED 0.00
expect 15 "fast, after the tampering" OK 320.00
expect 16 daemon OK 220.00
expect 17 one_case RUNTIME_ERROR 20.00
expect 18 escape OK 220.00
expect 19 exit125 INCORRECT 20.00
expect 20 "forge_ori: its own report's ori_time 1000 is not the baseline" OK 220.00
expect 21 "forge_fast: its own report, 2000x" FLAGGED 0.00
expect 22 "stale: a report written in the correctness phase" RUNTIME_ERROR 20.00
expect 23 "notfile: a folder as the report" RUNTIME_ERROR 20.00
expect 24 "link: a symbolic link as the report" RUNTIME_ERROR 20.00
expect 25 "forge_names: every case named after the slowest" RUNTIME_ERROR 20.00
check "a report whose case names repeat one baseline case is refused, naming it" grep -q \
  "the performance report's case 'rows32_cols64' names no case of the baseline's run that is left" \
  "$WORK/episode.out"
check "a command task's mean is labelled arithmetic, not geometric" sh -c \
  "grep -q 'mean speedup 2.000x (arithmetic, the task harness.s score)' '$WORK/episode.out' && ! grep -q 'geometric-mean' '$WORK/episode.out'"
check "the step's cases carry the report's names" grep -Eq "^  rows32_cols64 +yes" "$WORK/episode.out"
check "the speedup cap names the case and the cap" grep -q "speedup of case rows8_cols16 is 2000.0x, above the cap of 10x" "$WORK/episode.out"
check "a report that is a folder or a link: named, and not read" sh -c \
  "[ \$(grep -c 'build/performance_report.json is not a regular file' '$WORK/episode.out') -ge 4 ] && ! grep -q \"near '\$(head -c 2 /etc/hostname)\" '$WORK/episode.out'"
# (gpuexec's evaluation folders are in its own folder under TMPDIR = $WORK/tmp)
check "a write outside the evaluation's folder made nothing" \
  sh -c "[ -z \"\$(find '$WORK/tmp' -name escape-marker)\" ]"
check "a report with fewer cases than the baseline's: named" grep -q "the performance report has 1 case, the baseline's 2" "$WORK/episode.out"
left=$(ka_procs_in "$WORK/tmp")
check "no process of a command is left behind (daemon's sleep was killed)" [ -z "$left" ]
check "wall-clock times refused with the reason" grep -q "wall-clock time (\"wall_time_ms\"), which is refused" "$WORK/episode.out"
check "a report that is not JSON: named" grep -q "malformed performance report build/performance_report.json: not JSON" "$WORK/episode.out"
check "a missing report: named" grep -q "wrote no report" "$WORK/episode.out"
check "the hang ended at the correctness deadline (5 s)" grep -q "correctness command .* within its deadline (5 s)" "$WORK/episode.out"
check "the crash: killed by signal 11" grep -q "killed by signal 11" "$WORK/episode.out"
check "the tampering names the file" grep -q "harness file scripts/check.py was changed" "$WORK/episode.out"
check "every step's log states the integrity level task-harness" \
  awk '/integrity: task-harness/ {n++} END {exit !(n == 25)}' "$WORK/episode.out"
check "the baseline was measured once for the 25 steps" \
  awk '/baseline: measured now/ {m++} /baseline: cached/ {c++} END {exit !(m == 1 && c == 24)}' "$WORK/episode.out"
after=$(cd "$WORK/tasks" && find . -type f | sort | xargs sha256sum)
check "the task folder is unchanged (commands ran in a copy)" [ "$before" = "$after" ]
check "no evaluation folder is left behind" sh -c "[ -z \"\$(find '$WORK/tmp' -name 'ka-cmd-*')\" ]"

# 2b. A command that leaves its output pipe and runs on is still ended at its deadline.
t0=$(date +%s)
ka_run "$BIN/envctl" episode --server "$URL" --task suite/demo/sum_py_exec --seed 3 --max-steps 1 \
  --workspace "$WORK/ws-exec" --agent "command:cp $CAND/quiet_sleep.py kernel.py" \
  >"$WORK/exec.out" 2>&1
t1=$(date +%s)
cat "$WORK/exec.out"
check "quiet_sleep (exec'd, its output closed): TIMEOUT at the 5 s deadline, in $((t1 - t0)) s" sh -c \
  "grep '^step 1:' '$WORK/exec.out' | grep -q 'status TIMEOUT' && [ $((t1 - t0)) -lt 25 ]"

# 2c. A task whose source file is in a folder (source/kernel.py, as the seed's tasks): the
# command agent's workspace holds it there, and a faster copy scores as in sum_py.
ka_run "$BIN/envctl" episode --server "$URL" --task suite/demo/sum_py_nested --seed 3 \
  --max-steps 1 --workspace "$WORK/ws-nested" --agent "command:cp $CAND/fast.py source/kernel.py" \
  >"$WORK/nested.out" 2>&1
cat "$WORK/nested.out"
check "a source file in a folder: the workspace has source/kernel.py" \
  [ -f "$WORK/ws-nested/source/kernel.py" ]
check "a source file in a folder: the faster candidate scores OK, reward 320.00" sh -c \
  "grep '^step 1:' '$WORK/nested.out' | grep 'status OK,' | grep -q 'reward 320.00'"

# 2d. A task whose harness says failure only in its output (no failing report): a NUL
# byte the candidate writes first must not hide the "FAIL" lines after it.
ka_run "$BIN/envctl" episode --server "$URL" --task suite/demo/sum_py_outonly --seed 3 \
  --max-steps 2 --workspace "$WORK/ws-outonly" \
  --agent "command:cp $CAND/\$(test \$KA_STEP = 0 && echo wrong || echo nul_wrong).py kernel.py" \
  >"$WORK/outonly.out" 2>&1
cat "$WORK/outonly.out"
check "failure only in the output: wrong.py is INCORRECT" sh -c \
  "grep '^step 1:' '$WORK/outonly.out' | grep -q 'status INCORRECT,'"
check "failure only in the output: a NUL byte before it hides nothing (nul_wrong.py INCORRECT)" \
  sh -c "grep '^step 2:' '$WORK/outonly.out' | grep -q 'status INCORRECT,'"

# 3. The step's info carries the integrity level; a harness file is refused in a step.
# the agent of a new episode takes its step itself, from the workspace (envctl step --json)
ka_run "$BIN/envctl" episode --server "$URL" --task suite/demo/sum_py --seed 4 --max-steps 1 \
  --workspace "$WORK/ws-step" --agent "command:KA_SERVER=$URL KA_FILES=kernel.py $BIN/envctl step --json >$WORK/step.json" \
  >"$WORK/step.out" 2>&1
cat "$WORK/step.out" "$WORK/step.json"
check "envctl step: info.integrity is task-harness" grep -q '"integrity": "task-harness"' "$WORK/step.json"
check "envctl step: the baseline's reward, 220" grep -q '"reward": 220' "$WORK/step.json"

# 5. envctl run selects command tasks by any parent folder of their ids (suite/demo).
cat >"$WORK/run.yaml" <<EOC
label: cmd
agent:
  adapter: command
  command: 'cp $CAND/fast.py kernel.py && envctl step'
  timeout_s: 60
tasks: [suite/demo]
repeats: 1
reward: best
max_steps: 2
seed: 1
held_out: false
EOC
ka_run "$BIN/envctl" run --config "$WORK/run.yaml" --runs-dir "$WORK/runs" --server "$URL" \
  >"$WORK/run.out" 2>&1
cat "$WORK/run.out"
check "envctl run [suite/demo]: sum_py ran, reward 320" \
  grep -q "suite/demo/sum_py #0: .*reward 320.00" "$WORK/run.out"
check "... and gpu_only was selected too (a counted failure on this executor)" \
  grep -q "suite/demo/gpu_only #0: error" "$WORK/run.out"
check "... and the parent folder is not run as a task of its own" sh -c \
  "! grep -q 'suite/demo #0' '$WORK/run.out'"

# 4. A GPU-only task on this host-only executor: refused at reset, with the reason.
"$BIN/envctl" episode --server "$URL" --task suite/demo/gpu_only --seed 1 --max-steps 1 \
  --workspace "$WORK/ws-gpu" >"$WORK/gpu.out" 2>&1
rc=$?
cat "$WORK/gpu.out"
check "the GPU-only task is refused" [ "$rc" -ne 0 ]
check "... saying it needs a cuda device and what this executor offers" \
  grep -q "needs a cuda device; the connected executors offer: host" "$WORK/gpu.out"
[ $fail -eq 0 ] && echo "command_tasks: all checks passed"
exit $fail
