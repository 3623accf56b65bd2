#!/bin/sh
# The PyTorch task families (torch2cuda, torch2triton; docs/tasks.md "PyTorch tasks") on
# the H200, prebuilt binaries only (build/bin; nothing is built here). The machine's
# Python 3.12 has torch 2.11 and triton 3.6.
#   1. envctl validate --backends cuda over tasks/torch2cuda/* and tasks/torch2triton/*
#      (tests/device/validate_suite.sh, one task per run): every check of docs/validate.md,
#      and the baseline kernel's time per case (validate/<task>.json);
#   2. tests/device/torch_check.py with that Python: per task, the trusted process's
#      float64 reference of model.py against reference.c on the same inputs, PyTorch
#      eager's own output within the task's tolerance, and eager's and torch.compile's
#      times per shown case through the trusted process (flushed, CUDA events), beside
#      the baseline kernel's time from step 1;
#   3. the torch2cuda runs of tests/adversarial/manifest.yaml (harness torch_h200: an
#      unwritten output, a lazy kernel, grid abuse both ways, another buffer's memory, an
#      input written, a precision cut) in one torch2cuda/softmax episode:
#      tests/device/integrity_h200.sh with HARNESS=torch_h200 (table in torch-integrity.txt);
#   4. one episode step per faster candidate of tests/candidates/torch/FAMILY/NAME/
#      (envctl episode --agent files:DIR, seed 1): its status and speedup over the baseline.
# TORCH_STEPS (default 1234) picks the steps; TORCH_TASKS="id ..." a subset. Prints a short
# table last (task, status, case, eager ms, compile ms, baseline-kernel ms, eager/baseline).
# Logs in $OUT (torch-validate.txt, torch-check.txt, validate/...).
#   device run: OUT=$OUT sh tests/device/torch_h200.sh          (carry: build/bin)
#   PYBIN=/path/to/python3 picks the Python (default: the first of python3.12, python3 that
#   imports torch). Without one it says so and exits 1: never a silent skip.
set -u
OUT=${OUT:-/tmp/ka-out}
BIN=${BIN:-build/bin}
mkdir -p "$OUT"
STEPS=${TORCH_STEPS:-1234}
want() { case $STEPS in *$1*) return 0 ;; esac; return 1; }
export TMPDIR="${TMPDIR:-/tmp}"
py=""
for p in ${PYBIN:-} python3.12 python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c "import torch, yaml" >/dev/null 2>&1; then
    py=$(command -v "$p")
    break
  fi
done
if [ -z "$py" ]; then
  echo "torch_h200: ABSENT: no Python here imports torch and yaml (tried ${PYBIN:-} python3.12 python3)"
  exit 1
fi
"$py" -c "import triton" >/dev/null 2>&1 && export KA_TRITON_PYTHON="$py"
# validate's torch_reference check runs the trusted process with it
export KA_TORCH_PYTHON="$py"
TASKS=${TORCH_TASKS:-$(for y in tasks/torch2cuda/*/task.yaml tasks/torch2triton/*/task.yaml; do
  d=${y%/task.yaml}
  echo "${d#tasks/}"
done)}
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1
  echo "python: $py, $("$py" -c "import torch; print('torch', torch.__version__)" 2>&1)"
} | tee "$OUT/torch-header.txt"
v_rc=- k_rc=- a_rc=-
if want 1; then
  echo "== 1. envctl validate --backends cuda over the torch tasks"
  OUT=$OUT BIN=$BIN TASKS="$TASKS" BUDGET_S=${BUDGET_S:-480} sh tests/device/validate_suite.sh \
    >"$OUT/torch-validate.txt" 2>&1
  v_rc=$?
  sed -n '/^== summary/,$p' "$OUT/torch-validate.txt"
fi
if want 2; then
  echo "== 2. torch_check.py: reference vs reference.c, eager within tolerance, eager/compile times"
  # shellcheck disable=SC2086 # the ids, one word each
  only=$(printf '%s\n' $TASKS | paste -sd, -)
  timeout 540 "$py" tests/device/torch_check.py --driver "$BIN/ka_torch.py" --tasks tasks \
    --validate-dir "$OUT/validate" --only "$only" >"$OUT/torch-check.txt" 2>&1
  k_rc=$?
  grep -E "^(FAIL|note)" "$OUT/torch-check.txt" | cut -c1-200
  grep -q "^TASK " "$OUT/torch-check.txt" || grep "^row " "$OUT/torch-check.txt"
  sed -n '/^TASK /,$p' "$OUT/torch-check.txt"
fi
if want 3; then
  echo "== 3. adversarial torch2cuda runs (manifest harness torch_h200)"
  HARNESS=torch_h200 OUT=$OUT/adv timeout 400 sh tests/device/integrity_h200.sh \
    >"$OUT/torch-integrity.txt" 2>&1
  a_rc=$?
  sed -n '/^step /,$p' "$OUT/torch-integrity.txt"
fi
if want 4; then
  echo "== 4. faster candidates, tests/candidates/torch/*/* and tests/candidates/triton/torch2triton/*"
  : >"$OUT/torch-candidates.txt"
  for dir in tests/candidates/torch/*/*/ tests/candidates/triton/torch2triton/*/; do
    [ -f "$dir/launch.yaml" ] || continue
    id=${dir#tests/candidates/torch/}
    id=${id#tests/candidates/triton/}
    id=${id%/}
    timeout 300 "$BIN/envctl" episode --tasks tasks --task "$id" --seed 1 --max-steps 1 \
      --agent "files:$dir" >"$OUT/cand.txt" 2>&1
    rc=$?
    cat "$OUT/cand.txt" >>"$OUT/torch-candidates.txt"
    st=$(grep -oE "status [A-Z_]+" "$OUT/cand.txt" | head -1)
    sp=$(grep -oE "geometric-mean speedup [0-9.]+x" "$OUT/cand.txt" | head -1)
    printf '%-34s exit %d, %s, %s\n' "$id" "$rc" "${st:-no status}" "${sp:-no speedup}"
  done
  rm -f "$OUT/cand.txt"
fi
if want 2; then # the table last
  echo "== summary: task, status, case, eager ms, compile ms, baseline-kernel ms, eager/baseline"
  if grep -q "^TASK " "$OUT/torch-check.txt"; then sed -n '/^TASK /,$p' "$OUT/torch-check.txt"
  else grep "^row " "$OUT/torch-check.txt"; fi
fi
echo "torch_h200: validate exit $v_rc, torch_check exit $k_rc, adversarial exit $a_rc"
# validate_suite.sh ends with its table (its status is tee's): the verdicts are in the rows
if [ -f "$OUT/validate-rows.txt" ] && want 1 && grep -qE ' (FAIL|NO-REPORT|\?) ' "$OUT/validate-rows.txt"; then
  exit 1
fi
[ "$k_rc" = 0 ] || [ "$k_rc" = - ] || exit 1
[ "$a_rc" = 0 ] || [ "$a_rc" = - ] || exit 1
exit 0
