#!/bin/sh
# Step latency and throughput of a warm server on the GPU machine (issue 15), for one or
# more builds side by side in one run. Prebuilt binaries only (carry them).
#
# For each build NAME=BIN_DIR of BUILDS (default "new=build/bin"): starts envserver and
# gpuexec (cuda backend) on a fresh state folder and waits until the executor is up
# (the server is warm: no start-up inside the figures), then
#   latency:    one episode per task of TASKS with the baseline agent, STEPS steps;
#               each step's latency is the time between successive "step N:" lines that
#               envctl prints (the first from the end of the Reset), so it is what a
#               client waits for a Step, on the clock of this machine; with COLD=1
#               (default) a one-step episode of another seed runs first and its step is
#               the "cold" column (the task's first step on this server: its baseline
#               build and output buffers are new), so that the measured episode's step 1
#               is a new seed's first step on a warm server (what every new GRPO group
#               of a training run gets: inputs drawn, references computed);
#   throughput: for each K of INFLIGHT, K episodes of THRU_TASK at once, THRU_STEPS steps
#               each, the wall time of all of them, and the GPU's busy fraction over it
#               (nvidia-smi utilization.gpu sampled every 100 ms); SEED_GROUP=G gives
#               each G consecutive episodes one seed (GRPO groups; default 1);
#   fidelity:   the baseline agent submits the baseline, so each step's per-case speedup
#               is the baseline timed against itself: its spread over the steps.
# A build named old runs only OLD_TASKS with OLD_STEPS steps and no throughput (the
# build before the pipeline took ~9 s a step). Per build NAME, optional: GXARGS_NAME
# (more gpuexec flags, e.g. "--jobs-per-device 1"), LAT_NAME=0 (no latency episodes),
# INFLIGHT_NAME (its own list of K), ENV_NAME (VAR=VALUE words for gpuexec's environment,
# e.g. "KA_CUDA_FLUSH=read"). A build may appear twice under two names (the same
# binaries with other flags, side by side). Prints tables last; raw logs under $OUT.
#   device run: OUT=$OUT sh bench/step_latency.sh        (carry: build/bin [build-old/bin])
set -u
OUT=${OUT:-/tmp/ka-out}
BUILDS=${BUILDS:-"new=build/bin"}
TASKS=${TASKS:-"hip2hip/gelu hip2hip/softmax hip2hip/rmsnorm hip2hip/argmax cuda2cuda/matmul_bf16 hip2hip/layernorm"}
STEPS=${STEPS:-20}
BACKENDS=${BACKENDS:-cuda}
OLD_TASKS=${OLD_TASKS:-"hip2hip/gelu hip2hip/argmax"}
OLD_STEPS=${OLD_STEPS:-3}
THRU_TASK=${THRU_TASK:-hip2hip/gelu}
INFLIGHT=${INFLIGHT:-"1 16"}
THRU_STEPS=${THRU_STEPS:-3}
# episodes in flight that share a seed (a GRPO group: one problem, one reference); 1:
# each its own seed, so each first step draws its inputs and computes its reference
SEED_GROUP=${SEED_GROUP:-1}
COLD=${COLD:-1}
mkdir -p "$OUT"
R=$(pwd)

# prints "epoch line" for every line read (the client's clock)
stamp() { while IFS= read -r l; do printf '%s %s\n' "$(date +%s.%N)" "$l"; done; }

# latency rows "build task step seconds status" from a stamped envctl output, t0 = start
latency_rows() { # build task file t0
  awk -v b="$1" -v t="$2" -v t0="$4" '
    BEGIN { prev = t0 }
    $2 == "episode" && !seen { prev = $1; seen = 1 }
    $2 == "step" && $3 ~ /^[0-9]+:$/ {
      n = $3; sub(":", "", n); st = $5; sub(",", "", st)
      printf "%s %s %s %.3f %s\n", b, t, n, $1 - prev, st; prev = $1; seen = 1 }' "$3"
}

# self-speedups "build task case speedup" of every step (the baseline against itself)
speedup_rows() { # build task file
  awk -v b="$1" -v t="$2" '
    NF >= 8 && $3 == "yes" && $NF ~ /x$/ { s = $NF; sub("x", "", s); print b, t, $2, s }' "$3"
}

