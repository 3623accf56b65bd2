#!/bin/sh
# Agent adapters against fake CLIs (tests/fake-cli), with a real envserver + gpuexec on
# the host backend and the host/gelu task. One CASE per ctest entry:
#   claude | codex | cursor   the CLI adapter: flags passed, steps recorded through the
#                             step proxy, transcript kept, tokens and cost read
#   command                   prompt by file and env, final evaluation, proxy refusals,
#                             best-step reward
#   replay                    replay of recorded steps: a step folder, JSONL, export JSONL
#   timeout                   an agent that hangs (and ignores SIGTERM) is killed with
#                             its whole process group at the time limit
# usage: agents_adapters.sh BIN_DIR SOURCE_DIR CASE
set -u
BIN=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
CASE=$3
. "$SRC/tests/lib.sh" # check, jcheck, cleanup on EXIT/INT/TERM, ka_stack
ka_init agents

mkdir -p "$WORK/tasks/host"
cp -r "$SRC/tasks/host/gelu" "$WORK/tasks/host/"
# smaller cases: the steps are about the adapters, not the kernel's speed
# (and a generous evaluation time limit: CI machines may be loaded)
sed -i "s/n: 1048576}/n: 65536}/; s/n: 2097152}/n: 131072}/; s/^timeout_s: .*/timeout_s: 180/" \
  "$WORK/tasks/host/gelu/task.yaml"
ka_stack "$WORK/tasks" --max-steps 50
# The fake CLIs come first on PATH, as the real ones would be installed.
PATH="$SRC/tests/fake-cli:$PATH"
export PATH
AGENT() { ka_run "$BIN/envctl" agent --server "$URL" --task host/gelu --seed 5 "$@"; }

cli_case() { # cli_case ADAPTER EXTRA-ARGS...
  ad=$1
  shift
  OUT=$WORK/$ad
  export FAKE_ARGV_LOG="$WORK/$ad.argv.json" FAKE_AGENT_PLAN=break,step,fast,step
  AGENT --adapter "$ad" --out "$OUT" "$@" >"$WORK/$ad.out" 2>&1
  rc=$?
  unset FAKE_ARGV_LOG FAKE_AGENT_PLAN
  cat "$WORK/$ad.out"
  E=$OUT/episode.json
  python3 -c "
import json,sys
for s in json.load(open(sys.argv[1]))['steps']:
    print('  step', s['step'], s['status'], s['reward'], s['message'][:200], s['runtime_log'][:300])" "$E"
  check "$ad: envctl agent exits 0" [ "$rc" -eq 0 ]
  jcheck "$ad: episode completed with 2 steps" "$E" "d['status']=='completed' and d['n_steps']==2"
  jcheck "$ad: step 1 (broken file) COMPILE_ERROR, reward 0" "$E" \
    "d['steps'][0]['status']=='COMPILE_ERROR' and d['steps'][0]['reward']==0"
  jcheck "$ad: step 2 (erff) OK, reward > 120" "$E" \
    "d['steps'][1]['status']=='OK' and d['steps'][1]['reward']>120 and d['steps'][1]['correct']"
  jcheck "$ad: both steps made by the agent, in order" "$E" \
    "[s['by'] for s in d['steps']]==['agent','agent'] and [s['step'] for s in d['steps']]==[1,2]"
  jcheck "$ad: reward is the last step's" "$E" \
    "d['reward_mode']=='last' and d['reward']==d['steps'][1]['reward'] and d['scored_step']==2"
  jcheck "$ad: no final evaluation (workspace unchanged since the last step)" "$E" "d['final_eval'] is False"
  jcheck "$ad: agent wall time recorded, exit 0, not timed out" "$E" \
    "d['agent']['wall_s']>0 and d['agent']['exit_code']==0 and not d['agent']['timed_out']"
  check "$ad: step 1 files kept (the broken line)" grep -q fake-agent-break "$OUT/steps/1/gelu.c"
  check "$ad: final kernel is step 2's (erff)" grep -q "erff(" "$OUT/final/gelu.c"
  check "$ad: transcript is JSON lines" python3 -c "
import json,sys
lines=[l for l in open(sys.argv[1]) if l.strip()]
assert len(lines)>=4, len(lines)
[json.loads(l) for l in lines]" "$OUT/transcript.jsonl"
  check "$ad: transcript holds the envctl step output" grep -q "status COMPILE_ERROR" "$OUT/transcript.jsonl"
  jcheck "$ad: the agent saw KA_SERVER (step proxy), KA_EPISODE, KA_WORKSPACE, KA_FILES" "$WORK/$ad.argv.json" \
    "d['env']['KA_SERVER'].startswith('ipc:///tmp/ka-agent-') and d['env']['KA_EPISODE'].startswith('ep-') and d['env']['KA_FILES']=='gelu.c' and d['cwd']==d['env']['KA_WORKSPACE'] and d['has_ka_prompt']"
  jcheck "$ad: the prompt was handed over (task text and rules)" "$WORK/$ad.argv.json" \
    "'GELU' in d['prompt'] and '## Rules' in d['prompt']"
  jcheck "$ad: workspace last_result.json is step 2" "$OUT/workspace/.kernelarena/last_result.json" \
    "d['step']==2 and d['status']=='OK'"
}

