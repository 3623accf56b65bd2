#!/bin/sh
# The Python client on the H200 machine (issue 5): Python 3.12 with the wheels carried
# in .whl/ (scripts/fetch-wheels.sh on the CPU machine), envserver + gpuexec from the
# carried build/, examples/grpo_step.py on hip2hip/gelu and cuda2cuda/gelu (a GRPO
# group of 8 rollouts sharing one seed, all in flight), envctl export and replay.
#   device run: OUT=$OUT sh tests/device/python_h200.sh   (carry: build, .whl)
# Prints a short table last; the full log is $OUT/python_h200.log.
set -u
OUT=${OUT:-/tmp/ka-out}
mkdir -p "$OUT"
LOG=$OUT/python_h200.log
: >"$LOG"
BIN=$(pwd)/build/bin
say() { echo "$@" | tee -a "$LOG"; }
PY=$(command -v python3.12 || command -v python3)
say "date: $(date -u +%Y-%m-%dT%H:%M:%SZ); python: $($PY --version 2>&1)"
# A venv that sees the system packages (protobuf 7.36 is there) plus the carried wheels.
VENV=$(mktemp -d /tmp/ka-pyvenv-XXXXXX)
$PY -m venv --system-site-packages "$VENV" >>"$LOG" 2>&1
"$VENV/bin/python" -m pip install --quiet --no-index --find-links .whl protobuf pynng gymnasium numpy \
  >>"$LOG" 2>&1 || say "pip install from .whl failed (see log)"
"$VENV/bin/python" -c "import google.protobuf as p, pynng, gymnasium; print('protobuf', p.__version__, 'gymnasium', gymnasium.__version__)" 2>&1 | tee -a "$LOG"

STATE=$(mktemp -d /tmp/ka-pystate-XXXXXX)
"$BIN/envserver" --state "$STATE" --tasks tasks >>"$LOG" 2>&1 &
SRV=$!
"$BIN/gpuexec" --server "ipc://$STATE/exec.ipc" --tasks tasks --backends auto >>"$LOG" 2>&1 &
GX=$!
trap 'kill $GX $SRV 2>/dev/null; wait 2>/dev/null; rm -rf "$VENV" "$STATE"' EXIT
URL="ipc://$STATE/env.ipc"
"$VENV/bin/python" - "$URL" <<'PYEOF' >>"$LOG" 2>&1
import sys
sys.path.insert(0, "clients/python")
import kernelarena
with kernelarena.Client(sys.argv[1]) as c:
    c.wait_ready(120)
    print("describe:", [d.name for d in c.describe().devices])
PYEOF

: >"$OUT/rows"
for task in hip2hip/gelu cuda2cuda/gelu; do
  name=$(echo "$task" | tr / _)
  say "=== grpo_step $task"
  "$VENV/bin/python" examples/grpo_step.py --url "$URL" --task "$task" -n 8 --seed 1 \
    --run "py-$name" >"$OUT/grpo_$name.txt" 2>&1
  rc=$?
  cat "$OUT/grpo_$name.txt" | tee -a "$LOG"
  ok=$(grep -c ' OK ' "$OUT/grpo_$name.txt")
  ce=$(grep -c ' COMPILE_ERROR ' "$OUT/grpo_$name.txt")
  mean=$(grep -o 'mean reward [0-9.]*' "$OUT/grpo_$name.txt" | cut -d' ' -f3)
  "$BIN/envctl" export --server "$URL" --run "py-$name" >"$OUT/export_$name.jsonl" 2>>"$LOG"
  lines=$(wc -l <"$OUT/export_$name.jsonl")
  ep=$(grep ' OK ' "$OUT/grpo_$name.txt" | head -1 | awk '{print $2}')
  rp=-
  if [ -n "$ep" ]; then
    "$BIN/envctl" replay --server "$URL" "$ep" >"$OUT/replay_$name.txt" 2>&1
    rp=$?
    cat "$OUT/replay_$name.txt" | tee -a "$LOG"
  fi
  echo "$task $rc $ok $ce ${mean:--} $lines $rp" >>"$OUT/rows"
done
say ""
say "task            grpo_exit  OK  COMPILE_ERROR  mean_reward  exported  replay_exit"
while read -r t rc ok ce mean lines rp; do
  printf '%-15s %-10s %-3s %-14s %-12s %-9s %s\n' "$t" "$rc" "$ok" "$ce" "$mean" "$lines" "$rp" |
    tee -a "$LOG"
done <"$OUT/rows"
