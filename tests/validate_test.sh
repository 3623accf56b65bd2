#!/bin/sh
# `envctl validate` against deliberately broken task fixtures (tests/tasks-bad/host/*):
# each must FAIL with the right check and reason, while the checks it does not break
# still PASS; plus the exit codes (0 / 1 / 2, --strict), the report files (text and
# JSON), the tags column of `envctl tasks`, per-output tolerances and `nondeterministic`
# (tests/fixtures/validate/host/*), and TASK arguments outside --tasks.
# usage: validate_test.sh BIN_DIR SOURCE_DIR [PART]   PART: base, fields or all (default)
set -u
BIN=$1
SRC=$2
PART=${3:-all}
. "$SRC/tests/lib.sh" # check, cleanup on EXIT/INT/TERM
ka_init validate
# section TASK: the lines of TASK's block in the text report
section() { awk -v t="== $1:" 'index($0, t) == 1 {on = 1; print; next} /^== / {on = 0} on' "$WORK/bad.txt"; }
has() { # has TASK REGEX: a line of TASK's block matches REGEX
  section "$1" | grep -Eq "$2"
}

if [ "$PART" != fields ]; then
# usage and help
"$BIN/envctl" validate --help > "$WORK/help.txt" 2>&1
check "validate --help exits 0 and lists the options" test $? -eq 0
check "help mentions --strict" grep -q -- "--strict" "$WORK/help.txt"
"$BIN/envctl" validate --seeds 0 > /dev/null 2>&1
check "--seeds 0 is a usage error (exit 2)" test $? -eq 2
"$BIN/envctl" validate --backends nosuch > /dev/null 2>&1
check "an unknown backend is a usage error (exit 2)" test $? -eq 2

# tags are parsed and listed
"$BIN/envctl" tasks --tasks "$SRC/tasks" > "$WORK/tasks.txt" 2>&1
check "envctl tasks shows the tags of host/gelu" grep -Eq '^host/gelu .* elementwise,cpu$' \
  "$WORK/tasks.txt"

# the broken fixtures
"$BIN/envctl" validate --tasks "$SRC/tests/tasks-bad" --seeds 2 --reps 2 --warmup 0 --quiet \
  --report "$WORK/bad.txt" --report "$WORK/bad.json" > "$WORK/stdout.txt" 2> "$WORK/stderr.txt"
rc=$?
check "broken fixtures: exit status 1" test $rc -eq 1
check "stdout and the text report agree" cmp -s "$WORK/stdout.txt" "$WORK/bad.txt"
check "summary counts 7 FAIL" grep -q "7 task(s): 0 PASS, 0 WARN, 7 FAIL" "$WORK/bad.txt"

check "zero_ref: all-zero output passes -> canned_zeros FAIL" \
  has host/zero_ref '^  FAIL canned_zeros +an all-zero output passes y of case a'
check "zero_ref: constant passes -> canned_constant FAIL" has host/zero_ref '^  FAIL canned_constant'
check "zero_ref: seed-independent -> seed_dependence FAIL" \
  has host/zero_ref '^  FAIL seed_dependence +case a: seeds'
check "zero_ref: its baseline still matches its reference" \
  has host/zero_ref '^  PASS baseline_correct@host'

check "ignores_input: input_dependence FAIL names input b" \
  has host/ignores_input '^  FAIL input_dependence +re-drawing input b leaves every output'
check "ignores_input: input a is not blamed" sh -c "! (awk -v t='== host/ignores_input:' 'index(\$0,t)==1{on=1;next} /^== /{on=0} on' '$WORK/bad.txt' | grep -q 're-drawing input a')"
check "ignores_input: canned outputs still fail" has host/ignores_input '^  PASS canned_zeros'

check "held_out_shown: held_out FAIL names both cases" \
  has host/held_out_shown '^  FAIL held_out +held-out case same_as_a has the shapes of shown case a'

check "nan_ref: reference_finite FAIL with a NaN count" \
  has host/nan_ref '^  FAIL reference_finite +[0-9]+ NaN/Inf in y of case a'

check "identity: copy of the input passes -> canned_input_copy FAIL" \
  has host/identity '^  FAIL canned_input_copy +a copy of input x passes y'

check "no_tail: baseline_correct FAIL on the held-out case only" \
  has host/no_tail '^  FAIL baseline_correct@host +seed 0x[0-9a-f]+: INCORRECT: case odd'
check "no_tail: the baseline still compiles" has host/no_tail '^  PASS baseline_compiles@host'

check "too_many_tags: schema FAIL names the file, line and reason" \
  has host/too_many_tags '^  FAIL schema +.*too_many_tags/task.yaml:[0-9]+: too many items'

check "JSON report parses and has 7 FAIL tasks" python3 -c "
import json, sys
r = json.load(open('$WORK/bad.json'))
assert r['summary'] == {'pass': 0, 'warn': 0, 'fail': 7}, r['summary']
t = {x['id']: x for x in r['tasks']}
z = [c for c in t['host/zero_ref']['checks'] if c['check'] == 'canned_zeros']
assert z and z[0]['verdict'] == 'FAIL', z
"

# WARN does not fail unless --strict: an impossible time floor on a good task (a copy of
# host/gelu with its cases 16x smaller: the verdicts here are about the exit codes)
ka_task_copy host/gelu "s/n: 1048576}/n: 65536}/; s/n: 2097152}/n: 131072}/; s/n: 1000003}/n: 65537}/"
"$BIN/envctl" validate --tasks "$WORK/tasks" host/gelu --seeds 1 --reps 2 --warmup 0 --quiet \
  --min-time-us 1e12 > "$WORK/warn.txt" 2>&1
