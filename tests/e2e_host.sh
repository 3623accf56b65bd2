#!/bin/sh
# End-to-end test of the whole loop on the host backend, with real processes:
# envserver + gpuexec + envctl, the host/gelu task and candidates that are correct,
# faster, wrong, partial, broken, hanging, crashing and lazy (skips work in timed calls).
# Checks the printed steps, rewards, and that every step is in the sqlite trace store.
# usage: e2e_host.sh BIN_DIR SOURCE_DIR [PART]
#   PART embedded  1.: envctl episode with its embedded server (the fast lane's episode)
#        loop      2.-6.: a long-running server, every verdict, the trace store
#        speedup   7.: the faster candidate measures faster than the baseline (timing:
#                  run alone, at the full number of timed calls)
#        all       (default) every part
# Parts other than speedup are meant to run under the test profile (KA_JOB_REPS and
# KA_JOB_WARMUP low, set by tests/CMakeLists.txt): they check verdicts, not speed.
set -u
BIN=$1
SRC=$2
PART=${3:-all}
CAND=$SRC/tests/candidates/host_gelu
. "$SRC/tests/lib.sh" # check, cleanup on EXIT/INT/TERM, ka_stack
ka_init e2e

# A copy of the task folder with a short evaluation timeout, so the hanging
# candidate is killed in seconds rather than a minute.
# Cases at a quarter of their size: each honest evaluation makes 46 calls per case at
# the full count (6 under the test profile), each after a flush of twice the last-level
# cache, and must stay far below the deadline on a slow 2-core CI machine.
ka_task_copy cuda2cuda/gelu
if [ "$PART" = speedup ]; then
  ka_task_copy host/gelu "s/n: 1048576/n: 262144/; s/n: 2097152/n: 524288/"
else
  ka_task_copy host/gelu "s/^timeout_s: .*/timeout_s: 10/; s/n: 1048576/n: 262144/" \
    "s/n: 2097152/n: 524288/"
fi

if [ "$PART" = all ] || [ "$PART" = embedded ]; then
# 1. The default path a newcomer takes: embedded server, baseline agent. Its steps get
# the task's own 60 s (a copy; the 10 s copy is for the hanging candidate of part 2):
# under ASan on a machine whose L3 is 480 MiB the baseline's step took over 10 s
# (the host flush writes twice the L3 before every call).
mkdir -p "$WORK/tasks-long/host"
cp -r "$WORK/tasks/host/gelu" "$WORK/tasks-long/host/"
sed -i "s/^timeout_s: .*/timeout_s: 60/" "$WORK/tasks-long/host/gelu/task.yaml"
ka_run "$BIN/envctl" episode --task host/gelu --tasks "$WORK/tasks-long" --seed 1 >"$WORK/embedded.out" 2>&1
rc=$?
cat "$WORK/embedded.out"
check "embedded episode exits 0" [ "$rc" -eq 0 ]
check "embedded baseline step is OK" grep -q "step 1: status OK, compiled yes" "$WORK/embedded.out"
# speedup of the unchanged baseline against itself is near 1 (noisy CI machines: 1/3-3)
sp=$(awk '/geometric-mean speedup/ {sub("x","",$3); print $3}' "$WORK/embedded.out")
check "baseline speedup near 1 (got $sp)" awk -v s="${sp:-0}" 'BEGIN{exit !(s > 0.33 && s < 3.0)}'
# every case's timed calls: some verified, drawn after the calls (their outputs were kept)
check "verified timed calls drawn after the calls, on every case" awk '
  / timed calls verified / {n++; if ($2 + 0 < 1 || $0 !~ /drawn after the calls/) bad++}
  END {exit !(n >= 2 && !bad)}' "$WORK/embedded.out"
# the test profile's knob reaches the embedded server: its count of timed calls
reps=${KA_JOB_REPS:-20}
check "every case made $reps timed calls (KA_JOB_REPS ${KA_JOB_REPS:-unset})" awk -v r="$reps" '
  / timed calls verified / {n++; if ($4 != r) bad++} END {exit !(n >= 2 && !bad)}' \
  "$WORK/embedded.out"
