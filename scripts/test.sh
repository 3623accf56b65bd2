#!/bin/sh
# Installs what the tests need, builds with warnings as errors, and runs test lanes
# (HACKING.md "Lanes"):
#   scripts/test.sh [LANE...]     LANE: fast, format, sanitize, full, fuzz
# With no LANE, all five in that order (what .ci/run runs). A failed lane does not stop
# the next; the exit status is 1 when any failed. Tests run in parallel (ctest -j, one
# job per core); timing tests alone (RUN_SERIAL).
#   fast      ctest -L fast in build/ (about 30 s on 2 cores)
#   format    ctest -L format: clang-format --dry-run --Werror over the C sources
#   sanitize  an ASan + UBSan build in build-asan/ (-DKA_SANITIZER=address,undefined),
#             LeakSanitizer on, running the fast lane's tests there (ctest -L sanitize)
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
# scripts/install-python-deps.sh), KA_JOBS (default: the number of cores).
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
JOBS=${KA_JOBS:-$(nproc)}
if [ -z "${KA_NO_INSTALL:-}" ]; then
  ./scripts/install-deps.sh
  ./scripts/install-python-deps.sh
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
main_built=""
build_main() {
  [ -n "$main_built" ] && return 0
  KA_BUILD_DIR=$BUILD ./scripts/build.sh -DKA_WERROR=ON
  main_built=1
}

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
      { KA_BUILD_DIR=$ASAN ./scripts/build.sh -DKA_WERROR=ON -DKA_SANITIZER=address,undefined &&
        ctest_in "$ASAN" -L sanitize; } || rc=1
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
      # the libFuzzer targets (fuzz/run.sh) in their own clang build folder
      { CC=clang cmake -S . -B build-fuzz -DKA_FUZZ=ON -DKA_BUILD_CUDA=OFF >/dev/null &&
        cmake --build build-fuzz -j"$JOBS" --target fuzz_request fuzz_task_yaml fuzz_plan &&
        ctest_in build-fuzz -R fuzz_short; } || rc=1
      ;;
  esac
  lane_done "$lane" "$rc"
done
echo "== lanes passed:${passed:- none}; failed:${failed:- none}"
[ -z "$failed" ]
