#!/bin/sh
# Installs what the tests need, builds with warnings as errors, and runs test lanes
# (HACKING.md "Lanes"):
#   scripts/test.sh [LANE...]     LANE: fast, format, sanitize, full, fuzz
# With no LANE, all five in that order (what .ci/run runs). A failed lane does not stop
# the next; the exit status is 1 when any failed. Before the first lane, the build
# folders the lanes need are built one after the other while the Python packages install
# beside them (scripts/install-python-deps.sh, whose output is shown when it ends). Tests
# run in parallel: ctest -j with two slots per core (KA_JOBS); a CPU-heavy test takes
# two (tests/lanes.cmake KA_HEAVY_TESTS), a test that mostly waits one, timing tests run
# alone (RUN_SERIAL).
#   fast      ctest -L fast in build/ (about 30 s on 2 cores)
#   format    ctest -L format: clang-format --dry-run --Werror over the C sources
#   sanitize  an ASan + UBSan build in build-asan/ (-DKA_SANITIZER=address,undefined; the
#             programs of the fast lane's tests only, target ka_fast_lane), LeakSanitizer
#             on, running the fast lane's tests there (ctest -L sanitize)
#   full      every test in build/; the tests of lanes fast and format are not run again
#             when those lanes ran earlier in the same invocation (their verdicts stand)
#   fuzz      15 s of each libFuzzer target (one per core at a time) in their clang
#             build, build-fuzz/
#   trainers  ctest -L trainers in build/ (python_faults_verifiers, python_faults_nemo_gym,
#             python_faults_trl_grpo:
#             in their own venvs, made first by scripts/install-python-deps.sh
#             --trainers); not among the defaults (CI's), and full leaves its tests out
#             (docs/trainers.md)
# Environment: KA_BUILD_DIR (default build), KA_ASAN_BUILD_DIR (build-asan),
# KA_NO_INSTALL=1 skips the package installs (scripts/install-deps.sh,
# scripts/install-python-deps.sh), KA_JOBS (ctest's slots; default twice the number of
# cores).
set -eu
cd "$(dirname "$0")/.."
LANES=${*:-fast format sanitize full fuzz}
for l in $LANES; do
  case $l in
    fast | format | sanitize | full | fuzz | trainers) ;;
    *)
      echo "test.sh: unknown lane '$l' (fast, format, sanitize, full, fuzz, trainers)" >&2
      exit 2
      ;;
  esac
done
BUILD=${KA_BUILD_DIR:-build}
ASAN=${KA_ASAN_BUILD_DIR:-build-asan}
JOBS=${KA_JOBS:-$(($(nproc) * 2))}
t_start=$(date +%s)
if [ -z "${KA_NO_INSTALL:-}" ]; then
  ./scripts/install-deps.sh
fi

