#!/bin/sh
# Issue 6 on the H200: the CI experiment of tests/agents_experiment.sh on GPU tasks. The
# configs are configs/experiment-host-{a,b}.yaml with three changes: the tasks are the
# hip2hip tasks of the same names (gelu, softmax, layernorm, row_sum, silu_mul), held-out
# scoring is on, and the slow agent A, instead of copying host candidates, repeats its
# launch plan's launches 3 times (tests/candidates/experiment/slow_launches.py: correct,
# about 3x slower). B hands back the baseline. Then `envctl compare` and `envctl report`.
# From the repository root, with the build folder carried:
#   device run: OUT=$OUT sh tests/device/agents_h200.sh   (carry: build)
# Writes the run folders under $OUT/runs, compare.txt, report.html and agents_h200.log;
# prints a table last (run, task, repeat, status, correct, speedup, held-out) and
# compare's verdict. Each run is limited to 65 s, so the script ends within ~150 s.
set -u
OUT=${OUT:-/tmp/ka-out}
mkdir -p "$OUT"
ROOT=$(pwd)
LOG=$OUT/agents_h200.log
: >"$LOG"
say() { echo "$@" | tee -a "$LOG"; }
say "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | tee -a "$LOG"
# the GPU configs, derived from the committed host configs (what differs is replaced)
python3 - "$ROOT" "$OUT" <<'PY'
import re, sys
root, out = sys.argv[1], sys.argv[2]
tasks = "[hip2hip/gelu, hip2hip/softmax, hip2hip/layernorm, hip2hip/row_sum, hip2hip/silu_mul]"
for ab in "ab":
    s = open("%s/configs/experiment-host-%s.yaml" % (root, ab)).read()
    s = re.sub(r"(?m)^run: .*$", "run: h200-%s" % ab.upper(), s)
    s = re.sub(r"(?m)^tasks: .*$", "tasks: " + tasks, s)
    s = re.sub(r"(?m)^held_out: .*$", "held_out: true", s)
    if ab == "a":
        s = re.sub(r"(?m)^  command: .*$", "  command: 'python3 %s/tests/candidates/experiment/"
                   "slow_launches.py launch.yaml 3 && envctl step'" % root, s)
    open("%s/run%s.yaml" % (out, ab.upper()), "w").write(s)
PY
for which in A B; do
  say "=== run $which: $(grep '^  command:' "$OUT/run$which.yaml")"
  # at most RUN_LIMIT_S s a run: a run cut short by the limit (SIGTERM) keeps its finished
  # episodes, and the rest show as interrupted or missing
  timeout ${RUN_LIMIT_S:-65} build/bin/envctl run --config "$OUT/run$which.yaml" --runs-dir "$OUT/runs" >>"$LOG" 2>&1
  say "exit $? after $(($(date +%s) - T0)) s"
done
build/bin/envctl compare h200-A h200-B --runs-dir "$OUT/runs" >"$OUT/compare.txt" 2>&1
say "compare exit $?"
cat "$OUT/compare.txt" >>"$LOG"
build/bin/envctl report h200-A h200-B --runs-dir "$OUT/runs" -o "$OUT/report.html" >>"$LOG" 2>&1
say "report exit $? ($OUT/report.html)"
say ""
say "run     task               rep status     correct speedup  held-out"
python3 - "$OUT/runs" <<'PY' | tee -a "$LOG"
import json, os, sys
for run in ("h200-A", "h200-B"):
    d = os.path.join(sys.argv[1], run)
    if not os.path.exists(d + "/run.json"):
        print("%-7s (no run.json)" % run)
        continue
    for p in json.load(open(d + "/run.json"))["plan"]:
        f = p["dir"] + "/episode.json"
        e = json.load(open(f)) if os.path.exists(f) else {}
        sp, ho = e.get("speedup"), e.get("held_out") or {}
        hs = ho.get("speedup_geomean")
        print("%-7s %-18s %-3d %-10s %-7s %-8s %s" % (run, p["task"], p["repeat"],
              e.get("status", "missing"), e.get("correct"), "x%.3f" % sp if sp else "-",
              "%s x%.3f" % (ho.get("status"), hs) if hs else ho.get("status", "-")))
PY
say "$(tail -n 1 "$OUT/compare.txt")"
say "total $(($(date +%s) - T0)) s"
