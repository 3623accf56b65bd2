#!/bin/sh
# `envctl validate` against deliberately broken task fixtures (tests/tasks-bad/host/*):
# each must FAIL with the right check and reason, while the checks it does not break
# still PASS; plus the exit codes (0 / 1 / 2, --strict), the report files (text and
# JSON) and the tags column of `envctl tasks`.
# usage: validate_test.sh BIN_DIR SOURCE_DIR
set -u
BIN=$1
SRC=$2
WORK=$(mktemp -d /tmp/ka-validate-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail=0
check() { # check DESCRIPTION COMMAND...
  desc=$1
  shift
  if "$@"; then echo "ok   - $desc"; else echo "FAIL - $desc"; fail=1; fi
}
# section TASK: the lines of TASK's block in the text report
section() { awk -v t="== $1:" 'index($0, t) == 1 {on = 1; print; next} /^== / {on = 0} on' "$WORK/bad.txt"; }
has() { # has TASK REGEX: a line of TASK's block matches REGEX
  section "$1" | grep -Eq "$2"
}

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

# WARN does not fail unless --strict: an impossible time floor on a good task
"$BIN/envctl" validate --tasks "$SRC/tasks" host/gelu --seeds 1 --reps 2 --warmup 0 --quiet \
  --min-time-us 1e12 > "$WORK/warn.txt" 2>&1
rc=$?
check "a WARN alone exits 0" test $rc -eq 0
check "the WARN is the time floor, with the case times" \
  grep -Eq '^  WARN time_floor@host +baseline below .*case n1M' "$WORK/warn.txt"
check "baseline times per case are in the report" grep -Eq '^    host +n_odd +held-out +[0-9.]+ ms' \
  "$WORK/warn.txt"
"$BIN/envctl" validate --tasks "$SRC/tasks" host/gelu --seeds 1 --reps 2 --warmup 0 --quiet \
  --min-time-us 1e12 --strict > /dev/null 2>&1
check "--strict turns the WARN into exit 1" test $? -eq 1

if [ $fail -ne 0 ]; then
  echo "--- report of the broken fixtures"
  cat "$WORK/bad.txt"
  cat "$WORK/stderr.txt"
fi
exit $fail