case $CASE in
claude)
  cli_case claude_code --set model=claude-test-model --set effort=high
  E=$WORK/claude_code/episode.json
  jcheck "claude: --print --output-format stream-json --verbose, model, effort, permission mode" \
    "$WORK/claude_code.argv.json" \
    "a[a.index('--output-format')+1]=='stream-json' and '--print' in a and '--verbose' in a and a[a.index('--model')+1]=='claude-test-model' and a[a.index('--effort')+1]=='high' and a[a.index('--permission-mode')+1]=='bypassPermissions'"
  jcheck "claude: tokens from the result event" "$E" \
    "d['agent']['usage']=={'input_tokens':1200,'output_tokens':450,'cache_read_input_tokens':4000,'cache_creation_input_tokens':300}"
  jcheck "claude: cost from total_cost_usd" "$E" "abs(d['agent']['cost_usd']-0.0123)<1e-12"
  jcheck "claude: num_turns and model from the transcript" "$E" \
    "d['agent']['num_turns']==5 and d['agent']['model_reported']=='claude-test-model'"
  # reward: best, where the last step is worse than an earlier one
  export FAKE_AGENT_PLAN=fast,step,break,step
  AGENT --adapter claude_code --reward best \
    --set permission_mode=acceptEdits --out "$WORK/best" >"$WORK/best.out" 2>&1
  check "claude best: exits 0" [ $? -eq 0 ]
  unset FAKE_AGENT_PLAN
  jcheck "claude best: reward is step 1's (OK), not the last (COMPILE_ERROR)" "$WORK/best/episode.json" \
    "d['reward_mode']=='best' and d['scored_step']==1 and d['reward']==d['steps'][0]['reward'] and d['reward']>120 and d['steps'][1]['reward']==0"
  check "claude best: final kernel is step 1's" sh -c "! grep -q fake-agent-break '$WORK/best/final/gelu.c'"
  ;;
codex)
  cli_case codex --set model=gpt-test --set effort=high
  E=$WORK/codex/episode.json
  jcheck "codex: exec --json --cd WORKSPACE, model, reasoning effort, prompt on stdin" "$WORK/codex.argv.json" \
    "a[1]=='exec' and '--json' in a and a[a.index('--cd')+1]==d['env']['KA_WORKSPACE'] and a[a.index('--model')+1]=='gpt-test' and 'model_reasoning_effort=\"high\"' in a and a[-1]=='-'"
  jcheck "codex: tokens from turn.completed" "$E" \
    "d['agent']['usage']=={'input_tokens':5000,'cached_input_tokens':3000,'output_tokens':700}"
  jcheck "codex: no cost reported -> null" "$E" "d['agent']['cost_usd'] is None"
  ;;
cursor)
  cli_case cursor --set model=cursor-test
  E=$WORK/cursor/episode.json
  jcheck "cursor: --print --output-format stream-json --force, model, prompt as argument" "$WORK/cursor.argv.json" \
    "'--print' in a and a[a.index('--output-format')+1]=='stream-json' and '--force' in a and a[a.index('--model')+1]=='cursor-test' and a[-1]==d['prompt']"
  jcheck "cursor: no usage or cost reported" "$E" "d['agent']['usage']=={} and d['agent']['cost_usd'] is None"
  jcheck "cursor: the recorded argv hides the prompt" "$E" "d['agent']['argv'][-1]=='<prompt>'"
  ;;
