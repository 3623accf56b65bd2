#!/bin/sh
# `envctl run`: a run config with the command adapter on a real envserver + gpuexec
# (host backend), interrupted with SIGINT after its first episode and finished with
# --resume; a task that cannot run counts as a failure; the run folder's format; held-out
# scoring of each final kernel with the server's admin token, which the agent never sees
# (neither the token nor held-out results).
# usage: agents_run.sh BIN_DIR SOURCE_DIR
set -u
BIN=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
. "$SRC/tests/lib.sh" # check, jcheck, cleanup on EXIT/INT/TERM, ka_stack
ka_init run

mkdir -p "$WORK/tasks/host"
cp -r "$SRC/tasks/host/gelu" "$WORK/tasks/host/"
# (and a generous evaluation time limit: CI machines may be loaded)
sed -i "s/n: 1048576}/n: 65536}/; s/n: 2097152}/n: 131072}/; s/n: 1000003}/n: 65537}/" \
  "$WORK/tasks/host/gelu/task.yaml"
sed -i "s/^timeout_s: .*/timeout_s: 180/" "$WORK/tasks/host/gelu/task.yaml"
TOKEN=tok-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
printf '%s\n' "$TOKEN" >"$WORK/admin.token"
ka_stack "$WORK/tasks" --admin-token-file "$WORK/admin.token"

cat >"$WORK/run.yaml" <<'YAML'
label: test-command
run: r1
agent:
  adapter: command
  # the second repeat sleeps first (once: not again when resumed), so that the test can
  # interrupt it mid-episode; the agent keeps its environment (KA_TEST_SLEPT is the
  # test's), and tries to read the episode back through its server
  command: 'case "$KA_WORKSPACE" in *@1/*) [ -e "$KA_TEST_SLEPT" ] || { : >"$KA_TEST_SLEPT"; sleep 30; } ;; esac; env >agent-env.txt; sed -i "s/erf(/erff(/" gelu.c && envctl step && envctl replay --server "$KA_SERVER" "$KA_EPISODE" >replay.out 2>&1; true'
  timeout_s: 120
tasks: [host, host/no_such_task]   # a family and a task the server does not have
repeats: 2
reward: best
max_steps: 3
seed: 11
parallel: 1
held_out: true
YAML
KA_TEST_SLEPT=$WORK/slept
export KA_TEST_SLEPT
"$BIN/envctl" run --config "$WORK/run.yaml" --server "$URL" --runs-dir "$WORK/runs" \
  --timeout 200 --admin-token-file "$WORK/admin.token" >"$WORK/run1.out" 2>"$WORK/run1.err" &
RUN_PID=$!
R=$WORK/runs/r1
i=0
until [ -s "$R/results.jsonl" ]; do # the first episode has finished
  i=$((i + 1))
  if [ $i -gt 600 ]; then echo "FAIL - no episode finished"; cat "$WORK/run1.out" "$WORK/run1.err"; exit 1; fi
  sleep 0.2
done
sleep 1
kill -INT "$RUN_PID"
wait "$RUN_PID"
rc=$?
RUN_PID=
cat "$WORK/run1.out" "$WORK/run1.err"
check "interrupted run exits 130" [ "$rc" -eq 130 ]
jcheck "run.json: 4 planned episodes (2 tasks x 2 repeats), config kept" "$R/run.json" \
  "len(d['plan'])==4 and d['config']['label']=='test-command' and d['schema']=='kernelarena.run.v1'"
check "config.yaml copied into the run folder" cmp -s "$WORK/run.yaml" "$R/config.yaml"
jcheck "summary after the interruption: incomplete" "$R/summary.json" "d['complete'] is False"
check "one finished episode before the interruption" [ "$(wc -l <"$R/results.jsonl")" -eq 1 ]
jcheck "the interrupted episode is recorded as interrupted" "$R/episodes/host~gelu@1/episode.json" \
  "d['status']=='interrupted'"
first=$(python3 -c "import json;print(json.load(open('$R/episodes/host~gelu@0/episode.json'))['episode_id'])")