failed=""
passed=""
lane_done() { # lane_done LANE STATUS
  if [ "$2" -eq 0 ]; then passed="$passed $1"; else failed="$failed $1"; fi
  [ "$1" = fast ] || [ "$1" = format ] && ran_main="$ran_main $1"
  echo "== lane $1: $([ "$2" -eq 0 ] && echo passed || echo FAILED) ($(($(date +%s) - t0)) s)"
}
ran_main=""
ran() { case " $ran_main " in *" $1 "*) return 0 ;; esac; return 1; }
ctest_in() { # ctest_in DIR ARGS...
  dir=$1
  shift
  (cd "$dir" && ctest --output-on-failure --timeout 900 -j"$JOBS" "$@")
}
# The build folders, each built once (its status kept: a lane whose build failed fails,
# the next lane does not build it again): main ($BUILD), asan ($ASAN), fuzz (build-fuzz).
build_main() {
  [ -z "${main_rc:-}" ] || return "$main_rc"
  main_rc=0
  KA_BUILD_DIR=$BUILD ./scripts/build.sh -DKA_WERROR=ON || main_rc=1
  return "$main_rc"
}
build_asan() { # only the programs the fast lane's tests run (tests/lanes.cmake ka_fast_lane)
  [ -z "${asan_rc:-}" ] || return "$asan_rc"
  asan_rc=0
  { cmake -S . -B "$ASAN" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKA_WERROR=ON \
    -DKA_SANITIZER=address,undefined >/dev/null &&
    cmake --build "$ASAN" -j"$(nproc)" --target ka_fast_lane; } || asan_rc=1
  return "$asan_rc"
}
build_fuzz() { # the libFuzzer targets (fuzz/run.sh) only, in their own clang build folder
  [ -z "${fuzz_rc:-}" ] || return "$fuzz_rc"
  fuzz_rc=0
  { CC=clang cmake -S . -B build-fuzz -DKA_FUZZ=ON -DKA_BUILD_CUDA=OFF >/dev/null &&
    cmake --build build-fuzz -j"$(nproc)" --target fuzz_request fuzz_task_yaml fuzz_plan; } ||
    fuzz_rc=1
  return "$fuzz_rc"
}
# Before the lanes: the Python packages install in the background (one core, 46 s from a
# warm pip cache) while the build folders the lanes need are built (two cores; a build
# reads only that .venv/bin/python3 exists, which is made first). PIP_COMPILE=0: pip
# writes no bytecode of the packages (83 s with it); Python writes that of the modules a
# test imports, once, at the first import. A failed install ends the run, as before any
# lane.
if [ -z "${KA_NO_INSTALL:-}" ]; then
  [ -x .venv/bin/python3 ] || python3 -m venv .venv
  pip_log=$(mktemp /tmp/ka-pip-XXXXXX)
  PIP_COMPILE=0 ./scripts/install-python-deps.sh >"$pip_log" 2>&1 &
  pip_pid=$!
fi
for lane in $LANES; do
  case $lane in
    fast | format | full | trainers) build_main || true ;;
    sanitize) build_asan || true ;;
    fuzz) build_fuzz || true ;;
  esac
done
if [ -n "${pip_pid:-}" ]; then
  pip_rc=0
  wait "$pip_pid" || pip_rc=$?
  cat "$pip_log"
  rm -f "$pip_log"
  if [ "$pip_rc" -ne 0 ]; then
    echo "test.sh: scripts/install-python-deps.sh failed (exit $pip_rc)" >&2
    exit 1
  fi
fi
echo "== installs and builds: $(($(date +%s) - t_start)) s"

for lane in $LANES; do
  t0=$(date +%s)
  echo "== lane $lane"
  rc=0
  case $lane in
    fast)
      build_main && ctest_in "$BUILD" -L fast || rc=1
      ;;
    format)
      build_main && ctest_in "$BUILD" -L format || rc=1
      ;;
    sanitize)
      build_asan && ctest_in "$ASAN" -L sanitize || rc=1
      ;;
    full)
      skip="trainers"
      echo "(lane trainers' tests are left out: scripts/test.sh trainers runs them)"
      ran fast && skip="$skip|fast"
      ran format && skip="${skip:+$skip|}format"
      [ "$skip" = trainers ] || echo "(the tests of lane(s) ${skip#trainers|} ran above; the rest of full now)"
      build_main && ctest_in "$BUILD" -L full -LE "^($skip)\$" || rc=1
      # the figures of tests that print them when they pass (ctest keeps their output in
      # its log only): the network-namespace test's step overhead (issue 20)
      grep -h "^step overhead\|^re-dispatched steps" "$BUILD/Testing/Temporary/LastTest.log" \
        2>/dev/null | sed 's/^/netns: /' || true
      ;;
    trainers)
      if [ -z "${KA_NO_INSTALL:-}" ]; then ./scripts/install-python-deps.sh --trainers || rc=1; fi
      [ "$rc" -ne 0 ] || { build_main && ctest_in "$BUILD" -L trainers; } || rc=1
      ;;
    fuzz)
      build_fuzz && ctest_in build-fuzz -R fuzz_short || rc=1
      ;;
  esac
  lane_done "$lane" "$rc"
done
echo "== lanes passed:${passed:- none}; failed:${failed:- none} ($(($(date +%s) - t_start)) s in all)"
[ -z "$failed" ]
