#!/bin/sh
# Faults and sandbox probes through the whole loop on the host backend, with real
# processes (envserver + gpuexec + envctl) and the submissions of tests/candidates/faults:
# includes of files outside the workspace, a fork bomb, processes left behind that
# escape the process group, abort(), megabytes of output, probes of files, network,
# signals and ptrace, a memory hog, an endless loop; then an honest submission on the
# same executor. Then the same escape with seccomp turned off, where the supervisor
# must kill and report what the submission left behind.
# Checks each step's verdict and logs in the sqlite trace store (docs/sandbox.md).
# usage: sandbox_faults.sh BIN_DIR SOURCE_DIR
set -u
BIN=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
F=$SRC/tests/candidates/faults
WORK=$(mktemp -d /tmp/ka-sandbox-XXXXXX)
fail=0
PIDS=""
cleanup() {
  for p in $PIDS; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
check() { # check DESCRIPTION COMMAND...
  desc=$1
  shift
  if "$@"; then echo "ok   - $desc"; else echo "FAIL - $desc"; fail=1; fi
}

# A copy of host/gelu with small cases (the faults, not the speed, are under test) and
# a generous deadline: an evaluation flushes twice the last-level cache before each of
# its 120 timed calls, which takes long on a loaded 2-core machine. A second copy,
# host/gelu_short, has a short deadline for the endless loop.
mkdir -p "$WORK/tasks/host"
cp -r "$SRC/tasks/host/gelu" "$WORK/tasks/host/"
Y=$WORK/tasks/host/gelu/task.yaml
sed -i -e "s/^timeout_s: .*/timeout_s: 150/" -e "s/n: 1048576/n: 4096/" \
  -e "s/n: 2097152/n: 8192/" -e "s/n: 1000003/n: 1003/" "$Y"
cp -r "$WORK/tasks/host/gelu" "$WORK/tasks/host/gelu_short"
sed -i -e "s/^timeout_s: .*/timeout_s: 20/" -e "s|^id: host/gelu|id: host/gelu_short|" \
  "$WORK/tasks/host/gelu_short/task.yaml"
rm -f /tmp/ka-sandbox-escape.txt

# start_stack NAME [ENV=VALUE...]: an envserver and a gpuexec in $WORK/NAME
start_stack() {
  name=$1
  shift
  st=$WORK/$name
  mkdir -p "$st"
  "$BIN/envserver" --state "$st" --tasks "$WORK/tasks" >"$st/server.log" 2>&1 &
  PIDS="$PIDS $!"
  env "$@" "$BIN/gpuexec" --server "ipc://$st/exec.ipc" --tasks "$WORK/tasks" --backends host \
    >"$st/gpuexec.log" 2>&1 &
  GX=$!
  PIDS="$PIDS $GX"
  i=0
  until "$BIN/envctl" health --server "ipc://$st/env.ipc" --timeout 2 2>/dev/null |
    grep -q "executors=[1-9]"; do
    i=$((i + 1))
    if [ $i -gt 150 ]; then
      echo "FAIL - $name: server/executor did not come up"
      cat "$st/server.log" "$st/gpuexec.log"
      exit 1
    fi
    sleep 0.2
  done
}

# episode NAME TASK LIST...: one episode of TASK whose step k submits the k-th file of LIST
episode() {
  name=$1
  task=$2
  shift 2
  list="$*"
  task_n=$(echo "$task" | tr / _)
  n=$#
  AGENT="set -- $list; shift \$KA_STEP; f=\$1; case \$f in baseline) cp $SRC/tasks/host/gelu/baseline/gelu.c gelu.c ;; hang.c) cp $SRC/tests/candidates/host_gelu/hang.c gelu.c ;; *) cp $F/\$f gelu.c ;; esac"
  "$BIN/envctl" episode --server "ipc://$WORK/$name/env.ipc" --task "$task" --seed 11 \
    --max-steps "$n" --workspace "$WORK/$name/ws-$task_n" --agent "command:$AGENT" \
    >"$WORK/$name/episode.$task_n.out" 2>&1
  echo "episode $name $task exited $?"
  OUTF=$WORK/$name/episode.$task_n.out
  EP=$(awk '/^episode ep-/ {sub(":","",$2); print $2; exit}' "$OUTF")
  DB=$WORK/$name/trace.db
}
q() { sqlite3 "$DB" "SELECT $1 FROM steps WHERE episode_id='$EP' AND step=$2"; }
has() { q "$1" "$2" | grep -q -- "$3"; }
hasnot() { ! q "$1" "$2" | grep -q -- "$3"; }

# ---- 1. the sandbox on (the default)
start_stack on
GX_ON=$GX
episode on host/gelu_short hang.c
grep -E '^(step|  [a-z])' "$OUTF" | cut -c1-160
check "endless loop: TIMEOUT" [ "$(q status 1)" = 5 ]
LIST="include_passwd.c include_macro.c forkbomb.c escape.c abort.c spam.c probe.c memhog.c baseline"
episode on host/gelu $LIST
grep -E '^(step|  [a-z])' "$OUTF" | cut -c1-160

check "1 include of /etc/passwd: COMPILE_ERROR" [ "$(q status 1)" = 2 ]
check "1 the compile log names the refused include" has compile_log 1 '"/etc/passwd" is not allowed'
check "1 the compile log shows no file content" hasnot compile_log 1 'root:'
check "2 computed include and digraph: COMPILE_ERROR" [ "$(q status 2)" = 2 ]
check "2 the log names the macro include" has compile_log 2 'computed includes are not allowed'
check "2 the log names the digraph include" has compile_log 2 '/etc/shadow> is not allowed'
check "3 fork bomb: RUNTIME_ERROR" [ "$(q status 3)" = 4 ]
check "3 the log names the forbidden call" has runtime_log 3 'forbidden system call'
check "4 escape (setsid + double fork): RUNTIME_ERROR" [ "$(q status 4)" = 4 ]
check "4 the log names the forbidden call" has runtime_log 4 'forbidden system call'
check "5 abort(): RUNTIME_ERROR" [ "$(q status 5)" = 4 ]
check "6 megabytes of output: OK (correct result)" [ "$(q status 6)" = 1 ]
len=$(q "length(runtime_log)" 6)
check "6 runtime log truncated to at most 70000 bytes (got $len)" [ "${len:-0}" -le 70000 ]
check "6 the log says it was truncated" has runtime_log 6 'output truncated'
check "7 sandbox probes: OK (correct result)" [ "$(q status 7)" = 1 ]
check "7 probes ran" has runtime_log 7 'probe kill init'
check "7 no probe was allowed" hasnot runtime_log 7 'ALLOWED'
check "7 /etc/passwd not readable" has runtime_log 7 'probe read /etc/passwd: Permission denied'
check "7 nothing leaked" hasnot runtime_log 7 'LEAK'
check "7 no socket" has runtime_log 7 'probe socket AF_INET: Permission denied'
check "7 the parent cannot be killed" has runtime_log 7 'probe kill parent: Operation not permitted'
check "7 no file written outside the workdir" [ ! -e /tmp/ka-sandbox-escape.txt ]
check "8 memory hog: OK (correct result)" [ "$(q status 8)" = 1 ]
gib=$(q runtime_log 8 | sed -n 's/.*malloc failed after \([0-9]*\) GiB.*/\1/p' | head -1)
check "8 malloc refused at the address-space limit (after ${gib:-?} GiB, limit 8)" \
  [ -n "$gib" ] && [ "$gib" -le 8 ]
check "9 honest submission afterwards: OK" [ "$(q status 9)" = 1 ]
check "gpuexec survived every fault" kill -0 "$GX_ON"
left=$(ps -eo pid,ppid,stat,etime,comm | awk '$5 == "ka-escapee"')
[ -n "$left" ] && echo "$left"
check "no ka-escapee process left" [ -z "$left" ]
check "no evaluation process left under gpuexec" sh -c "! pgrep -P $GX_ON >/dev/null"

# ---- 2. seccomp off (operator's diagnostic switch): the supervisor still kills what
# the submission left behind, setsid or not, and the verdict says so
start_stack off KA_SANDBOX_SECCOMP=0
GX_OFF=$GX
episode off host/gelu escape.c baseline
grep -E '^(step|  [a-z])' "$OUTF" | cut -c1-160
check "off 1 escape: RUNTIME_ERROR" [ "$(q status 1)" = 4 ]
check "off 1 the message counts the processes left behind" has message 1 'left 2 processes running'
check "off 1 the log reports the kill" has runtime_log 1 'killed by the supervisor'
check "off 2 honest submission afterwards: OK" [ "$(q status 2)" = 1 ]
check "off: gpuexec survived" kill -0 "$GX_OFF"
check "off: no evaluation process left under gpuexec" sh -c "! pgrep -P $GX_OFF >/dev/null"
left=$(ps -eo pid,ppid,stat,etime,comm | awk '$5 == "ka-escapee"')
[ -n "$left" ] && echo "$left"
check "off: no ka-escapee process left" [ -z "$left" ]

[ $fail -eq 0 ] && echo "sandbox_faults: all checks passed"
exit $fail
