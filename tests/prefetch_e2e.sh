#!/bin/sh
# The reference prefetch at Reset (issue 15; docs/protocol.md, Job.prefetch) end to end on
# the host backend: envserver + gpuexec --verbose + envctl, host/gelu. An episode whose
# agent pauses 1 s after Reset (a command agent: sleep 1) finds its first step's
# correctness inputs and references in the executor's cache: the step's runtime log says
# "of which references X ms" with X near 0 and gpuexec's log has the prefetch done before
# the step's job; the same episode on an executor started with --no-prefetch computes
# them in the step (X well above). Both steps are OK with the same reward, the prefetch
# is no step (one step recorded) and Health counts it.
# usage: prefetch_e2e.sh BIN_DIR SOURCE_DIR
set -u
BIN=$1
SRC=$2
. "$SRC/tests/lib.sh" # check, cleanup on EXIT/INT/TERM, ka_stack
ka_init prefetch

ka_task_copy host/gelu

# episode NAME: one episode of host/gelu, seed 4242, its agent pausing 1 s after Reset;
# prints the step's "references" and "inputs" milliseconds as REFS_MS, INPUTS_MS
episode() {
  ka_run "$BIN/envctl" episode --server "$URL" --task host/gelu --seed 4242 --max-steps 1 \
    --verbose --agent "command:sleep 1" >"$WORK/$1.out" 2>&1
  rc=$?
  check "$1: the episode exits 0 (rc $rc)" [ "$rc" -eq 0 ]
  check "$1: its step is OK" grep -q "step 1: status OK" "$WORK/$1.out"
  line=$(grep -o "executor: inputs [0-9.]* ms.*of which references [0-9.]* ms" "$WORK/$1.out" |
    head -n 1)
  INPUTS_MS=$(echo "$line" | sed 's/.*inputs \([0-9.]*\) ms.*/\1/')
  REFS_MS=$(echo "$line" | sed 's/.*of which references \([0-9.]*\) ms.*/\1/')
  check "$1: the step's runtime log has the executor's phase line" [ -n "$line" ]
  echo "  $1: inputs ${INPUTS_MS:-?} ms, references ${REFS_MS:-?} ms"
}

# 1. with prefetch (the default)
ka_stack "$WORK/tasks" -- --verbose
episode prefetch
pf_inputs=$INPUTS_MS pf_refs=$REFS_MS
check "gpuexec ran the prefetch of the episode" \
  grep -Eq "gpuexec: prefetch ep-[0-9a-f]+/prefetch \(host/gelu\): references ready" \
  "$WORK/gpuexec.log"
# the prefetch finished before the step's job came (the agent slept 1 s)
pf_line=$(grep -n "references ready" "$WORK/gpuexec.log" | head -n 1 | cut -d: -f1)
job_line=$(grep -n "gpuexec: .*: job ep-[0-9a-f]*/1 " "$WORK/gpuexec.log" | head -n 1 | cut -d: -f1)
check "the prefetch was done before the step's job started (lines ${pf_line:-?} < ${job_line:-?})" \
  [ "${pf_line:-999999}" -lt "${job_line:-0}" ]
# a hit costs a lookup (inputs: ~0.1 ms here) and a thread that finds the reference done
# (~0.1 ms, more when the machine is loaded: that thread runs at nice 19); drawing
# host/gelu's 3 Mi inputs and computing their reference took 180 and 150 ms here
check "the first step found its inputs in the cache (${pf_inputs:-?} ms < 20 ms)" \
  awk "BEGIN { exit !(${pf_inputs:-999} < 20) }"
check "and its references (${pf_refs:-?} ms < 50 ms)" \
  awk "BEGIN { exit !(${pf_refs:-999} < 50) }"
"$BIN/envctl" health --server "$URL" >"$WORK/health.out" 2>&1
cat "$WORK/health.out"
check "Health counts one prefetch queued and sent" \
  grep -q "prefetches_queued=1 prefetches_sent=1 prefetches_dropped=0" "$WORK/health.out"
ep=$(grep -o "ep-[0-9a-f]*" "$WORK/prefetch.out" | head -n 1)
"$BIN/envctl" export --server "$URL" --episode "$ep" >"$WORK/export.jsonl" 2>&1
check "the prefetch is no step: the episode has one recorded step" \
  python3 -c "import json,sys; e=json.loads(open(sys.argv[1]).readline()); sys.exit(0 if len(e['steps']) == 1 else 1)" "$WORK/export.jsonl"
ka_stop "$GX_PID" "$SRV_PID"
GX_PID="" SRV_PID=""
rm -rf "$WORK/state"

# 2. the same episode without prefetch
ka_stack "$WORK/tasks" -- --verbose --no-prefetch
episode no_prefetch
np_refs=$REFS_MS
check "no prefetch ran with --no-prefetch" sh -c "! grep -q 'gpuexec: prefetch' '$WORK/gpuexec.log'"
check "without prefetch the step drew its inputs (${INPUTS_MS:-?} ms > 20 ms)" \
  awk "BEGIN { exit !(${INPUTS_MS:-0} > 20) }"
check "and computed its references (${np_refs:-?} ms > 5 ms)" \
  awk "BEGIN { exit !(${np_refs:-0} > 5) }"
r1=$(grep -o "reward [0-9.]*" "$WORK/prefetch.out" | head -n 1)
r2=$(grep -o "reward [0-9.]*" "$WORK/no_prefetch.out" | head -n 1)
check "both steps were scored (${r1:-?}, ${r2:-?})" [ -n "$r1" ] && [ -n "$r2" ]

printf '%-12s %10s %14s\n' "executor" "inputs_ms" "references_ms"
printf '%-12s %10s %14s\n' "prefetch" "${pf_inputs:-?}" "${pf_refs:-?}"
printf '%-12s %10s %14s\n' "no-prefetch" "${INPUTS_MS:-?}" "${np_refs:-?}"
exit $fail