# values out of range are refused with a warning, and the defaults are used: the prompt
# states them. The defaults mean 20 timed calls per case, which under a loaded 2-core
# machine took longer than the copy's 10 s deadline (a TIMEOUT, not the INCORRECT
# checked here): this run gets the copy with the task's own 60 s too.
KA_JOB_REPS=0 KA_JOB_WARMUP=-1 "$BIN/envctl" episode --task host/gelu --tasks "$WORK/tasks-long" \
  --seed 1 --verbose --max-steps 1 --workspace "$WORK/ws-bad" \
  --agent "command:cp prompt.md $WORK/prompt-bad.md; cp $CAND/wrong.c gelu.c" \
  >"$WORK/bad-reps.out" 2>&1
check "KA_JOB_REPS=0, KA_JOB_WARMUP=-1: both warned about" sh -c \
  "grep -q 'ignoring KA_JOB_REPS=0' '$WORK/bad-reps.out' && grep -q 'ignoring KA_JOB_WARMUP=-1' '$WORK/bad-reps.out'"
check "... and the prompt states the defaults (3 warm-up, 20 timed calls)" \
  grep -q "3 warm-up and 20 timed calls per case" "$WORK/prompt-bad.md"
# the trial pipe (worker.c, wk_early): the first case's outputs are compared while the
# runner goes on, and a wrong output compared so still makes the step INCORRECT
early=$(sed -n 's/.*(\([0-9]*\) of 2 cases compared while the runner timed).*/\1/p' "$WORK/bad-reps.out")
check "wrong: compared while the runner timed (${early:-no line}), still INCORRECT" sh -c \
  "[ '${early:-0}' -ge 1 ] && grep -q '^step 1: status INCORRECT' '$WORK/bad-reps.out' && grep -q 'elements differ; first at' '$WORK/bad-reps.out'"
# a task folder that failed to load: asking for it says why it was skipped, not only
# "unknown task" (the server keeps the reasons of the folders it skipped)
mkdir -p "$WORK/tasks-skip/suite/broken"
cp -r "$WORK/tasks/host" "$WORK/tasks-skip/"
printf 'source_file_path: k.py\nperformance_command: ["true"]\ncorrectness_timeout: abc\n' \
  >"$WORK/tasks-skip/suite/broken/config.yaml"
echo 'x = 1' >"$WORK/tasks-skip/suite/broken/k.py"
"$BIN/envctl" episode --task suite/broken --tasks "$WORK/tasks-skip" --seed 1 >"$WORK/skip.out" 2>&1
rc=$?
check "a skipped task: the reset error says it was skipped at load, and why" sh -c \
  "[ $rc -ne 0 ] && grep \"unknown task 'suite/broken': it was skipped at load: \" '$WORK/skip.out' | grep -q \"config.yaml: correctness_timeout: 'abc' is not a number of seconds in (0, 86400]\"" ||
  cat "$WORK/skip.out"
check "... and the hint names the folder that was used" \
  grep -q "envctl tasks --tasks $WORK/tasks-skip. lists the tasks there" "$WORK/skip.out" ||
  cat "$WORK/skip.out"
check "... naming the folder by its id, not by the server's path" sh -c \
  "grep \"unknown task 'suite/broken'\" '$WORK/skip.out' | grep -q 'skipped at load: suite/broken/config.yaml: ' && ! grep \"unknown task\" '$WORK/skip.out' | grep -q '$WORK'" ||
  cat "$WORK/skip.out"