command)
  OUT=$WORK/command
  # prompt by file and by environment; one step, then an edit without a step (the
  # adapter evaluates the final workspace); the proxy refuses other requests.
  CMD='test -s "$KA_PROMPT_FILE" && grep -q "## Rules" "$KA_PROMPT_FILE" && case "$KA_PROMPT" in *GELU*) ;; *) exit 9 ;; esac &&
echo "broken" >> gelu.c && envctl step;
envctl tasks --server "$KA_SERVER"; echo "tasks-rc=$?";
envctl step --episode ep-0000000000000000; echo "other-episode-rc=$?";
cp "$KA_WORKSPACE/../steps/1/gelu.c" /dev/null && sed -i "/^broken$/d; s/erf(/erff(/" gelu.c; echo agent-done'
  AGENT --adapter command --set "command=$CMD" --reward best --out "$OUT" >"$WORK/c.out" 2>&1
  rc=$?
  cat "$WORK/c.out" "$OUT/transcript.txt" "$OUT/agent.stderr"
  E=$OUT/episode.json
  check "command: exits 0" [ "$rc" -eq 0 ]
  check "command: the command ran to its end (prompt file and env were there)" grep -q agent-done "$OUT/transcript.txt"
  jcheck "command: 2 steps: the agent's (COMPILE_ERROR) and the adapter's final evaluation (OK)" "$E" \
    "d['n_steps']==2 and d['steps'][0]['by']=='agent' and d['steps'][0]['status']=='COMPILE_ERROR' and d['steps'][1]['by']=='adapter' and d['steps'][1]['status']=='OK' and d['final_eval'] is True"
  jcheck "command: best reward is the final evaluation's" "$E" "d['scored_step']==2 and d['reward']>120"
  check "command: ListTasks through the proxy is refused" sh -c "grep -q 'only Step (envctl step), State of this episode and Health' '$OUT/agent.stderr' && grep -q 'tasks-rc=1' '$OUT/transcript.txt'"
  check "command: a step of another episode is refused" sh -c "grep -q 'belongs to episode' '$OUT/agent.stderr' && grep -q 'other-episode-rc=1' '$OUT/transcript.txt'"
  jcheck "command: refusals recorded no step" "$E" "len(d['steps'])==2"
  # `envctl episode --agent command:CMD` starts its agent through the same process
  # runner: the admin token never reaches the agent's environment
  KA_ADMIN_TOKEN=secret-admin-token "$BIN/envctl" episode --server "$URL" --task host/gelu \
    --seed 5 --workspace "$WORK/ep-ws" --agent 'command:env > agent-env.txt' \
    >"$WORK/ep.out" 2>&1
  rc=$?
  check "episode command agent: exits 0, its environment written, without KA_ADMIN_TOKEN" \
    sh -c "[ $rc -eq 0 ] && grep -q '^KA_EPISODE=' '$WORK/ep-ws/agent-env.txt' && ! grep -q 'KA_ADMIN_TOKEN' '$WORK/ep-ws/agent-env.txt'"
  [ $rc -eq 0 ] || cat "$WORK/ep.out"
  grep -H KA_ADMIN_TOKEN "$WORK/ep-ws/agent-env.txt"
  # agent configs that cannot run, and a server that is not there: refused before any
  # request, so the server records no episode and no --out folder is made
  nep() { "$BIN/envctl" export --server "$URL" --run default --no-files | wc -l; }
  n0=$(nep)
  bad() { # bad NAME EXIT TEXT ARGS...: exit code, the message, nothing recorded
    name=$1 want=$2 text=$3
    shift 3
    AGENT --out "$WORK/bad-$name" "$@" >"$WORK/bad-$name.out" 2>&1
    rc=$?
    check "$name: exit $want, says '$text', no --out folder" \
      sh -c "[ $rc -eq $want ] && grep -qF \"\$1\" '$WORK/bad-$name.out' && [ ! -e '$WORK/bad-$name' ]" _ "$text" ||
      cat "$WORK/bad-$name.out"
  }
  bad "unknown adapter" 2 "unknown adapter 'bogus:x' (claude_code, codex, cursor, command, replay)" \
    --adapter bogus:x
  bad "command adapter without a command" 2 "adapter command needs command: CMD" --adapter command
  bad "a CLI that is not installed" 2 "adapter codex: the agent CLI 'no-such-codex' was not found on PATH" \
    --adapter codex --set bin=no-such-codex
  bad "replay of a missing path" 2 "replay $WORK/nope: no such path" --adapter replay \
    --set "replay=$WORK/nope"
  bad "replay of a folder without steps" 2 "no recorded steps (neither steps/1/ nor 1/ there)" \
    --adapter replay --set "replay=$WORK"
  bad "a misspelt setting" 2 "unknown agent setting 'tmeout_s'" --adapter command \
    --set "command=envctl step" --set tmeout_s=5
  bad "a timeout that is not a number" 2 "agent setting timeout_s must be a whole number" \
    --adapter command --set "command=envctl step" --set timeout_s=abc
  # (n0 >= 1: the command episode above is in the store, so the count is a real one)
  check "refused configs: the server recorded no episode (still $n0)" \
    sh -c "[ $n0 -ge 1 ] && [ \$1 -eq $n0 ]" _ "$(nep)"
  # an unreachable --server: says which address, and how to start one (in seconds, not
  # after the 900 s request timeout)
  "$BIN/envctl" agent --server "ipc://$WORK/no-server.ipc" --task host/gelu --set "command=envctl step" \
    --out "$WORK/bad-server" >"$WORK/bad-server.out" 2>&1
  rc=$?
  cat "$WORK/bad-server.out"
  check "unreachable --server: exit 1, names the address, suggests starting a server, no --out folder" \
    sh -c "[ $rc -eq 1 ] && grep -qF 'cannot reach an envserver at ipc://$WORK/no-server.ipc: no answer within 10 s. Is it running? Start one' '$WORK/bad-server.out' && [ ! -e '$WORK/bad-server' ]"
  ;;