# the server must still accept new clients after the interrupted run (a client that
# disconnects during nng 1.5.2's connection handshake used to stop the listener for good:
# nanomsg/nng#1518); fails in seconds instead of hanging in --resume
check "the server still accepts new clients after the interruption" \
  sh -c "'$BIN/envctl' health --server '$URL' --timeout 10 | grep -q ok=1"
# --timeout bounds each server request, so that a lost evaluation fails the episode
# (and this test) instead of waiting for the server's lost-executor limit; the token
# comes from the environment this time
KA_ADMIN_TOKEN=$TOKEN "$BIN/envctl" run --resume r1 --server "$URL" --runs-dir "$WORK/runs" \
  --timeout 200 >"$WORK/run2.out" 2>"$WORK/run2.err"
rc=$?
cat "$WORK/run2.out" "$WORK/run2.err"
check "resumed run exits 0" [ "$rc" -eq 0 ]
check "resume reports the finished episode" grep -q "4 episodes (1 already finished)" "$WORK/run2.out"
jcheck "the finished episode was not repeated" "$R/episodes/host~gelu@0/episode.json" \
  "d['episode_id']=='$first'"
check "results.jsonl: one line per finished episode (1 + 3)" [ "$(wc -l <"$R/results.jsonl")" -eq 4 ]
jcheck "host/gelu repeats: completed, correct, OK step, reward > 120" "$R/episodes/host~gelu@1/episode.json" \
  "d['status']=='completed' and d['correct'] and d['reward']>120 and d['reward_mode']=='best' and d['run']=='r1' and d['label']=='test-command' and d['repeat']==1"
jcheck "a task the server lacks: error, reward 0, with the reason" "$R/episodes/host~no_such_task@0/episode.json" \
  "d['status']=='error' and d['reward']==0 and 'NOT_FOUND' in d['error']"
jcheck "summary: 4 episodes, 2 correct, 2 failed (the missing task counts), complete" "$R/summary.json" \
  "d['episodes']==4 and d['correct']==2 and d['failed']==2 and d['complete'] is True and d['tasks']['host/no_such_task']['failed']==2"
jcheck "summary: mean reward over all 4 episodes, failures as 0" "$R/summary.json" \
  "abs(d['mean_reward'] - sum(json.load(open('$R/episodes/host~gelu@%d/episode.json' % k))['reward'] for k in (0,1))/4) < 1e-9"
jcheck "seeds: deterministic per (task, repeat), distinct" "$R/run.json" \
  "len({p['seed'] for p in d['plan']})==4"
for k in 0 1; do
  jcheck "host/gelu@$k held-out: scored step's files on the held-out case n_odd, correct, gap" \
    "$R/episodes/host~gelu@$k/episode.json" \
    "(h:=d['held_out'])['status']=='ok' and h['correct'] and [c['name'] for c in h['cases']]==['n_odd'] and h['step']==d['scored_step'] and h['speedup_geomean']>0 and abs(h['gap']-h['speedup_geomean']/h['shown_speedup_geomean'])<1e-9" "d['held_out']"
done
jcheck "a task that could not run: held-out skipped" "$R/episodes/host~no_such_task@0/episode.json" \
  "d['held_out']['status']=='skipped'"
G=$R/episodes/host~gelu@1
check "the agent's environment had no admin token (the token was in envctl's)" \
  sh -c "grep -q '^KA_SERVER=ipc:///tmp/ka-agent-' '$G/workspace/agent-env.txt' && ! grep -q KA_ADMIN_TOKEN '$G/workspace/agent-env.txt'"
check "no file of any episode folder (workspaces, transcripts) holds the token" \
  sh -c "! grep -rqF '$TOKEN' '$R/episodes'"
check "the agent's steps never showed a held-out case (transcript, last_result, steps.jsonl)" \
  sh -c "grep -q 'case n1M:' '$G/transcript.txt' && ! grep -q n_odd '$G/transcript.txt' '$G/workspace/.kernelarena/last_result.json' '$G/steps.jsonl'"
check "the agent cannot read its episode back through its server (the step proxy)" \
  grep -q "only Step" "$G/workspace/replay.out"
