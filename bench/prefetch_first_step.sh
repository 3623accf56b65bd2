#!/bin/sh
# The first step's latency with and without the reference prefetch at Reset (issue 15;
# docs/protocol.md, Job.prefetch), side by side on the same binaries in one run.
#
# Two warm stacks side by side, envserver + gpuexec each on a fresh state folder (prefetch:
# gpuexec as it is; no-prefetch: gpuexec --no-prefetch); for each task of TASKS, REPEATS episodes
# of one step each, every one with a seed of its own (so every first step is cold in the
# executor's cache), whose agent pauses PAUSE seconds after Reset (a command agent:
# sleep PAUSE), as a policy thinking before its first submission does, alternating between
# the stacks. A row per step:
# the client's wait for the step (from the end of the agent's pause to envctl's "step 1:"
# line, on this machine's clock) and the executor's "inputs" and "references" times from
# the step's runtime log. Prints a table last (medians per task and mode); raw logs
# under $OUT.
#   here (host backend):  sh bench/prefetch_first_step.sh
#   device run:           OUT=$OUT BACKENDS=cuda TASKS="hip2hip/gelu hip2hip/softmax \
#                         hip2hip/rmsnorm" sh bench/prefetch_first_step.sh  (carry: build/bin)
set -u
OUT=${OUT:-/tmp/ka-prefetch-bench}
BIN=${BIN:-build/bin}
BACKENDS=${BACKENDS:-host}
TASKS=${TASKS:-"host/gelu host/softmax host/rmsnorm"}
REPEATS=${REPEATS:-3}
PAUSE=${PAUSE:-1}
mkdir -p "$OUT"
R=$(pwd)
case $BIN in /*) ;; *) BIN=$R/$BIN ;; esac

# prints "epoch line" for every line read (the client's clock)
stamp() { while IFS= read -r l; do printf '%s %s\n' "$(date +%s.%N)" "$l"; done; }

start_server() { # mode state [gpuexec flags...]: the stack of mode, its pids in SV_mode, GX_mode
  m=$1 s=$2
  shift 2
  "$BIN/envserver" --state "$s" --tasks tasks --quiet >"$s/server.log" 2>&1 &
  eval "SV_$m=\$!"
  "$BIN/gpuexec" --server "ipc://$s/exec.ipc" --tasks tasks --backends "$BACKENDS" --verbose \
    "$@" >"$s/gpuexec.log" 2>&1 &
  eval "GX_$m=\$!"
  i=0
  until "$BIN/envctl" health --server "ipc://$s/env.ipc" --timeout 2 2>/dev/null |
    grep -q "executors=[1-9]"; do
    i=$((i + 1))
    [ $i -gt 150 ] && { echo "server did not come up"; cat "$s"/*.log; return 1; }
    sleep 0.2
  done
}

stop_servers() {
  # shellcheck disable=SC2154
  kill "$GX_pf" "$SV_pf" "$GX_np" "$SV_np" 2>/dev/null
  wait "$GX_pf" "$SV_pf" "$GX_np" "$SV_np" 2>/dev/null
}

# a row "mode task seed wait_s inputs_ms references_ms status runner_ms" from a stamped
# output (runner_ms: the runner, with the references computed alongside it);
# the wait runs from the "workspace:" line (the Reset answered) plus the pause
row() { # mode task seed file
  awk -v m="$1" -v t="$2" -v sd="$3" -v p="$PAUSE" '
    $2 == "workspace:" { t0 = $1 }
    $2 == "step" && $3 == "1:" { t1 = $1; st = $5; sub(",", "", st) }
    /executor: inputs/ && !inp { for (i = 1; i < NF; i++) { if ($i == "inputs") inp = $(i + 1)
                                   if ($i == "alongside)") run = $(i + 1)
                                   if ($i == "references") refs = $(i + 1) } }
    END { printf "%s %s %s %.3f %s %s %s %s\n", m, t, sd, t1 - t0 - p, inp, refs, st, run }' "$4"
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  host: $(uname -n), $(nproc) cores"
  command -v nvidia-smi >/dev/null &&
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1
  echo "backends: $BACKENDS  tasks: $TASKS  repeats: $REPEATS  pause after Reset: $PAUSE s"
} | tee "$OUT/bench.txt"
: >"$OUT/rows"
# both stacks run side by side and the episodes alternate between them (which goes first
# alternating too), so that both modes see the same load on the machine
ST_pf=$(mktemp -d) ST_np=$(mktemp -d)
start_server pf "$ST_pf" || exit 1
start_server np "$ST_np" --no-prefetch || exit 1
for task in $TASKS; do
  r=1
  while [ $r -le "$REPEATS" ]; do
    seed=$((7000 + r))
    order="pf np"
    [ $((r % 2)) -eq 0 ] && order="np pf"
    for m in $order; do
      mode=prefetch
      [ $m = np ] && mode=no-prefetch
      eval "st=\$ST_$m"
      f=$OUT/${mode}_$(echo "$task" | tr / _)_$r.txt
      # shellcheck disable=SC2154
      stdbuf -oL "$BIN/envctl" episode --server "ipc://$st/env.ipc" --task "$task" --seed $seed \
        --max-steps 1 --verbose --agent "command:sleep $PAUSE" 2>&1 | stamp >"$f"
      row "$mode" "$task" "$seed" "$f" >>"$OUT/rows"
    done
    r=$((r + 1))
  done
done
cp "$ST_pf/gpuexec.log" "$OUT/gpuexec_prefetch.log" 2>/dev/null
cp "$ST_np/gpuexec.log" "$OUT/gpuexec_no-prefetch.log" 2>/dev/null
stop_servers
rm -rf "$ST_pf" "$ST_np"

echo
echo "== first step after a ${PAUSE} s pause (medians of $REPEATS; wait: client side, seconds)"
echo "task                     mode         n  wait_s  inputs_ms  references_ms  runner_ms  statuses"
awk '
  function med(a, n,   i, j, x) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
      if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
    return n ? a[int((n + 1) / 2)] : 0 }
  { k = $2 " " $1; if (!(k in n)) o[++nk] = k; n[k]++
    w[k, n[k]] = $4; in_[k, n[k]] = $5; rf[k, n[k]] = $6; rn[k, n[k]] = $8; st[k] = st[k] (st[k] == "" ? "" : ",") $7 }
  END { for (i = 1; i <= nk; i++) { k = o[i]; m = n[k]
          delete a; for (j = 1; j <= m; j++) a[j] = w[k, j]; mw = med(a, m)
          delete a; for (j = 1; j <= m; j++) a[j] = in_[k, j]; mi = med(a, m)
          delete a; for (j = 1; j <= m; j++) a[j] = rf[k, j]; mr = med(a, m)
          delete a; for (j = 1; j <= m; j++) a[j] = rn[k, j]; mn = med(a, m)
          split(k, kk, " "); ss = st[k]; gsub(/OK,?/, "", ss)
          printf "%-24s %-12s %-2d %-7.3f %-10.1f %-14.1f %-10.1f %s\n", kk[1], kk[2], m, mw, mi, mr, mn,
                 (ss == "" ? "all OK" : st[k]) } }' "$OUT/rows" | sort -k1,1 -k2,2r | tee "$OUT/table.txt"
