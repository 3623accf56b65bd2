#!/bin/sh
# A reference slower than the step's timeout (red team 2026-12-03): the executor computes
# the references in its own process while the runner works, and the runner's deadline was
# set before they started, so an honest step whose runner had finished long before was
# scored TIMEOUT once a slow reference (a new seed's, on a loaded host) outlasted
# timeout_s. The deadline now starts when the references are in: the time is the
# executor's, never the submission's. The fixture: host/gelu with a reference that
# sleeps 6 s per call (the cases' references run side by side) and timeout_s 3. The
# prefetch at Reset starts the references first, so the step waits for less than 6 s of
# them, but for more than timeout_s (with 4 s, a loaded CI machine waited under 4 s).
# The baseline's step is OK, and a candidate that hangs is still TIMEOUT.
# usage: slow_reference_test.sh BIN_DIR SOURCE_DIR
set -u
BIN=$1
SRC=$2
. "$SRC/tests/lib.sh"
ka_init slowref
ka_task_copy host/gelu "s/^timeout_s: .*/timeout_s: 3/; s/n: 1048576/n: 65536/" \
  "s/n: 2097152/n: 131072/" "s/n: 1000003/n: 4099/" "s/reference: {symbol: gelu_ref, split: n}/reference: {symbol: gelu_ref}/"
ref=$WORK/tasks/host/gelu/reference.c
sed -i 's/^#include <stdint.h>/#include <stdint.h>\n#include <unistd.h>/' "$ref"
sed -i 's/^  const float \*x = tensors\[0\];/  sleep(6); \/* the slow reference of this test *\/\n  const float *x = tensors[0];/' "$ref"
check "the fixture's reference sleeps" grep -q "sleep(6)" "$ref"
check "the fixture's reference is not split" grep -q "reference: {symbol: gelu_ref}" \
  "$WORK/tasks/host/gelu/task.yaml"
ka_stack "$WORK/tasks"
ka_run "$BIN/envctl" episode --server "$URL" --task host/gelu --seed 5 --max-steps 1 --verbose \
  >"$WORK/honest.out" 2>&1
check "the baseline's step is OK although its references took longer than timeout_s" \
  grep -q "step 1: status OK" "$WORK/honest.out" || cat "$WORK/honest.out"
check "its log shows the references' time beyond the timeout" \
  grep -Eq "of which references ([3-9][0-9]{3}|[1-9][0-9]{4,})\.[0-9] ms" "$WORK/honest.out"
# a candidate that never returns: still the submission's TIMEOUT, within the deadline
hang=$WORK/hang
mkdir -p "$hang"
printf '#include <stdint.h>\nvoid gelu_forward(const float *x, float *y, int64_t n) {\n  for (;;) {\n  }\n}\n' \
  >"$hang/gelu.c"
t0=$(date +%s)
ka_run "$BIN/envctl" episode --server "$URL" --task host/gelu --seed 6 --max-steps 1 \
  --agent "files:$hang" >"$WORK/hang.out" 2>&1
t1=$(date +%s)
check "a candidate that hangs is TIMEOUT" grep -q "step 1: status TIMEOUT" "$WORK/hang.out" ||
  cat "$WORK/hang.out"
check "within its deadline and the grace (under 40 s, took $((t1 - t0)) s)" test $((t1 - t0)) -lt 40
exit $fail