# an embedded server that exits at startup is quoted: its last stderr line, not only
# "run with --verbose" (gpuexec refuses the backend; the missing folder, whichever exits
# first); with --verbose its output is passed through as before
"$BIN/envctl" episode --task host/gelu --tasks "$WORK/tasks" --backends bogus >"$WORK/start.out" 2>&1
rc=$?
check "gpuexec exits at startup: envctl quotes its error line" sh -c \
  "[ $rc -eq 1 ] && grep -q \"gpuexec exited: gpuexec: unknown backend 'bogus' (host, cuda or hip) (run with --verbose\" '$WORK/start.out'" ||
  cat "$WORK/start.out"
"$BIN/envctl" episode --task host/gelu --tasks "$WORK/tasks" --backends bogus --verbose \
  >"$WORK/start-v.out" 2>&1
rc=$?
check "... with --verbose: its output passed through, and named" sh -c \
  "[ $rc -eq 1 ] && grep -q \"^gpuexec: unknown backend 'bogus'\" '$WORK/start-v.out' && grep -q 'gpuexec exited with status 2 (its output is above)' '$WORK/start-v.out'" ||
  cat "$WORK/start-v.out"
"$BIN/envctl" episode --task host/gelu --tasks "$WORK/nope" >"$WORK/start-nope.out" 2>&1
rc=$?
check "a missing task folder: the exited server's line names it" sh -c \
  "[ $rc -eq 1 ] && grep -q 'exited: [a-z]*: task folder $WORK/nope' '$WORK/start-nope.out'" ||
  cat "$WORK/start-nope.out"
fi

if [ "$PART" = all ] || [ "$PART" = loop ]; then
# 2. A long-running server and executor, and one episode of several steps.
ka_stack "$WORK/tasks"

# an unknown agent is refused before the reset: exit 2, named, and no episode left open
before=$("$BIN/envctl" health --server "$URL" 2>/dev/null | sed -n 's/.*open_episodes=\([0-9]*\).*/\1/p')
"$BIN/envctl" episode --server "$URL" --task host/gelu --agent bogus >"$WORK/bogus.out" 2>&1
rc=$?
after=$("$BIN/envctl" health --server "$URL" 2>/dev/null | sed -n 's/.*open_episodes=\([0-9]*\).*/\1/p')
check "--agent bogus: exit 2, the agent named, no episode opened (open $before -> $after)" sh -c \
  "[ $rc -eq 2 ] && grep -q \"unknown agent 'bogus'\" '$WORK/bogus.out' && ! grep -q '^episode ' '$WORK/bogus.out' && [ -n '$before' ] && [ '$before' = '$after' ]"
# a missing files folder is refused before an embedded server starts (a new user waited
# for envserver and gpuexec to start before hearing of it)
"$BIN/envctl" episode --tasks "$WORK/tasks" --task host/gelu --agent "files:$WORK/no-such-dir" \
  >"$WORK/nodir.out" 2>&1
rc=$?
check "--agent files:MISSING: exit 2, named, before any server starts" sh -c \
  "[ $rc -eq 2 ] && grep -q 'no such folder' '$WORK/nodir.out' && ! grep -q 'starting envserver' '$WORK/nodir.out'"

# step k submits the k-th file of this list (KA_STEP counts from 0)
LIST="fast.c wrong.c broken.c hang.c fast.c crash.c partial.c baseline lazy.c"
AGENT="set -- $LIST; shift \$KA_STEP; f=\$1; case \$f in baseline) cp $SRC/tasks/host/gelu/baseline/gelu.c gelu.c ;; fast.c) cp $CAND/../host_gelu_fast/gelu.c gelu.c ;; *) cp $CAND/\$f gelu.c ;; esac"
ka_run "$BIN/envctl" episode --server "$URL" --task host/gelu --seed 7 --max-steps 9 \
  --workspace "$WORK/ws" --agent "command:$AGENT" >"$WORK/multi.out" 2>&1
