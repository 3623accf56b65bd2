# Shared by the shell tests of envctl run (tests/agents_run.sh, tests/agents_experiment.sh):
# sourced after WORK is set. Gives `fail` (1 once a check failed), a cleanup on exit that
# stops RUN_PID, GX_PID and SRV_PID and removes WORK (kept when KA_KEEP_WORK is set),
# check and jcheck.
fail=0
cleanup() {
  [ -n "${RUN_PID:-}" ] && kill "$RUN_PID" 2>/dev/null
  [ -n "${GX_PID:-}" ] && kill "$GX_PID" 2>/dev/null
  [ -n "${SRV_PID:-}" ] && kill "$SRV_PID" 2>/dev/null
  wait 2>/dev/null
  if [ -n "${KA_KEEP_WORK:-}" ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
# check DESC COMMAND...: prints ok/FAIL; a failure sets fail=1
check() {
  desc=$1
  shift
  if "$@"; then echo "ok   - $desc"; else echo "FAIL - $desc"; fail=1; fi
}
# jcheck DESC FILE EXPR [SHOW]: EXPR over d = the JSON of FILE; on failure prints SHOW
# (a Python expression, default d) so that the log says what was there
jcheck() {
  check "$1" python3 -c "
import json,sys
try:
    d=json.load(open(sys.argv[1]))
    ok=bool($3)
except Exception as e:
    d=None; ok=False; print('  (%s: %s)' % (sys.argv[1], e))
if not ok and d is not None: print('  ' + json.dumps(${4:-d})[:1500])
sys.exit(0 if ok else 1)" "$2"
}
