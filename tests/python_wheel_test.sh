#!/bin/sh
# The wheel with the server inside it (docs/install.md, "A wheel with the server"):
# scripts/build-wheel.sh builds it from BUILD_DIR; a fresh venv installs it with pip
# (--no-index --no-deps: nothing is downloaded); its console script envctl, run from a
# folder without tasks/, runs an episode with the bundled envserver, gpuexec, ka-runner
# and tasks; the wheel's Python client imports from the fresh venv (its dependencies
# seen through a .pth to PYTHON's site-packages); the launcher of a source install (no
# programs bundled) says so and exits 2.
# usage: python_wheel_test.sh BUILD_DIR SOURCE_DIR PYTHON
set -u
BUILD=$1
SRC=$2
PY=$3
. "$SRC/tests/lib.sh" # check, cleanup on EXIT/INT/TERM
ka_init pywheel

KA_PYTHON=$PY "$SRC/scripts/build-wheel.sh" "$BUILD" "$WORK/dist" >"$WORK/wheel.txt" 2>&1
check "scripts/build-wheel.sh builds a wheel" test $? -eq 0
WHL=$(tail -n 1 "$WORK/wheel.txt")
case $WHL in
  *-py3-none-linux_*.whl) check "it is tagged for this platform: $(basename "$WHL")" true ;;
  *) check "it is tagged for this platform: $(cat "$WORK/wheel.txt")" false ;;
esac
"$PY" -m venv "$WORK/venv"
V=$WORK/venv
"$V/bin/python3" -m pip install --quiet --no-index --no-deps "$WHL" >"$WORK/pip.log" 2>&1
check "pip installs it into a fresh venv" test $? -eq 0
SP=$("$V/bin/python3" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
P=$SP/kernelarena_server
check "the console script envctl is installed" test -x "$V/bin/envctl"
for f in bin/envctl bin/envserver bin/gpuexec libexec/kernelarena/ka-runner \
         share/kernelarena/tasks/host/gelu/task.yaml; do
  check "bundled: $f" test -r "$P/$f"
done
check "the bundled ka-runner is executable" test -x "$P/libexec/kernelarena/ka-runner"

mkdir -p "$WORK/elsewhere"
cd "$WORK/elsewhere" || exit 1
"$V/bin/envctl" tasks >"$WORK/tasks.txt" 2>&1
check "envctl tasks lists host/gelu" grep -q "host/gelu" "$WORK/tasks.txt"
ka_run timeout 120 "$V/bin/envctl" episode --task host/gelu --max-steps 1 >"$WORK/episode.txt" 2>&1
rc=$?
check "envctl episode exits 0 (rc $rc)" test "$rc" -eq 0
check "it used the bundled tasks" grep -q "tasks: $P/share/kernelarena/tasks" "$WORK/episode.txt"
check "its step is OK" grep -q "step 1: status OK" "$WORK/episode.txt"
[ "$fail" -eq 0 ] || cat "$WORK/episode.txt"

"$PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" >"$SP/ka_test_deps.pth"
"$V/bin/python3" -c "
import kernelarena, kernelarena_server, sys
assert kernelarena.__file__.startswith(sys.argv[1]), kernelarena.__file__
assert kernelarena_server.prefix() == sys.argv[1] + '/kernelarena_server'
print(kernelarena.__version__)" "$SP" >"$WORK/import.txt" 2>&1
check "the wheel's Python client imports from the fresh venv" test $? -eq 0

PYTHONPATH=$SRC/clients/python "$PY" -c \
  "import sys, kernelarena_server; sys.argv = ['envctl', 'tasks']; sys.exit(kernelarena_server.envctl())" \
  >"$WORK/src.txt" 2>&1
rc=$?
check "a source install's envctl exits 2 (rc $rc)" test "$rc" -eq 2
check "and says it has no server programs" grep -q "has no server programs" "$WORK/src.txt"
exit $fail