rc=$?
check "a WARN alone exits 0" test $rc -eq 0
check "the WARN is the time floor, with the case times" \
  grep -Eq '^  WARN time_floor@host +baseline below .*case n1M' "$WORK/warn.txt"
check "baseline times per case are in the report" grep -Eq '^    host +n_odd +held-out +[0-9.]+ ms' \
  "$WORK/warn.txt"
"$BIN/envctl" validate --tasks "$WORK/tasks" host/gelu --seeds 1 --reps 2 --warmup 0 --quiet \
  --min-time-us 1e12 --strict > /dev/null 2>&1
check "--strict turns the WARN into exit 1" test $? -eq 1

fi # base

if [ "$PART" != base ]; then
# per-output tolerances and `nondeterministic` (tests/fixtures/validate/host/*); --reps 20
# makes host/verdict_flip's timed run call its baseline over 30 times; the other three
# fixtures do not count calls, and take 2 (each timed call costs a cache flush: a run
# at 20 took 60 s of the test's 87). The two reports are read as one.
FX=$SRC/tests/fixtures/validate
"$BIN/envctl" validate --tasks "$FX" host/verdict_flip --seeds 2 --reps 20 --warmup 0 \
  --quiet --report "$WORK/fx-flip.txt" > /dev/null 2> "$WORK/fx-stderr.txt"
rc_flip=$?
"$BIN/envctl" validate --tasks "$FX" host/nondet_declared host/nondet_undeclared \
  host/out_tolerance --seeds 2 --reps 2 --warmup 0 --quiet --report "$WORK/fx-rest.txt" \
  > /dev/null 2>> "$WORK/fx-stderr.txt"
rc_rest=$?
cat "$WORK/fx-flip.txt" "$WORK/fx-rest.txt" > "$WORK/fx.txt"
check "fixtures/validate: all four validated" sh -c "[ \$(grep -c '^== host/' '$WORK/fx.txt') -eq 4 ]"
# both runs fail: verdict_flip's alone, and out_tolerance's among the other three
rc=$((rc_flip == 1 && rc_rest == 1 ? 1 : 99))
fx() { awk -v t="== $1:" 'index($0, t) == 1 {on = 1; print; next} /^== /{on = 0} on' "$WORK/fx.txt" |
  grep -Eq "$2"; }
check "fixtures/validate: exit status 1 (out_tolerance and verdict_flip FAIL)" test $rc -eq 1
check "nondet_declared: errors differ between runs, declared -> repeatable PASS, says so" \
  fx host/nondet_declared '^  PASS repeatable@host +same verdict .*errors differ, as the task declares \(nondeterministic: the baseline scales'
check "nondet_declared: the task passes as a whole" fx host/nondet_declared '^== host/nondet_declared: PASS'
check "nondet_undeclared: the same baseline undeclared -> repeatable WARN naming the field" \
  fx host/nondet_undeclared '^  WARN repeatable@host +same verdict, but .*nondeterministic:'
check "verdict_flip: declared, but the verdict differs -> repeatable FAIL" \
  fx host/verdict_flip '^  FAIL repeatable@host +two runs on seed 0x[0-9a-f]+ disagree: status INCORRECT then OK'
check "out_tolerance: z misses its own rtol 1e-6 -> baseline_correct FAIL naming z" \
  fx host/out_tolerance '^  FAIL baseline_correct@host +seed 0x[0-9a-f]+: INCORRECT: case a: z: [0-9]+ of [0-9]+ elements differ'
fx_not() { ! fx "$@"; }
check "out_tolerance: y (task-wide tolerance) is not blamed" \
  fx_not host/out_tolerance '^  FAIL baseline_correct@host .* y: [0-9]+ of'
check "out_tolerance: y is checked at all (the pattern matches verdict_flip's y)" \
  fx host/verdict_flip '^  FAIL baseline_correct@host .*( y: [0-9]+ of|elements of y)'
check "out_tolerance: canned outputs judged with z's tolerance still fail" \
  fx host/out_tolerance '^  PASS canned_constant +constant outputs .* fail all 12 judgements'

# a TASK argument outside the task folder is refused before anything loads
(cd "$SRC/tasks" && "$BIN/envctl" validate --tasks "$SRC/tests/tasks-bad" ../tasks/host/gelu) \
  > "$WORK/out.txt" 2> "$WORK/out-err.txt"
rc=$?
check "a folder outside --tasks: usage error (exit 2)" test $rc -eq 2
check "... with a reason naming the folder and the task folder" grep -Eq \
  "'../tasks/host/gelu' \(.*/tasks/host/gelu\) is outside the task folder .*tests/tasks-bad" \
  "$WORK/out-err.txt"
check "... and nothing validated (no report, no progress line)" \
  sh -c "test ! -s '$WORK/out.txt' && ! grep -q '^validate: ' '$WORK/out-err.txt'"
"$BIN/envctl" validate --tasks "$SRC/tasks" host/gelu nosuch/task > "$WORK/out.txt" 2> "$WORK/out-err.txt"
rc=$?
check "an unknown id among good ones: exit 2, nothing validated" \
  sh -c "test $rc -eq 2 && test ! -s '$WORK/out.txt' && grep -q \"'nosuch/task' is neither a task id\" '$WORK/out-err.txt'"

fi # fields

if [ $fail -ne 0 ]; then
  for f in bad.txt stderr.txt fx.txt fx-stderr.txt out-err.txt; do
    [ -f "$WORK/$f" ] && { echo "--- $f"; cat "$WORK/$f"; }
  done
fi
exit $fail
