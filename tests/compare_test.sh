#!/bin/sh
# envctl compare on the hand-made run folders of tests/fixtures/runs (make_fixtures.py says
# what each holds): a clearly better run, a rerun of the same agent, identical runs, a run
# with failed episodes, and bad input. Usage: compare_test.sh BIN_DIR SOURCE_DIR
set -eu
BIN=$1
SRC=$2
ENVCTL=$BIN/envctl
. "$SRC/tests/lib.sh" # cleanup on EXIT/INT/TERM
ka_init compare
T=$WORK
cp -r "$SRC/tests/fixtures/runs" "$T/runs"
sums() { (cd "$T/runs" && find . -type f | sort | xargs sha256sum); }
sums >"$T/before"
fail() {
  echo "compare_test: FAIL: $*" >&2
  exit 1
}

# 1. a clearly better run: verdict better, CI above 0, every task a win
"$ENVCTL" compare base better --runs-dir "$T/runs" --json >"$T/better.json"
python3 - "$T/better.json" <<'EOF'
import json, math, sys
j = json.load(open(sys.argv[1]))
assert j["schema"] == "kernelarena.compare.v1", j["schema"]
assert j["verdict"] == "better", j["verdict_line"]
assert j["ci"][0] > 0 and j["ci"][1] > j["ci"][0], j["ci"]
assert j["p"] < 0.05, j["p"]
assert (j["wins"], j["ties"], j["losses"], j["paired_tasks"]) == (5, 0, 0, 5)
# fixture: B is 1.55, 1.45, 1.60, 1.40, 1.50 times A on the five tasks
want = sum(math.log(f) for f in [1.55, 1.45, 1.60, 1.40, 1.50]) / 5
assert abs(j["mean_log_ratio"] - want) < 2e-3, (j["mean_log_ratio"], want)
assert j["ci"][0] < j["mean_log_ratio"] < j["ci"][1]
assert abs(j["speedup_ratio"] - math.exp(j["mean_log_ratio"])) < 1e-9
# the paired t statistic, recomputed here from the per-task deltas
d = [t["delta_log_speedup"] for t in j["tasks"]]
m = sum(d) / len(d)
sd = math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1))
assert abs(j["t"] - m / (sd / math.sqrt(len(d)))) < 1e-9
assert len(j["episodes"]) == 10
assert j["noise"]["a_tasks"] == 5 and j["noise"]["a_sd"] > 0
assert j["settings"]["resamples"] == 10000
EOF
"$ENVCTL" compare base better --runs-dir "$T/runs" >"$T/better.txt"
tail -n 1 "$T/better.txt" | grep -q '^verdict: B (better agent) is better than A (baseline agent)' ||
  fail "text verdict: $(tail -n 1 "$T/better.txt")"
grep -q '^wins 5, ties 0, losses 0 of 5 tasks' "$T/better.txt" || fail "win/tie/loss line"
grep -q '^run-to-run noise (sd of log speedup between repeats): A ' "$T/better.txt" ||
  fail "noise line"
# the same seed gives the same interval; the swapped order gives "worse"
"$ENVCTL" compare base better --runs-dir "$T/runs" --json >"$T/better2.json"
cmp -s "$T/better.json" "$T/better2.json" || fail "two runs of compare differ"
"$ENVCTL" compare better base --runs-dir "$T/runs" --json >"$T/worse.json"
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['verdict']=='worse' and j['ci'][1]<0, j['verdict_line']" "$T/worse.json"

# 2. the same agent twice (within +-3%): no detectable difference, CI around 0
"$ENVCTL" compare base base-rerun --runs-dir "$T/runs" --json >"$T/rerun.json"
python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
assert j['verdict'] == 'no detectable difference', j['verdict_line']
assert j['ci'][0] < 0 < j['ci'][1], j['ci']
assert j['ties'] == 5, j['tasks']
" "$T/rerun.json"

# 3. identical runs (also given as folders, not ids)
"$ENVCTL" compare "$T/runs/base" "$T/runs/base" --json >"$T/same.json"
python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
assert j['verdict'] == 'no detectable difference', j['verdict_line']
assert j['mean_log_ratio'] == 0 and j['ci'] == [0, 0] and j['p'] == 1, j
" "$T/same.json"

# 4. failed episodes count as failures (speedup 0.5, their reward), never dropped:
#    better-failed has host/softmax@0 in error and host/row_sum@1 without episode.json
"$ENVCTL" compare base better-failed --runs-dir "$T/runs" --json >"$T/failed.json"
python3 - "$T/failed.json" "$T/runs" <<'EOF'
import json, math, sys
j = json.load(open(sys.argv[1]))
runs = sys.argv[2]
assert j["b"]["episodes"] == 10 and j["b"]["failed"] == 2, j["b"]
assert len(j["episodes"]) == 10
eps = {(e["task"], e["repeat"]): e for e in j["episodes"]}
assert eps[("host/softmax", 0)]["b_status"] == "error"
assert eps[("host/row_sum", 1)]["b_status"] == "missing"
for k in [("host/softmax", 0), ("host/row_sum", 1)]:
    assert abs(eps[k]["b_log_speedup"] - math.log(0.5)) < 1e-12, eps[k]
    assert eps[k]["b_reward"] == 0
tasks = {t["task"]: t for t in j["tasks"]}
sm = tasks["host/softmax"]["b"]
ok = json.load(open(f"{runs}/better-failed/episodes/host~softmax@1/episode.json"))["speedup"]
assert sm["episodes"] == 2 and sm["failed"] == 1
assert abs(sm["mean_log_speedup"] - (math.log(0.5) + math.log(ok)) / 2) < 1e-12, sm
assert tasks["host/softmax"]["outcome"] == "loss"
assert j["b"]["complete"] is False
EOF
# a different failure floor moves the failed episodes
"$ENVCTL" compare base better-failed --runs-dir "$T/runs" --json --failure-speedup 0.25 |
  python3 -c "
