# tests/lib.sh: what every shell test shares. Source it first, after setting nothing:
#   . "$SRC/tests/lib.sh"; ka_init NAME
# It gives:
#   ka_init NAME        WORK=$(mktemp -d /tmp/ka-NAME-XXXXXX), fail=0, and a cleanup that
#                       runs on EXIT, INT and TERM (dash runs no EXIT trap on a signal, so
#                       the signals are trapped explicitly and exit 130 / 143)
#   cleanup             stops RUN_PID, GX_PID, SRV_PID and every pid in KA_PIDS (SIGTERM,
#                       SIGKILL to what still runs 5 s later: an agent episode of envctl
#                       stops its agent first), waits for
#                       them, calls ka_cleanup_hook if the script defines one, and removes
#                       WORK (kept, and named, when KA_KEEP_WORK is set)
#   check DESC CMD...   runs CMD; prints "ok   - DESC" or "FAIL - DESC" (and sets fail=1)
#   jcheck DESC FILE EXPR [SHOW]
#                       check of a Python expression over d = the JSON of FILE (a = d['argv']
#                       where d is an object); on failure prints SHOW (default d)
#   ka_task_copy TASK [SED-EXPR...]
#                       copies tasks/TASK into $WORK/tasks/TASK and applies the sed
#                       expressions to its task.yaml (the test profile: smaller cases, a
#                       shorter timeout_s); the source tree's task is never changed
#   ka_stack TASKS [ENVSERVER-ARGS...] [-- GPUEXEC-ARGS...]
#                       starts envserver (state $WORK/state) and a host-backend gpuexec on
#                       the task folder TASKS, sets SRV_PID, GX_PID, STATE and URL, and waits
#                       until the server sees an executor (fails the test after 30 s);
#                       gpuexec's TMPDIR (evaluation folders, compile cache) is $WORK/tmp
#   ka_run CMD...       runs CMD in the background and waits for it, returning its status:
#                       a shell runs its traps only after a foreground command ends, so a
#                       long command (an episode, a run) goes through ka_run, and a TERM
#                       stops the test at once (cleanup kills CMD too, as KA_FG)
#   ka_procs_in DIR     prints the pids of this user's processes whose working folder is
#                       DIR or below it (an evaluation left behind, even if orphaned)
# Every test uses its own WORK: state folders and ipc:// sockets live there, so tests run
# in parallel (ctest -j) without sharing anything.

fail=0
KA_PIDS=""

ka_init() {
  WORK=$(mktemp -d "/tmp/ka-$1-XXXXXX") || exit 1
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

cleanup() {
  ka_stop ${KA_FG:-} ${RUN_PID:-} ${GX_PID:-} ${SRV_PID:-} $KA_PIDS
  wait 2>/dev/null
  if command -v ka_cleanup_hook >/dev/null 2>&1; then ka_cleanup_hook; fi
  if [ -n "${KA_KEEP_WORK:-}" ]; then
    echo "kept $WORK"
  elif [ -n "${WORK:-}" ]; then
    rm -rf "$WORK"
  fi
}

# ka_stop PID...: SIGTERM to each, SIGKILL to those still running (not zombies) 5 s later
ka_stop() {
  for p in "$@"; do kill "$p" 2>/dev/null; done
  n=0
  while :; do
    alive=""
    for p in "$@"; do
      kill -0 "$p" 2>/dev/null || continue
      [ "$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f1)" = Z ] && continue
      alive="$alive $p"
    done
    [ -z "$alive" ] && return 0
    [ $n -ge 50 ] && break
    sleep 0.1
    n=$((n + 1))
  done
  for p in $alive; do kill -KILL "$p" 2>/dev/null; done
}

check() {
  desc=$1
  shift
  if "$@"; then echo "ok   - $desc"; else echo "FAIL - $desc"; fail=1; fi
}

jcheck() {
  check "$1" python3 -c "
import json,sys
try:
    d=json.load(open(sys.argv[1]))
    a=d.get('argv') if isinstance(d, dict) else None
    ok=bool($3)
except Exception as e:
    d=None; ok=False; print('  (%s: %s)' % (sys.argv[1], e))
if not ok and d is not None: print('  ' + json.dumps(${4:-d})[:1500])
sys.exit(0 if ok else 1)" "$2"
}

ka_task_copy() {
  t=$1
  shift
  mkdir -p "$WORK/tasks/$(dirname "$t")"
  cp -r "$SRC/tasks/$t" "$WORK/tasks/$(dirname "$t")/"
  for e in "$@"; do
    sed -i -e "$e" "$WORK/tasks/$t/task.yaml"
  done
}

ka_stack() {
  tasks=$1
  shift
  srv_args=""
  gx_args=""
  side=srv
  for a in "$@"; do
    if [ "$a" = "--" ]; then
      side=gx
    elif [ $side = srv ]; then
      srv_args="$srv_args $a"
    else
      gx_args="$gx_args $a"
    fi
  done
  STATE=$WORK/state
  # shellcheck disable=SC2086
  "$BIN/envserver" --state "$STATE" --tasks "$tasks" $srv_args >"$WORK/server.log" 2>&1 &
  SRV_PID=$!
  mkdir -p "$WORK/tmp"
  # shellcheck disable=SC2086
  TMPDIR=$WORK/tmp "$BIN/gpuexec" --server "ipc://$STATE/exec.ipc" --tasks "$tasks" --backends host $gx_args \
    >"$WORK/gpuexec.log" 2>&1 &
  GX_PID=$!
  URL="ipc://$STATE/env.ipc"
  i=0
  until "$BIN/envctl" health --server "$URL" --timeout 2 2>/dev/null | grep -q "executors=[1-9]"; do
    i=$((i + 1))
    if [ $i -gt 150 ]; then
      echo "FAIL - server/executor did not come up"
      cat "$WORK/server.log" "$WORK/gpuexec.log"
      exit 1
    fi
    sleep 0.2
  done
}

ka_run() {
  "$@" &
  KA_FG=$!
  wait "$KA_FG"
  ka_rc=$?
  KA_FG=
  return $ka_rc
}

ka_procs_in() {
  for d in /proc/[0-9]*; do
    c=$(readlink "$d/cwd" 2>/dev/null) || continue
    case $c in "$1" | "$1"/*) echo "${d#/proc/}" ;; esac
  done
}