rc=$?
cat "$WORK/multi.out"
check "multi-step episode exits 0" [ "$rc" -eq 0 ]
check "step 1 fast: OK" sh -c "grep '^step 1:' '$WORK/multi.out' | grep -q 'status OK'"
# correct and not flagged (its speed is part speedup's business, measured alone)
check "step 1 fast: reward above 120" awk '/^step 1:/ {r=$NF} END{exit !(r+0 > 120)}' "$WORK/multi.out"
check "step 2 wrong: INCORRECT, reward 20" sh -c "grep '^step 2:' '$WORK/multi.out' | grep -q 'status INCORRECT, compiled yes, reward 20.00'"
check "step 2 wrong: mismatch reported" grep -q "elements differ; first at" "$WORK/multi.out"
# a case that failed before it was timed shows no figures that read as a measured 0
check "no case row reads 0.000x (untimed cases show -)" sh -c "! grep -q ' 0\.000x\$' '$WORK/multi.out' && grep -Eq '^  [A-Za-z0-9_]+ +NO .* - +- +-\$' '$WORK/multi.out'"
check "step 3 broken: COMPILE_ERROR, reward 0" sh -c "grep '^step 3:' '$WORK/multi.out' | grep -q 'status COMPILE_ERROR, compiled no, reward 0.00'"
check "step 3 broken: compiler log returned" grep -q "undefined_symbol_here" "$WORK/multi.out"
check "step 4 hang: TIMEOUT, reward 20" sh -c "grep '^step 4:' '$WORK/multi.out' | grep -q 'status TIMEOUT, compiled yes, reward 20.00'"
check "step 5 after the hang: OK again" sh -c "grep '^step 5:' '$WORK/multi.out' | grep -q 'status OK'"
check "step 6 crash: RUNTIME_ERROR, reward 20" sh -c "grep '^step 6:' '$WORK/multi.out' | grep -q 'status RUNTIME_ERROR, compiled yes, reward 20.00'"
check "step 6 crash: names the signal" grep -q "signal 11" "$WORK/multi.out"
check "step 7 partial output: INCORRECT" sh -c "grep '^step 7:' '$WORK/multi.out' | grep -q 'status INCORRECT'"
check "step 8 baseline: OK" sh -c "grep '^step 8:' '$WORK/multi.out' | grep -q 'status OK'"
check "step 9 lazy (skips work in timed calls): INCORRECT, reward 20" sh -c "grep '^step 9:' '$WORK/multi.out' | grep -q 'status INCORRECT, compiled yes, reward 20.00'"
check "step 9 lazy: timed outputs named" grep -q "outputs of timed call" "$WORK/multi.out"

# 3. Every step is in the trace store.
EP=$(awk '/^episode ep-/ {sub(":","",$2); print $2; exit}' "$WORK/multi.out")
DB=$STATE/trace.db
n=$(sqlite3 "$DB" "SELECT count(*) FROM steps WHERE episode_id='$EP'")
check "9 steps of $EP in sqlite (got $n)" [ "${n:-0}" -eq 9 ]
st=$(sqlite3 "$DB" "SELECT group_concat(status, ',') FROM (SELECT status FROM steps WHERE episode_id='$EP' ORDER BY step)")
check "statuses in sqlite in order (got $st)" [ "$st" = "1,3,2,5,1,4,3,1,3" ]
nf=$(sqlite3 "$DB" "SELECT count(*) FROM step_files f JOIN blobs b ON b.sha256=f.sha256 WHERE f.episode_id='$EP'")
check "submitted sources stored content-addressed ($nf)" [ "${nf:-0}" -ge 8 ]
nb=$(sqlite3 "$DB" "SELECT count(DISTINCT f.sha256) FROM step_files f WHERE f.episode_id='$EP'")
check "identical sources stored once (fast.c twice: $nb distinct of 9)" [ "${nb:-0}" -eq 8 ]

# 4. The executor survived everything and no evaluation process was left behind.
check "gpuexec still running" kill -0 "$GX_PID"
check "envserver still running" kill -0 "$SRV_PID"
# this executor's runners only (other tests run in parallel with their own); the
# supervisor gives module processes 250 ms to exit after an evaluation
i=0
while [ -n "$(ka_procs_in "$WORK/tmp")" ] && [ $i -lt 50 ]; do
  sleep 0.2
  i=$((i + 1))