# one row "build K n runner refs judge waits device_open builds alone" of medians (ms) over
# the steps of a throughput run, from their runtime logs (envctl --verbose) on stdin:
# the executor's runner wall (references alongside), its reference and judging time, the
# runner's device lock waits (summed over the cases), its device open (a warm runner: the
# job's part of it) and two builds, and how many steps were evaluated again alone (a
# neighbour verdict: the device serialized)
thru_breakdown() { # build K
  awk -v b="$1" -v k="$2" '
    function med(a, n,   i, j, x) { if (!n) return -1
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
      return a[int((n + 1) / 2)] }
    function num(after,   m) { if (!match($0, after " [0-9.]+")) return 0
      m = substr($0, RSTART, RLENGTH); match(m, /[0-9.]+$/); return substr(m, RSTART) + 0 }
    /runner: device opened/ { op[++no] = num("(device opened|job.s part)"); bd[no] = num("baseline build") + num("candidate build") }
    /phases \(/ { w += num("device lock waits") }
    /executor: inputs/ { rn[++ne] = num("alongside[)]"); rf[ne] = num("of which references"); jd[ne] = num("judging")
      wt[ne] = w; w = 0 }
    /evaluated again alone/ { alone++ }
    END { printf "%-5s %-3s %-4d %-8.1f %-8.1f %-8.1f %-8.1f %-8.1f %-8.1f %d\n", b, k, ne, med(rn, ne), med(rf, ne),
            med(jd, ne), med(wt, ne), med(op, no), med(bd, no), alone }'
}

start_server() { # bin state [gpuexec flags...]
  b=$1 s=$2
  shift 2
  "$b/envserver" --state "$s" --tasks tasks --quiet >"$s/server.log" 2>&1 &
  SV=$!
  # shellcheck disable=SC2086
  env $envs "$b/gpuexec" --server "ipc://$s/exec.ipc" --tasks tasks --backends "$BACKENDS" --verbose \
    "$@" >"$s/gpuexec.log" 2>&1 &
  GX=$!
  i=0
  until "$b/envctl" health --server "ipc://$s/env.ipc" --timeout 2 2>/dev/null |
    grep -q "executors=[1-9]"; do
    i=$((i + 1))
    [ $i -gt 150 ] && { echo "server did not come up"; cat "$s"/*.log; return 1; }
    sleep 0.2
  done
}

stop_server() { kill "$GX" "$SV" 2>/dev/null; wait "$GX" "$SV" 2>/dev/null; }

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1
  echo "builds: $BUILDS  steps: $STEPS  inflight: $INFLIGHT x $THRU_STEPS steps of $THRU_TASK"
} | tee "$OUT/bench.txt"
: >"$OUT/lat_rows"
: >"$OUT/cold_rows"
: >"$OUT/thru_rows"
: >"$OUT/thru_parts"
: >"$OUT/speed_rows"
for spec in $BUILDS; do
  name=${spec%%=*}
  bin=$R/${spec#*=}
  st=$(mktemp -d)
  eval "gxa=\${GXARGS_$name:-}; lat=\${LAT_$name:-1}; inflight=\${INFLIGHT_$name:-\$INFLIGHT}"
  eval "envs=\${ENV_$name:-}"
  # shellcheck disable=SC2086,SC2154
  start_server "$bin" "$st" $gxa || continue
  echo "build $name: $bin, gpuexec flags: ${gxa:-none}, environment: ${envs:-none}" | tee -a "$OUT/bench.txt"
  URL="ipc://$st/env.ipc"
  tasks=$TASKS steps=$STEPS
  [ "$name" = old ] && tasks=$OLD_TASKS steps=$OLD_STEPS
  # shellcheck disable=SC2154
  [ "$lat" = 0 ] && tasks=""
  for task in $tasks; do
    f=$OUT/lat_${name}_$(echo "$task" | tr / _).txt
    if [ "$COLD" = 1 ]; then
      t0=$(date +%s.%N)
      stdbuf -oL "$bin/envctl" episode --server "$URL" --task "$task" --seed 10 \
        --max-steps 1 --verbose 2>&1 | stamp >"${f%.txt}_cold.txt"
      latency_rows "$name" "$task" "${f%.txt}_cold.txt" "$t0" >>"$OUT/cold_rows"
    fi
    t0=$(date +%s.%N)
    # line-buffered, so that each line is stamped when envctl prints it
    stdbuf -oL "$bin/envctl" episode --server "$URL" --task "$task" --seed 11 \
      --max-steps "$steps" --verbose 2>&1 | stamp >"$f"
    latency_rows "$name" "$task" "$f" "$t0" >>"$OUT/lat_rows"
    speedup_rows "$name" "$task" "$f" >>"$OUT/speed_rows"
  done
  if [ "$name" != old ]; then
    for k in $inflight; do
      nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 100 \
        >"$OUT/util_${name}_$k.txt" 2>/dev/null &
      SM=$!
      t0=$(date +%s.%N)
      i=0
      pids=""
      while [ $i -lt "$k" ]; do
        "$bin/envctl" episode --server "$URL" --task "$THRU_TASK" --seed $((100 + i / SEED_GROUP)) \
          --max-steps "$THRU_STEPS" --verbose >"$OUT/thru_${name}_${k}_$i.txt" 2>&1 &
        pids="$pids $!"
        i=$((i + 1))
      done
      for p in $pids; do wait "$p" 2>/dev/null; done
      t1=$(date +%s.%N)
      kill "$SM" 2>/dev/null
      ok=$(cat "$OUT"/thru_"${name}"_"${k}"_*.txt | grep -c "^step [0-9]*: status OK")
      busy=$(awk '{s += $1; n++} END {printf "%.1f", n ? s / n : 0}' "$OUT/util_${name}_$k.txt")
      echo "$name $k $((k * THRU_STEPS)) $ok $(echo "$t0 $t1" | awk '{printf "%.2f", $2 - $1}') $busy" \
        >>"$OUT/thru_rows"
      cat "$OUT"/thru_"${name}"_"${k}"_*.txt | thru_breakdown "$name" "$k" >>"$OUT/thru_parts"
    done
  fi
  grep -h "phases" "$OUT"/lat_"${name}"_*.txt | head -40 >"$OUT/phases_$name.txt"
  cp "$st/gpuexec.log" "$OUT/gpuexec_$name.log" 2>/dev/null
  stop_server
done

echo
PHASE_BUILD=${PHASE_BUILD:-$(echo "$BUILDS" | awk '{split($1, a, "="); print a[1]}')}
echo "== phase lines of the last step of each task (build $PHASE_BUILD)"
for task in $TASKS; do
  f=$OUT/lat_${PHASE_BUILD}_$(echo "$task" | tr / _).txt
  [ -f "$f" ] || continue
  echo "-- $task"
  grep -E "runner: device|phases|setup: maps|executor: inputs" "$f" | tail -"${PHASE_LINES:-8}" |
    sed 's/^.*\[kernelarena\] //; s/^ *//' | cut -c1-300
done
echo
echo "== step latency (seconds, client side; step 1 includes the first reference computation"
echo "   of its seed; cold: the task's first step on this server, a one-step episode before)"
echo "build task                    steps  p50     p90     p99/max  mean_2+  cold     statuses"
awk -v cf="$OUT/cold_rows" '
  BEGIN { while ((getline l < cf) > 0) { split(l, c, " "); cold[c[1] " " c[2]] = c[4] } }
  function sortn(a, n,   i, j, x) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x } }
  function q(a, n, p,   k) { k = int(p * (n - 1) + 0.5) + 1; return a[k] }
  { key = $1 " " $2; if (!(key in n)) order[++nk] = key; n[key]++; v[key, n[key]] = $4
    if ($3 > 1) { s2[key] += $4; c2[key]++ } st[key] = st[key] (st[key] == "" ? "" : ",") $5 }
  END { for (i = 1; i <= nk; i++) { k = order[i]; m = n[k]; delete a
          for (j = 1; j <= m; j++) a[j] = v[k, j]; sortn(a, m)
          split(k, kk, " "); ss = st[k]; gsub(/OK,/, "", ss)
          printf "%-5s %-24s %-6d %-7.3f %-7.3f %-8.3f %-8.3f %-8s %s\n", kk[1], kk[2], m, q(a, m, 0.5), q(a, m, 0.9), a[m], c2[k] ? s2[k] / c2[k] : 0, (k in cold ? cold[k] : "-"), (ss == "OK" ? "all OK" : st[k]) } }' \
  "$OUT/lat_rows"
echo
echo "== throughput (K episodes in flight on $THRU_TASK, $SEED_GROUP per seed)"
echo "build K   steps  ok  wall_s  steps/s  gpu_busy_%"
awk '{printf "%-5s %-3s %-6s %-3s %-7s %-8.2f %s\n", $1, $2, $3, $4, $5, $3 / $5, $6}' "$OUT/thru_rows"
echo "-- per step, medians in ms (runner: the executor's runner wall, references alongside; waits:"
echo "   the runner's device lock waits; alone: steps evaluated again alone on the device)"
echo "build K   n    runner   refs     judge    waits    dev_open builds   alone"
cat "$OUT/thru_parts"
echo
echo "== timing fidelity: the baseline against itself (per task and case over the steps)"
echo "build task                    case        n   median   min     max     within_0.3%"
awk '
  { k = $1 " " $2 " " $3; if (!(k in n)) o[++nk] = k; n[k]++; v[k, n[k]] = $4 }
  END { for (i = 1; i <= nk; i++) { k = o[i]; m = n[k]; delete a; w = 0
          for (j = 1; j <= m; j++) { a[j] = v[k, j]; if (a[j] >= 0.997 && a[j] <= 1.003) w++ }
          for (x = 1; x <= m; x++) for (y = x + 1; y <= m; y++) if (a[y] < a[x]) { t = a[x]; a[x] = a[y]; a[y] = t }
          split(k, kk, " ")
          printf "%-5s %-24s %-11s %-3d %-8.4f %-7.4f %-7.4f %d/%d\n", kk[1], kk[2], kk[3], m, a[int((m + 1) / 2)], a[1], a[m], w, m } }' \
  "$OUT/speed_rows"