# envctl step straight at the server (no proxy) asks State first: a closed episode is
# refused before anything is submitted, and the workspace's files are left as they were
cp "$G/workspace/gelu.c" "$WORK/gelu.before"
"$BIN/envctl" step --server "$URL" --workspace "$G/workspace" >"$WORK/step.out" 2>&1
check "envctl step on a closed episode: refused from State (exit 1), workspace untouched" \
  sh -c "[ $? -eq 1 ] && grep -q 'is closed (closed)' '$WORK/step.out' && cmp -s '$WORK/gelu.before' '$G/workspace/gelu.c'"
KA_ADMIN_TOKEN=wrong-token "$BIN/envctl" agent --task host/gelu --server "$URL" --held-out \
  --set 'command=echo idle' --out "$WORK/wrong" --timeout 200 >"$WORK/wrong.out" 2>&1
jcheck "a wrong admin token: held-out refused (PERMISSION_DENIED), the episode still scored" \
  "$WORK/wrong/episode.json" \
  "d['held_out']['status']=='error' and 'PERMISSION_DENIED' in d['held_out']['error'] and d['status']=='completed' and d['n_steps']==1" \
  "[d['held_out'], d['status'], d['n_steps'], d.get('error')]"
# embedded server (no --server): envctl makes the admin token itself
env -u KA_ADMIN_TOKEN "$BIN/envctl" agent --task host/gelu --tasks "$WORK/tasks" --backends host \
  --held-out --set 'command=env >agent-env.txt' --out "$WORK/emb" --timeout 200 >"$WORK/emb.out" 2>&1
cat "$WORK/emb.out"
jcheck "embedded: held-out scored with envctl's own token (final evaluation of the workspace)" \
  "$WORK/emb/episode.json" \
  "d['held_out']['status'] in ('ok','incorrect') and [c['name'] for c in d['held_out']['cases']]==['n_odd'] and d['steps'][0]['by']=='adapter'" \
  "d['held_out']"
check "embedded: the agent's environment had no admin token" \
  sh -c "[ -s '$WORK/emb/workspace/agent-env.txt' ] && ! grep -q KA_ADMIN_TOKEN '$WORK/emb/workspace/agent-env.txt'"
"$BIN/envctl" run --config "$WORK/run.yaml" --server "$URL" --runs-dir "$WORK/runs" >"$WORK/run3.out" 2>&1
check "a second run with the same id is refused (exit 2), nothing overwritten" \
  sh -c "[ $? -eq 2 ] && grep -q 'use --resume r1' '$WORK/run3.out' && [ \$(wc -l <'$R/results.jsonl') -eq 4 ]"
printf 'agent: {adapter: nope}\ntasks: [host]\n' >"$WORK/bad.yaml"
"$BIN/envctl" run --config "$WORK/bad.yaml" --server "$URL" --runs-dir "$WORK/runs" >"$WORK/bad.out" 2>&1
check "a config with an unknown adapter is refused (exit 2)" sh -c "[ $? -eq 2 ] && grep -q 'agent.adapter must be' '$WORK/bad.out'"
printf 'run: r-bad\nagent: {adapter: command}\ntasks: [host]\n' >"$WORK/bad2.yaml"
"$BIN/envctl" run --config "$WORK/bad2.yaml" --server "$URL" --runs-dir "$WORK/runs" >"$WORK/bad2.out" 2>&1
check "a command agent without a command is refused before the run starts (exit 2, no run folder)" \
  sh -c "[ $? -eq 2 ] && grep -q 'agent: adapter command needs command: CMD' '$WORK/bad2.out' && [ ! -e '$WORK/runs/r-bad' ]"
sed 's/^run: r1$/run: r-unreachable/' "$WORK/run.yaml" >"$WORK/unreach.yaml"
"$BIN/envctl" run --config "$WORK/unreach.yaml" --server "ipc://$WORK/no-server.ipc" \
  --runs-dir "$WORK/runs" >"$WORK/unreach.out" 2>&1
check "an unreachable --server: exit 1, names the address and how to start a server, no run folder" \
  sh -c "[ $? -eq 1 ] && grep -q 'cannot reach an envserver at ipc://$WORK/no-server.ipc: no answer within 10 s. Is it running? Start one' '$WORK/unreach.out' && [ ! -e '$WORK/runs/r-unreachable' ]"
exit $fail
