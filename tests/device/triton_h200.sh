#!/bin/sh
# The triton2triton tasks on the H200 (issue 17, first slice), prebuilt binaries only
# (build/bin; nothing is built here). The machine's Python 3.12 has triton 3.6 (and torch,
# which the compile driver never imports).
#   1. triton_compile_test baselines: every triton task's baseline through the compile
#      path (sandboxed driver, cubins, the cuda backend's check of the bundle);
#   2. one episode of triton2triton/gelu (envctl starts envserver and gpuexec: the runner
#      compiles in its sandbox, loads the cubins and launches them): the baseline's step;
#   3. tests/device/validate_suite.sh over tasks/triton2triton/* and
#      tasks/instruction2triton/* (envctl validate --backends cuda, one task per run;
#      TRITON_TASKS="id ..." validates those instead).
#   4. one episode step per faster candidate of tests/candidates/triton/FAMILY/NAME/
#      (envctl episode --agent files:DIR, seed 1): its status and speedup over the baseline.
#   5. the triton runs of tests/adversarial/manifest.yaml (harness triton_h200: lazy and
#      empty kernels, grid abuse, another buffer's memory, an input written, a precision
#      cut) in one triton2triton/gelu episode: tests/device/integrity_h200.sh with
#      HARNESS=triton_h200 (table in triton-integrity.txt).
# TRITON_STEPS (default 12345) picks the steps, e.g. TRITON_STEPS=45 after a run of 123:
# all five take about 12 minutes, past one device command's 10.
# Prints a short table last; logs in $OUT (triton-compile.txt, triton-episode.txt,
# validate-report.txt, validate/...).
#   device run: OUT=$OUT sh tests/device/triton_h200.sh          (carry: build/bin)
#   TRITON_PYTHON=/path/to/python3 picks the Python (default: the first of python3.12,
#   python3, .venv/bin/python3 that imports triton).
set -u
OUT=${OUT:-/tmp/ka-out}
BIN=${BIN:-build/bin}
mkdir -p "$OUT"
rm -f "$OUT/candidate-rows.txt"
STEPS=${TRITON_STEPS:-12345}
want() { case $STEPS in *$1*) return 0 ;; esac; return 1; }
c_rc=- e_rc=- v_rc=- a_rc=-
export TMPDIR=${TMPDIR:-/tmp}
py=""
for p in ${TRITON_PYTHON:-} python3.12 python3 .venv/bin/python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c "import triton" >/dev/null 2>&1; then
    py=$(command -v "$p")
    case $py in /*) ;; *) py=$(cd "$(dirname "$py")" && pwd)/$(basename "$py") ;; esac
    break
  fi
done
if [ -z "$py" ]; then
  echo "triton_h200: no Python here imports triton (tried ${TRITON_PYTHON:-} python3.12 python3 .venv/bin/python3)"
  exit 1
fi
export KA_TRITON_PYTHON="$py"
tver=$("$py" -c "import triton; print(triton.__version__)" 2>&1)
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1
  echo "python: $py, triton $tver"
} | tee "$OUT/triton-header.txt"

if want 1; then
  echo "== 1. triton_compile_test baselines"
  KA_BACKEND_PATH=$BIN timeout 300 "$BIN/triton_compile_test" baselines tasks >"$OUT/triton-compile.txt" 2>&1
  c_rc=$?
  grep -E "^(FAIL|ok   triton2triton)" "$OUT/triton-compile.txt" | cut -c1-200
  tail -1 "$OUT/triton-compile.txt"
fi

if want 2; then
  echo "== 2. envctl episode --task triton2triton/gelu (baseline, one step)"
  timeout 400 "$BIN/envctl" episode --tasks tasks --task triton2triton/gelu --max-steps 1 \
    >"$OUT/triton-episode.txt" 2>&1
  e_rc=$?
  tail -25 "$OUT/triton-episode.txt" | cut -c1-200
  e_line=$(grep -iE "reward|speedup|status|COMPILE_ERROR|INFRA|INCORRECT|FLAGGED" "$OUT/triton-episode.txt" |
    tail -1 | cut -c1-100)
fi

if want 3; then
  echo "== 3. envctl validate --backends cuda, tasks/triton2triton/* tasks/instruction2triton/*"
  TASKS=${TRITON_TASKS:-$(for y in tasks/triton2triton/*/task.yaml tasks/instruction2triton/*/task.yaml; do
    d=${y%/task.yaml}
    echo "${d#tasks/}"
  done)}
  OUT=$OUT BIN=$BIN TASKS="$TASKS" BUDGET_S=${BUDGET_S:-480} sh tests/device/validate_suite.sh \
    >"$OUT/triton-validate.txt" 2>&1
  v_rc=$?
fi

if want 4; then
  echo "== 4. faster candidates, tests/candidates/triton/*/*"
  : >"$OUT/triton-candidates.txt"
  for dir in tests/candidates/triton/*/*/; do
    [ -f "$dir/launch.yaml" ] || continue
    id=${dir#tests/candidates/triton/}
    id=${id%/}
    timeout 300 "$BIN/envctl" episode --tasks tasks --task "$id" --seed 1 --max-steps 1 \
      --agent "files:$dir" >"$OUT/cand.txt" 2>&1
    rc=$?
    cat "$OUT/cand.txt" >>"$OUT/triton-candidates.txt"
    st=$(grep -oE "status [A-Z_]+" "$OUT/cand.txt" | head -1)
    sp=$(grep -oE "geometric-mean speedup [0-9.]+x" "$OUT/cand.txt" | head -1)
    printf '%-34s exit %d, %s, %s\n' "$id" "$rc" "${st:-no status}" "${sp:-no speedup}" |
      tee -a "$OUT/candidate-rows.txt"
  done
  rm -f "$OUT/cand.txt"
fi

if want 5; then
  echo "== 5. adversarial triton runs (manifest harness triton_h200)"
  mkdir -p "$OUT/adv"
  HARNESS=triton_h200 OUT=$OUT/adv timeout 400 sh tests/device/integrity_h200.sh \
    >"$OUT/triton-integrity.txt" 2>&1
  a_rc=$?
  cat "$OUT/triton-integrity.txt"
fi

echo
echo "== triton_h200 summary (python $py, triton $tver)"
printf '%-34s %s\n' "compile test (every triton baseline)" "exit $c_rc; $(tail -1 "$OUT/triton-compile.txt" 2>/dev/null)"
printf '%-34s %s\n' "episode triton2triton/gelu" "exit $e_rc; ${e_line:-no result line}"
printf '%-34s %s\n' "validate suite" "exit $v_rc"
printf '%-34s %s\n' "adversarial triton runs" "exit $a_rc; $(grep -E '^mismatches' "$OUT/triton-integrity.txt" 2>/dev/null)"
cat "$OUT/validate-rows.txt" 2>/dev/null
echo "faster candidates:"
cat "$OUT/candidate-rows.txt" 2>/dev/null
