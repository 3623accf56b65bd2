#!/bin/sh
# Issue 6 on the H200: `envctl run` with the command adapter over the GELU GPU tasks,
# two runs of the same config shape: A submits the baseline unchanged, B copies the
# vectorized candidates (tests/candidates/{cuda,hip}_gelu) -- a deliberately better agent.
# Each run: 2 tasks x 3 repeats, paired seeds. Run from the repository root, build
# carried:   device run: sh tests/device/agents_h200.sh   (carry: build)
# Writes the run folders under $OUT/runs and prints a short table last.
set -u
OUT=${OUT:-/tmp/ka-out}
mkdir -p "$OUT"
ROOT=$(pwd)
LOG=$OUT/agents_h200.log
: >"$LOG"
say() { echo "$@" | tee -a "$LOG"; }
say "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | tee -a "$LOG"
for which in A B; do
  if [ $which = A ]; then
    CMD='envctl step'
    LABEL=baseline-agent
  else
    CMD="case \$KA_TASK in cuda2cuda/*) cp $ROOT/tests/candidates/cuda_gelu/* . ;; hip2hip/*) cp $ROOT/tests/candidates/hip_gelu/* . ;; esac; envctl step"
    LABEL=vectorized-agent
  fi
  cat >"$OUT/run$which.yaml" <<YAML
label: $LABEL
run: h200-$which
agent:
  adapter: command
  command: '$CMD'
  timeout_s: 300
tasks: [cuda2cuda/gelu, hip2hip/gelu]
repeats: 3
reward: best
max_steps: 3
seed: 1
parallel: 1
YAML
  say "=== run $which: $CMD"
  build/bin/envctl run --config "$OUT/run$which.yaml" --runs-dir "$OUT/runs" >>"$LOG" 2>&1
  say "exit $?"
done
say ""
say "run  label              episodes correct failed mean_reward geomean_speedup"
for which in A B; do
  python3 - "$OUT/runs/h200-$which/summary.json" <<'PY' | tee -a "$LOG"
import json, sys
d = json.load(open(sys.argv[1]))
g = d["geomean_speedup_correct"]
print("%-4s %-18s %-8d %-7d %-6d %-11.2f %s" % (d["run"][-1], d["label"], d["episodes"], d["correct"],
      d["failed"], d["mean_reward"], "%.3fx" % g if g else "-"))
PY
done