replay)
  # a recording: step 1 does not compile, step 2 is the erff version
  OUT=$WORK/rec
  mkdir -p "$OUT/steps/1" "$OUT/steps/2"
  { cat "$SRC/tasks/host/gelu/baseline/gelu.c"; echo "broken"; } >"$OUT/steps/1/gelu.c"
  sed "s/erf(/erff(/" "$SRC/tasks/host/gelu/baseline/gelu.c" >"$OUT/steps/2/gelu.c"
  # replay of the recorded episode folder, and of a JSONL export
  AGENT --adapter replay --set "replay=$OUT" --out "$WORK/replay" >"$WORK/r.out" 2>&1
  check "replay (folder): exits 0" [ $? -eq 0 ]
  jcheck "replay (folder): the recording's steps in order" "$WORK/replay/episode.json" \
    "[s['status'] for s in d['steps']]==['COMPILE_ERROR','OK'] and d['adapter']=='replay' and d['status']=='completed'"
  python3 - "$OUT/steps" "$WORK/export.jsonl" <<'PY'
import json, sys
src, dst = sys.argv[1], sys.argv[2]
with open(dst, "w") as f:
    f.write(json.dumps({"episode": "header line without files"}) + "\n")
    for n in (2, 1):
        f.write(json.dumps({"step": n, "files": [{"path": "gelu.c", "content": open("%s/%d/gelu.c" % (src, n)).read()}]}) + "\n")
PY
  AGENT --adapter replay --set "replay=$WORK/export.jsonl" --out "$WORK/replay2" >"$WORK/r2.out" 2>&1
  check "replay (JSONL): exits 0" [ $? -eq 0 ]
  jcheck "replay (JSONL): the lines' steps in file order" "$WORK/replay2/episode.json" \
    "[s['status'] for s in d['steps']]==['OK','COMPILE_ERROR']"
  # the episode lines of `envctl export`: {"id", "steps": [{"step", "files": {...}}]}; the
  # episode named by replay_episode is taken
  python3 - "$OUT/steps" "$WORK/export2.jsonl" <<'PY'
import json, sys
src, dst = sys.argv[1], sys.argv[2]
f = lambda n: {"gelu.c": open("%s/%d/gelu.c" % (src, n)).read()}
with open(dst, "w") as o:
    o.write(json.dumps({"id": "ep-other", "steps": [{"step": 1, "files": f(1)}]}) + "\n")
    o.write(json.dumps({"id": "ep-wanted", "steps": [{"step": 1, "files": f(2)},
                                                     {"step": 2, "files": f(1)},
                                                     {"step": 3, "files": f(2)}]}) + "\n")
