#!/bin/sh
# Where a step's time goes outside the runner, for builds side by side in one run (issue
# 15): for each build NAME=BIN_DIR of BUILDS, a warm envserver + gpuexec (--verbose) on a
# fresh state folder, one episode of TASK with the baseline agent, STEPS steps, and per
# step: the client's latency (between successive "step N:" lines of envctl --verbose),
# the executor's phase line (runner, judging, and how many cases were compared while the
# runner timed), and the rest: latency - runner - judging (inputs, the runner's start,
# envserver, transport, cleanup before the result was sent). Prints a table last, with
# the median of each column over steps 2.. (step 1 computes the references, and its
# latency is not measured: envctl's first lines reach the pipe with its step line). The
# client's clock reads lines as envctl flushes them: "rest" is good to about +-15 ms, for
# overheads of tens of milliseconds (the GPU's), not for the host's few.
#   host:   BUILDS="old=/tmp/base/bin new=build/bin" sh bench/step_overhead.sh
#   device: BACKENDS=cuda TASK=hip2hip/gelu OUT=$OUT sh bench/step_overhead.sh (carry build/bin)
# env: BUILDS (default new=build/bin), TASK (default host/gelu), STEPS (default 4),
#      BACKENDS (default host), OUT (default /tmp/ka-out), GXARGS (more gpuexec flags).
set -u
OUT=${OUT:-/tmp/ka-out}
BUILDS=${BUILDS:-"new=build/bin"}
TASK=${TASK:-host/gelu}
STEPS=${STEPS:-4}
BACKENDS=${BACKENDS:-host}
GXARGS=${GXARGS:-}
mkdir -p "$OUT"
rows=$OUT/overhead_rows.txt
: >"$rows"
for spec in $BUILDS; do
  name=${spec%%=*} bin=${spec#*=}
  st=$(mktemp -d "${TMPDIR:-/tmp}/ka-overhead-XXXXXX")
  "$bin/envserver" --state "$st" --tasks tasks --quiet >"$st/server.log" 2>&1 &
  sv=$!
  # shellcheck disable=SC2086
  "$bin/gpuexec" --server "ipc://$st/exec.ipc" --tasks tasks --backends "$BACKENDS" --verbose \
    $GXARGS >"$st/gpuexec.log" 2>&1 &
  gx=$!
  i=0
  until "$bin/envctl" health --server "ipc://$st/env.ipc" --timeout 2 2>/dev/null |
    grep -q "executors=[1-9]"; do
    i=$((i + 1))
    [ $i -gt 150 ] && { echo "step_overhead: $name did not come up"; cat "$st"/*.log; exit 1; }
    sleep 0.2
  done
  "$bin/envctl" episode --server "ipc://$st/env.ipc" --task "$TASK" --max-steps "$STEPS" \
    --seed 5 --verbose 2>&1 |
    while IFS= read -r l; do printf '%s %s\n' "$(date +%s.%N)" "$l"; done >"$OUT/overhead_$name.txt"
  kill "$gx" "$sv" 2>/dev/null
  wait "$gx" "$sv" 2>/dev/null
  cp "$st/gpuexec.log" "$OUT/overhead_${name}_gpuexec.log"
  rm -rf "$st"
  # one row per step: build step latency_ms runner_ms judging_ms early
  awk -v b="$name" '
    $2 == "episode" && !seen { prev = $1; seen = 1 }
    /executor: inputs/ {
      for (i = 1; i <= NF; i++) {
        if ($i == "(references" ) run = $(i + 2)
        if ($i == "judging") judge = $(i + 1)
      }
      early = "-"
      if (match($0, /\(([0-9]+) of ([0-9]+) cases compared/)) early = substr($0, RSTART + 1, RLENGTH - 17)
    }
    $2 == "step" && $3 ~ /^[0-9]+:$/ {
      n = $3; sub(":", "", n)
      lat = ($1 - prev) * 1e3; prev = $1
      pend[n] = lat; have[n] = 1
    }
    # the executor line comes after its "step N:" line: print at the next step or the end
    $2 == "step" && $3 ~ /^[0-9]+:$/ && last != "" { print b, last, pend[last], run0, judge0, early0 }
    $2 == "step" && $3 ~ /^[0-9]+:$/ { last = n; run0 = ""; judge0 = ""; early0 = "" }
    /executor: inputs/ { run0 = run; judge0 = judge; early0 = early }
    END { if (last != "") print b, last, pend[last], run0, judge0, early0 }' \
    "$OUT/overhead_$name.txt" >>"$rows"
done
echo "== step time outside the runner (ms; task $TASK, backend $BACKENDS, $STEPS steps)"
printf '%-6s %-5s %10s %10s %10s %10s %s\n' build step latency runner judging rest compared_early
awk '{ rest = $3 - $4 - $5; printf "%-6s %-5s %10.1f %10.1f %10.1f %10.1f %s\n", $1, $2, $3, $4, $5, rest, $6 }' "$rows"
echo "== medians over steps 2..$STEPS"
for spec in $BUILDS; do
  name=${spec%%=*}
  awk -v b="$name" '$1 == b && $2 > 1 { n++; l[n] = $3; r[n] = $4; j[n] = $5; x[n] = $3 - $4 - $5 }
    function med(a, n,   i, k, t) { for (i = 2; i <= n; i++) { t = a[i]; for (k = i - 1; k >= 1 && a[k] > t; k--) a[k + 1] = a[k]; a[k + 1] = t } return n ? a[int((n + 1) / 2)] : 0 }
    END { printf "%-6s latency %.1f  runner %.1f  judging %.1f  rest %.1f\n", b, med(l, n), med(r, n), med(j, n), med(x, n) }' "$rows"
done