done
check "no runner left behind" [ -z "$(ka_procs_in "$WORK/tmp")" ]
check "no child process left under gpuexec" sh -c "! pgrep -P $GX_PID >/dev/null"

# 5. A GPU task on a machine without a GPU: clear error naming the host tasks.
if ! "$BIN/gpuexec" --backends cuda --server "ipc://$WORK/none.ipc" --tasks "$WORK/tasks" 2>/dev/null; then
  ka_run "$BIN/envctl" episode --server "$URL" --task cuda2cuda/gelu >"$WORK/gpu.out" 2>&1
  rc=$?
  cat "$WORK/gpu.out"
  check "GPU task without a GPU fails" [ "$rc" -ne 0 ]
  check "the error names the host tasks" grep -q "host/gelu" "$WORK/gpu.out"
fi

# 6. Numbers out of range are refused before anything starts (no silent wrap-around), and
# the server saw no new episode.
n_before=$(sqlite3 "$STATE/trace.db" "select count(*) from episodes")
for bad in "--max-steps 4294967297" "--agent-timeout 4294967296" "--seed -1" \
  "--seed 99999999999999999999999"; do
  # shellcheck disable=SC2086
  ka_run "$BIN/envctl" episode --server "$URL" --task host/gelu $bad >"$WORK/bad.out" 2>&1
  rc=$?
  check "envctl episode $bad: exit 2 with a reason" sh -c \
    "[ $rc -eq 2 ] && grep -q 'needs a' '$WORK/bad.out'"
done
check "no episode recorded for refused arguments" \
  [ "$(sqlite3 "$STATE/trace.db" "select count(*) from episodes")" = "$n_before" ]
kill "$GX_PID" "$SRV_PID" 2>/dev/null
wait "$GX_PID" "$SRV_PID" 2>/dev/null
GX_PID= SRV_PID=
fi

if [ "$PART" = all ] || [ "$PART" = speedup ]; then
# 7. The faster candidate (four floats at a time, a polynomial erfc: about 6x on this
# machine; the erff version once here, about 1.1-1.5x, lost to noise on CI) against
# the baseline submitted unchanged, in one episode on one executor: the speedup of the
# first step must exceed that of the second. Both are medians of interleaved calls
# (candidate and baseline alternate), so load on the machine slows both sides of each
# ratio alike; an absolute bound (the reward above 210 once asserted here) failed on a
# loaded machine. Run alone (RUN_SERIAL) with the full count of timed calls.
rm -rf "$WORK/state"
ka_stack "$WORK/tasks"
AGENT="case \$KA_STEP in 0) cp $CAND/../host_gelu_fast/gelu.c gelu.c ;; *) cp $SRC/tasks/host/gelu/baseline/gelu.c gelu.c ;; esac"
ka_run "$BIN/envctl" episode --server "$URL" --task host/gelu --seed 9 --max-steps 2 \
  --workspace "$WORK/ws-speedup" --agent "command:$AGENT" >"$WORK/speedup.out" 2>&1
rc=$?
cat "$WORK/speedup.out"
check "speedup episode exits 0" [ "$rc" -eq 0 ]
check "speedup: both steps OK" [ "$(grep -c '^step [12]: status OK' "$WORK/speedup.out")" -eq 2 ]
s1=$(sqlite3 "$STATE/trace.db" "SELECT geomean_speedup FROM steps WHERE step=1")
s2=$(sqlite3 "$STATE/trace.db" "SELECT geomean_speedup FROM steps WHERE step=2")
check "speedup: fast candidate ($s1) faster than the baseline against itself ($s2)" \
  awk -v a="${s1:-0}" -v b="${s2:-0}" 'BEGIN{exit !(a > b && b > 0)}'
fi

[ $fail -eq 0 ] && echo "e2e_host: all checks passed"
exit $fail
