#!/bin/sh
# Command tasks on the GPU (issue 19 items 2 and 5): N task folders of a seed checkout
# (AgentKernelArena's config.yaml format, e.g. its tasks/triton2triton/vllm) run as they
# are through envserver + gpuexec on the cuda backend, prebuilt binaries only (build/bin;
# nothing is built here). Every task gets one episode of one step of its unchanged
# baseline (speedup near 1.0, reward near 220); every task with a candidate of ours in
# tests/candidates/command/TASK/ gets one more, of that candidate. The task folders are
# copied into a temporary folder, never into the repository. Prints a table last: task,
# run, status, speedup, reward, and the seed's own printed figure (its performance
# command's "total time", from the step's log), then a summary line.
#
#   device run: SEED_TASKS=seed/triton2triton/vllm OUT=$OUT sh tests/device/command_h200.sh
#               (carry: build/bin and the seed folder)
#   env: SEED_TASKS  the folder of task folders (required)
#        N           how many tasks (default 20)
#        TASKS       the task folders' names (default: the list below where present,
#                    else the first N folders with a config.yaml)
#        PYBIN       folder of the python3 with torch and triton, put first on the
#                    commands' PATH (gpuexec --command-path; default /opt/torch/.venv/bin)
#        JOBS        episodes and evaluations in flight (gpuexec --jobs-per-device; 4)
#        BUDGET_S    seconds for all the episodes (default 400); episodes not started by
#                    then are reported as SKIPPED
#        BACKENDS    gpuexec --backends (default cuda; host to try the script on a CPU
#                    machine with tests/fixtures/command/tasks/suite/demo)
#        CANDS       the candidates' folder (default tests/candidates/command)
#        GXARGS      more gpuexec flags, e.g. "--command-pairs 3" (docs/tasks.md, "Paired
#                    repeats")
# Writes under $OUT (default /tmp/ka-out): command_server.log, command_gpuexec.log,
# command_rows.txt (a row per run as it ends), command_table.txt, and command_logs.tgz
# (each episode's output, --verbose: logs/command_<task>_<run>.txt).
set -u
OUT=${OUT:-/tmp/ka-out}
N=${N:-20}
PYBIN=${PYBIN:-/opt/torch/.venv/bin}
JOBS=${JOBS:-4}
BUDGET_S=${BUDGET_S:-400}
R=$(pwd)
B=$R/build/bin
CANDS=${CANDS:-$R/tests/candidates/command}
BACKENDS=${BACKENDS:-cuda}
mkdir -p "$OUT"
[ -n "${SEED_TASKS:-}" ] && [ -d "$SEED_TASKS" ] || {
  echo "command_h200: SEED_TASKS must name a folder of task folders"
  exit 2
}
SEED_TASKS=$(cd "$SEED_TASKS" && pwd)
[ -x "$B/gpuexec" ] || {
  echo "command_h200: no prebuilt $B/gpuexec (carry build/bin)"
  exit 2
}
W=$(mktemp -d)
SV=""
GX=""
cleanup() {
  [ -n "$GX" ] && kill "$GX" 2>/dev/null
  [ -n "$SV" ] && kill "$SV" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The 20 tasks of the seed's triton2triton/vllm (d6f7c8a4) whose scripts need nothing the
# seed injects at its own workspace setup (89 of its 118 call its CUDA-graph benchmark
# helper, which the seed writes into the workspace; those fail anywhere else).
DEFAULT="triton_apply_grammar_bitmask triton_apply_write triton_bad_words triton_bincount
triton_causal_conv1d_update triton_combine_sampled_and_draft_tokens
triton_decode_attn_grouped_stage1 triton_decode_attn_stage1 triton_decode_attn_stage2
triton_ep_scatter_1 triton_ep_scatter_2 triton_get_num_sampled_and_rejected
triton_lightning_attn_kv_reduce triton_linear_attn_decode triton_logit_bias triton_min_p
triton_mrope triton_penalties triton_post_update triton_temperature"
list=""
for t in ${TASKS:-$DEFAULT}; do
  [ -f "$SEED_TASKS/$t/config.yaml" ] && list="$list $t"
done
if [ -z "$list" ]; then
  list=$(cd "$SEED_TASKS" && for d in */; do [ -f "$d/config.yaml" ] && echo "${d%/}"; done)
fi
list=$(echo $list | tr ' ' '\n' | head -n "$N")

# The tasks root: the selected folders, copied (ids seed/NAME).
mkdir -p "$W/tasks/seed" "$W/state"
for t in $list; do cp -r "$SEED_TASKS/$t" "$W/tasks/seed/$t"; done
"$B/envctl" tasks --tasks "$W/tasks" >"$OUT/command_tasks.txt" 2>&1

"$B/envserver" --state "$W/state" --tasks "$W/tasks" --quiet >"$OUT/command_server.log" 2>&1 &
SV=$!
# shellcheck disable=SC2086
"$B/gpuexec" --server "ipc://$W/state/exec.ipc" --tasks "$W/tasks" --backends "$BACKENDS" \
  --jobs-per-device "$JOBS" --command-path "$PYBIN" --verbose ${GXARGS:-} \
  >"$OUT/command_gpuexec.log" 2>&1 &
GX=$!
URL=ipc://$W/state/env.ipc
i=0
until "$B/envctl" health --server "$URL" --timeout 2 2>/dev/null | grep -q "executors=[1-9]"; do
  i=$((i + 1))
  [ $i -gt 300 ] && {
    echo "command_h200: the server or the executor did not come up"
    tail -20 "$OUT/command_server.log" "$OUT/command_gpuexec.log"
    exit 1
  }
  sleep 0.2
done

# The runs, in this order (JOBS at a time): the baselines of the tasks that have a
# candidate, 4 other baselines, the candidates (their baselines measured and cached by
# then), the other baselines; so that a budget cut skips baselines, not candidates.
: >"$W/runs"
withc=""
others=""
for t in $list; do
  if [ -d "$CANDS/$t" ]; then withc="$withc $t"; else others="$others $t"; fi
done
for t in $withc; do echo "$t baseline" >>"$W/runs"; done
for t in $(echo $others | tr ' ' '\n' | head -n 4); do echo "$t baseline" >>"$W/runs"; done
for t in $withc; do echo "$t candidate" >>"$W/runs"; done
for t in $(echo $others | tr ' ' '\n' | tail -n +5); do echo "$t baseline" >>"$W/runs"; done
t0=$(date +%s)
# one run: an episode of one step (the candidate's files copied in by the agent)
# Each run's row goes into $OUT/command_rows.txt as soon as it ends, so that a call cut
# short still brings back every finished run; an episode started late gets only what is
# left of the budget (plus 30 s), so that all end by BUDGET_S + 30.
cat >"$W/one.sh" <<'EOS'
t=$1 run=$2
f=$LOGS/command_${t}_$run.txt
left=$((BUDGET_S - ($(date +%s) - T0)))
if [ "$left" -le 0 ]; then
  echo "SKIPPED (budget)" >"$f"
else
  agent="baseline"
  if [ "$run" = candidate ]; then
    agent="command:cp -r $CANDS/$t/. ."
  fi
  "$B/envctl" episode --server "$URL" --task "seed/$t" --seed 1 --max-steps 1 --verbose \
    --workspace "$W/ws-$t-$run" --agent "$agent" --timeout $((left + 30)) >"$f" 2>&1
fi
st=$(sed -n 's/^step 1: status \([A-Z_]*\).*/\1/p' "$f" | head -1)
rw=$(sed -n 's/^step 1: .*reward \([0-9.-]*\).*/\1/p' "$f" | head -1)
sp=$(sed -n 's/^  mean speedup \([0-9.]*\)x.*/\1/p' "$f" | head -1)
seed=$(sed -n 's/.*total time: \([0-9.]*\) ms.*/\1/p' "$f" | tail -1)
grep -q '^SKIPPED' "$f" && st=SKIPPED
[ -z "$st" ] && st=NO_STEP && echo "$t $run: $(grep -m1 'envctl' "$f")" >>"$W/notes"
printf '%-42s %-9s %-14s %-8s %-9s %s\n' "$t" "$run" "${st:-none}" "${sp:--}" "${rw:--}" \
  "${seed:--}" >>"$OUT/command_rows.txt"
EOS
: >"$OUT/command_rows.txt"
LOGS=$W/logs
mkdir -p "$LOGS"
export B OUT URL W CANDS BUDGET_S LOGS
export T0=$t0
xargs -P "$JOBS" -n 2 sh "$W/one.sh" <"$W/runs"
t1=$(date +%s)
alive=no
kill -0 "$GX" 2>/dev/null && alive=yes

# The table.
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  device: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
  echo "seed tasks: $SEED_TASKS ($(echo $list | wc -w) tasks)  python: $PYBIN  jobs: $JOBS  wall: $((t1 - t0)) s"
  printf '%-42s %-9s %-14s %-8s %-9s %s\n' task run status speedup reward seed_total_ms
  # in the order of $W/runs
  while read -r t run; do
    grep -E "^$t +$run " "$OUT/command_rows.txt" | head -1
  done <"$W/runs"
  [ -f "$W/notes" ] && cat "$W/notes"
} >"$OUT/command_table.txt"
ok=$(awk 'NR > 3 && $3 == "OK"' "$OUT/command_table.txt" | wc -l)
# (notes lines, below the rows, have no status in column 3)
total=$(wc -l <"$W/runs")
near=$(awk 'NR > 3 && $2 == "baseline" && $3 == "OK" && $4 >= 0.8 && $4 <= 1.25' "$OUT/command_table.txt" | wc -l)
faster=$(awk 'NR > 3 && $2 == "candidate" && $3 == "OK" && $4 > 1.05' "$OUT/command_table.txt" | wc -l)
tar czf "$OUT/command_logs.tgz" -C "$W" logs 2>/dev/null
cat "$OUT/command_table.txt"
echo "command_h200: $ok of $total runs OK; baselines with speedup in [0.8, 1.25]: $near;" \
  "candidates faster than 1.05x: $faster; gpuexec alive: $alive"
[ "$alive" = yes ] && [ "$ok" -eq "$total" ]