PY
  AGENT --adapter replay --set "replay=$WORK/export2.jsonl" --set replay_episode=ep-wanted \
    --out "$WORK/replay4" >"$WORK/r4.out" 2>&1
  check "replay (export JSONL): exits 0" [ $? -eq 0 ]
  jcheck "replay (export JSONL): the chosen episode's 3 steps in order" "$WORK/replay4/episode.json" \
    "[s['status'] for s in d['steps']]==['OK','COMPILE_ERROR','OK']"
  # a file that is not UTF-8 (a Latin-1 byte in a comment), as `envctl export` writes it
  # ({"base64": ...}): decoded into the workspace and submitted, byte for byte
  python3 - "$OUT/steps" "$WORK/export5.jsonl" <<'PY'
import base64, json, sys
src, dst = sys.argv[1], sys.argv[2]
data = open("%s/2/gelu.c" % src, "rb").read() + b"/* caf\xe9 */\n"
with open(dst, "w") as o:
    o.write(json.dumps({"id": "ep-bin", "steps": [{"step": 1, "files": {"gelu.c": {"base64": base64.b64encode(data).decode()}}},
                                                  {"step": 2, "files": {"gelu.c": {"base64": "@@not base64@@"}}}]}) + "\n")
PY
  AGENT --adapter replay --set "replay=$WORK/export5.jsonl" --out "$WORK/replay5" >"$WORK/r5.out" 2>&1
  jcheck "replay (export JSONL, a binary file): decoded and scored OK; base64 that does not decode ends the replay with the reason" \
    "$WORK/replay5/episode.json" \
    "[s['status'] for s in d['steps']]==['OK'] and 'does not decode' in (d['agent'].get('error') or '')" "d.get('agent'), d.get('steps')"
  # a JSONL recording without any step's files: read only once the episode runs, so
  # recorded with the reason
  echo '{"episode": "a header line without files"}' >"$WORK/nofiles.jsonl"
  AGENT --adapter replay --set "replay=$WORK/nofiles.jsonl" --out "$WORK/replay3" >"$WORK/r3.out" 2>&1
  check "replay of a recording without files: exit 0 but no steps, recorded with the reason" \
    python3 -c "import json;d=json.load(open('$WORK/replay3/episode.json'));assert d['status']=='no_steps' and d['reward']==0 and 'no recorded steps with files' in d['agent']['error'], d.get('agent')"
  ;;
timeout)
  OUT=$WORK/hang
  export FAKE_AGENT_PLAN=fast,spawn,step,sleep FAKE_IGNORE_TERM=1 FAKE_PIDFILE="$WORK/pids"
  # 10 s: the fake CLI makes its step within about a second (3 s under load)
  AGENT --adapter claude_code --set timeout_s=10 --out "$OUT" >"$WORK/h.out" 2>&1
  rc=$?
  cat "$WORK/h.out"
  check "timeout: exits 0 (a timed-out agent is a result, not an error)" [ "$rc" -eq 0 ]
  jcheck "timeout: timed_out recorded, exit code -1" "$OUT/episode.json" \
    "d['agent']['timed_out'] is True and d['agent']['exit_code']==-1"
  # the step is recorded even if the time limit struck while it was being evaluated
  jcheck "timeout: the step made before the hang is scored" "$OUT/episode.json" \
    "d['n_steps']==1 and d['steps'][0]['status']=='OK' and d['status']=='completed'"
  check "timeout: the hanging agent left its pids" test -s "$WORK/pids"
  # gone: no such process, or a zombie that init has not reaped yet (killed, not running);
  # SIGKILL takes effect asynchronously, so allow the kernel a moment to tear it down
  gone() {
    for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
      kill -0 "$1" 2>/dev/null || return 0
      [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ] && return 0
      sleep 0.1
    done
    ps -o pid,ppid,pgid,stat,cmd -p "$1"
    return 1
  }
  for pid in $(cat "$WORK/pids"); do
    check "timeout: process $pid of the agent's group (the CLI, a child, a child ignoring SIGTERM) is gone" gone "$pid"
  done
  ;;
*)
  echo "unknown case $CASE"
  exit 2
  ;;
esac
exit $fail