import json, math, sys
j = json.load(sys.stdin)
e = [x for x in j['episodes'] if x['b_status'] == 'missing'][0]
assert abs(e['b_log_speedup'] - math.log(0.25)) < 1e-12, e
"

# 5. few paired tasks (ec_compare's edges): B's plan reduced to host/gelu plus a task
#    that A lacks (1 paired task: interval of one delta, no test, no verdict), then to
#    that task alone (0 paired: every number null)
cp -r "$T/runs/better" "$T/one" && cp -r "$T/runs/better" "$T/none"
python3 - "$T/one/run.json" "$T/none/run.json" <<'EOF'
import json, sys
for path, keep in zip(sys.argv[1:], [("host/gelu",), ()]):
    j = json.load(open(path))
    j["plan"] = [e for e in j["plan"] if e["task"] in keep]
    j["plan"].append({"task": "host/extra", "repeat": 0, "seed": 1, "dir": "/nonexistent"})
    json.dump(j, open(path, "w"))
EOF
"$ENVCTL" compare "$T/runs/base" "$T/one" --json >"$T/one.json"
"$ENVCTL" compare "$T/runs/base" "$T/none" --json >"$T/none.json"
python3 - "$T/one.json" "$T/none.json" <<'EOF'
import json, math, sys
one, none = (json.load(open(p)) for p in sys.argv[1:])
assert one["paired_tasks"] == 1 and one["wins"] == 1, one
assert [t["task"] for t in one["tasks"]] == ["host/gelu"], one["tasks"]
assert {(u["task"], u["only_in"]) for u in one["unpaired_tasks"]} == {
    ("host/softmax", "A"), ("host/layernorm", "A"), ("host/row_sum", "A"),
    ("host/transpose", "A"), ("host/extra", "B")}, one["unpaired_tasks"]
assert abs(one["mean_log_ratio"] - math.log(1.55)) < 2e-3, one["mean_log_ratio"]
assert one["ci"] == [one["mean_log_ratio"]] * 2, one["ci"]
assert one["p"] is None and one["t"] is None and one["p_wilcoxon"] is None and one["df"] == 0
assert one["verdict"] == "no detectable difference"
assert "(fewer than 2 paired tasks)" in one["verdict_line"], one["verdict_line"]
assert len(one["episodes"]) == 2 and one["b"]["failed"] == 1, one["b"]  # host/extra: missing
assert none["paired_tasks"] == 0 and none["tasks"] == [] and len(none["unpaired_tasks"]) == 6
for k in ("mean_log_ratio", "speedup_ratio", "t", "p", "p_wilcoxon", "mean_delta_reward"):
    assert none[k] is None, (k, none[k])
assert none["ci"] == [None, None] and none["ratio_ci"] == [None, None]
assert none["noise"]["a_sd"] is None and none["noise"]["a_tasks"] == 0
assert none["noise"]["se_mean_diff"] is None and none["episodes"] == []
assert none["verdict"] == "no detectable difference"
EOF
"$ENVCTL" compare "$T/runs/base" "$T/one" >"$T/one.txt"
"$ENVCTL" compare "$T/runs/base" "$T/none" >"$T/none.txt"
grep -q '^not paired (only in B): host/extra$' "$T/one.txt" || fail "1 paired task: unpaired list"
grep -q '^mean log speedup ratio (B/A): +0.43' "$T/one.txt" || fail "1 paired task: the mean"
! grep -q '^paired t-test' "$T/one.txt" || fail "1 paired task: a test printed"
grep -q '^run-to-run noise: unknown' "$T/none.txt" || fail "0 paired tasks: noise line"
! grep -q '^mean log speedup ratio' "$T/none.txt" || fail "0 paired tasks: a mean printed"

# 6. bad input: clear error, exit code, nothing written or changed
expect_err() { # CODE PATTERN ARGS...
  code=$1
  pat=$2
  shift 2
  set +e
  "$ENVCTL" compare "$@" >"$T/out" 2>"$T/err"
  rc=$?
  set -e
  [ "$rc" -eq "$code" ] || fail "compare $*: exit $rc, wanted $code ($(cat "$T/err"))"
  grep -q "$pat" "$T/err" || fail "compare $*: stderr '$(cat "$T/err")' lacks '$pat'"
  [ ! -s "$T/out" ] || fail "compare $*: printed a result on error"
}
expect_err 1 "run B: no run 'nosuch'" base nosuch --runs-dir "$T/runs"
expect_err 1 "run A: .*noplan/run.json has no plan" noplan base --runs-dir "$T/runs"
expect_err 1 "no run.json (not a run folder" "$T/runs/base/episodes" base --runs-dir "$T/runs"
expect_err 2 "needs two runs" base --runs-dir "$T/runs"
expect_err 2 "failure-speedup needs a number" base better --failure-speedup 2 --runs-dir "$T/runs"
echo '{"plan": [' >"$T/runs/noplan/run.json.bad"
mkdir -p "$T/broken" && cp "$T/runs/noplan/run.json.bad" "$T/broken/run.json"
expect_err 1 "broken/run.json: line" "$T/broken" base --runs-dir "$T/runs"
rm "$T/runs/noplan/run.json.bad"

sums >"$T/after"
cmp -s "$T/before" "$T/after" || fail "compare changed the run folders"
echo "compare_test: ok"
