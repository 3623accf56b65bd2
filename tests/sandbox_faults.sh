#!/bin/sh
# Faults and sandbox probes through the whole loop on the host backend, with real
# processes (envserver + gpuexec + envctl): the runs of tests/adversarial/manifest.yaml
# whose harness is sandbox_faults (read with adversarial_list), in file order, one
# episode per task variant (the task as shipped; imports: any, a copy whose import
# allow-list is opened so that the layers behind it are reached; timeout_s, a copy with
# a short deadline): includes of files outside the workspace, a fork bomb, processes
# left behind that escape the process group, abort(), megabytes of output, probes of
# files, network, signals and ptrace, a memory hog, an endless loop, each followed by an
# honest submission on the same executor; issue 16's: .incbin in asm (directly and pasted
# by a gas macro), a compile that never ends, files left in /dev/shm. Then the escape
# with seccomp turned off, where the supervisor must kill and report what the submission
# left behind; then Landlock turned off (as on a kernel without it), where the assembly
# check and the evaluation's private /dev/shm must still hold.
# Checks each run's verdict and text (and a few run-specific logs) in the sqlite trace
# store (docs/sandbox.md), and prints a table last.
# usage: sandbox_faults.sh BIN_DIR SOURCE_DIR
set -u
set -f # no pathname expansion: texts of the manifest are split unquoted
BIN=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
. "$SRC/tests/lib.sh" # check, cleanup of KA_PIDS on EXIT/INT/TERM
ka_init sandbox
TAB=$(printf '\t')
status_num() { # kernelarena.proto Status name -> number
  case $1 in
    OK) echo 1 ;; COMPILE_ERROR) echo 2 ;; INCORRECT) echo 3 ;; RUNTIME_ERROR) echo 4 ;;
    TIMEOUT) echo 5 ;; INFRA_ERROR) echo 6 ;; FLAGGED) echo 7 ;; OOM) echo 8 ;; *) echo 0 ;;
  esac
}
status_name() {
  case $1 in
    1) echo OK ;; 2) echo COMPILE_ERROR ;; 3) echo INCORRECT ;; 4) echo RUNTIME_ERROR ;;
    5) echo TIMEOUT ;; 6) echo INFRA_ERROR ;; 7) echo FLAGGED ;; 8) echo OOM ;; *) echo "${1:-none}" ;;
  esac
}

RUNS=$WORK/runs.tsv
if ! "$BIN/adversarial_list" "$SRC/tests/adversarial/manifest.yaml" sandbox_faults >"$RUNS" ||
  [ ! -s "$RUNS" ]; then
  echo "FAIL - cannot read the sandbox_faults runs of tests/adversarial/manifest.yaml"
  exit 1
fi

# Task variants: each run's task copied to $WORK/tasks with small cases (the faults, not
# the speed, are under test; GELU's sizes shrunk) and a generous deadline (an evaluation
# flushes twice the last-level cache before each of its 120 timed calls, which takes
# long on a loaded 2-core machine), renamed by suffix: _any (allowed_imports: ["*"]),
# _tN (deadline N s).
variant() { # variant TASK IMPORTS TIMEOUT -> the variant's task id
  v=$1
  [ "$2" = any ] && v=${v}_any
  [ "$3" -gt 0 ] && v=${v}_t$3
  echo "$v"
}
make_variant() { # make_variant TASK IMPORTS TIMEOUT
  v=$(variant "$1" "$2" "$3")
  [ -d "$WORK/tasks/$v" ] && return 0
  mkdir -p "$(dirname "$WORK/tasks/$v")"
  cp -r "$SRC/tasks/$1" "$WORK/tasks/$v"
  y=$WORK/tasks/$v/task.yaml
  dl=150
  [ "$3" -gt 0 ] && dl=$3
  sed -i -e "s/^timeout_s: .*/timeout_s: $dl/" -e "s/n: 1048576/n: 4096/" \
    -e "s/n: 2097152/n: 8192/" -e "s/n: 1000003/n: 1003/" -e "s|^id: .*|id: $v|" "$y"
  [ "$2" = any ] && printf 'allowed_imports: ["*"]\n' >>"$y"
  return 0
}
while IFS="$TAB" read -r name file plan task backend imports timeout expect text; do
  make_variant "$task" "$imports" "$timeout"
done <"$RUNS"
make_variant host/gelu any 0 # the seccomp-off stack
rm -f /tmp/ka-sandbox-escape.txt /dev/shm/ka-shm-persist-probe

# start_stack NAME [ENV=VALUE...]: an envserver and a gpuexec in $WORK/NAME
start_stack() {
  name=$1
  shift
  st=$WORK/$name
  mkdir -p "$st"
  "$BIN/envserver" --state "$st" --tasks "$WORK/tasks" >"$st/server.log" 2>&1 &
  KA_PIDS="$KA_PIDS $!"
  env "$@" "$BIN/gpuexec" --server "ipc://$st/exec.ipc" --tasks "$WORK/tasks" --backends host \
    >"$st/gpuexec.log" 2>&1 &
  GX=$!
  KA_PIDS="$KA_PIDS $GX"
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

# episode STACK TASK FILE...: one episode of TASK whose step k submits the k-th FILE
# (relative to the source tree) as the task's source
episode() {
  name=$1
  task=$2
  shift 2
  list="$*"
  task_n=$(echo "$task" | tr / _)
  source=$(sed -n 's/^source: *//p' "$WORK/tasks/$task/task.yaml")
  AGENT="set -- $list; shift \$KA_STEP; cp $SRC/\$1 $source"
  ka_run "$BIN/envctl" episode --server "ipc://$WORK/$name/env.ipc" --task "$task" --seed 11 \
    --max-steps $# --workspace "$WORK/$name/ws-$task_n" --agent "command:$AGENT" \
    >"$WORK/$name/episode.$task_n.out" 2>&1
  echo "episode $name $task exited $?"
  OUTF=$WORK/$name/episode.$task_n.out
  EP=$(awk '/^episode ep-/ {sub(":","",$2); print $2; exit}' "$OUTF")
  DB=$WORK/$name/trace.db
  grep -E '^(step|  [a-z])' "$OUTF" | cut -c1-160
}
q() { sqlite3 "$DB" "SELECT $1 FROM steps WHERE episode_id='$EP' AND step=$2"; }
has() { q "$1" "$2" | grep -q -- "$3"; }
hasnot() { ! q "$1" "$2" | grep -q -- "$3"; }
has_any() { has message "$1" "$2" || has compile_log "$1" "$2" || has runtime_log "$1" "$2"; }
nocontent() { ! { q compile_log "$1"; q runtime_log "$1"; } | grep -q 'root:'; } # step $1

# extra checks of particular runs (step $2 of the current episode)
extra_checks() {
  n=$1
  k=$2
  case $n in
    include_passwd)
      check "$n: the compile log shows no file content" hasnot compile_log "$k" 'root:' ;;
    include_macro)
      check "$n: the log names the digraph include" has compile_log "$k" '/etc/shadow> is not allowed' ;;
    forkbomb | escape | probe)
      check "$n: refused before any module process ran (no runtime log of it)" \
        hasnot runtime_log "$k" 'forbidden system call' ;;
    spam)
      len=$(q "length(runtime_log)" "$k")
      check "$n: runtime log truncated to at most 70000 bytes (got $len)" [ "${len:-0}" -le 70000 ] ;;
    probe_any)
      check "$n: no probe was allowed" hasnot runtime_log "$k" 'ALLOWED'
      check "$n: /etc/passwd not readable" has runtime_log "$k" 'probe read /etc/passwd: Permission denied'
      check "$n: nothing leaked" hasnot runtime_log "$k" 'LEAK'
      check "$n: no socket" has runtime_log "$k" 'probe socket AF_INET: Permission denied'
      check "$n: the parent cannot be killed" has runtime_log "$k" 'probe kill parent: Operation not permitted'
      check "$n: no file written outside the workdir" [ ! -e /tmp/ka-sandbox-escape.txt ] ;;
    incbin_passwd | incbin_macro)
      check "$n: no file content in the logs" nocontent "$k" ;;
    shm_persist_1 | shm_persist_2)
      check "$n: nothing of an earlier evaluation found" hasnot runtime_log "$k" 'found a file of an earlier evaluation'
      check "$n: nothing left in the machine's /dev/shm" [ ! -e /dev/shm/ka-shm-persist-probe ] ;;
    memhog)
      gib=$(q runtime_log "$k" | sed -n 's/.*malloc failed after \([0-9]*\) GiB.*/\1/p' | head -1)
      check "$n: malloc refused at the address-space limit (after ${gib:-?} GiB, limit 8)" \
        [ -n "$gib" ] && [ "$gib" -le 8 ] ;;
  esac
}

# ---- 1. the sandbox on (the default): one episode per run of consecutive runs of one
# task variant
start_stack on
GX_ON=$GX
TABLE=$WORK/table.txt
: >"$TABLE"
flush_group() { # runs the episode of the group collected in G_NAMES / G_FILES
  [ -n "$G_TASK" ] || return 0
  # shellcheck disable=SC2086
  episode on "$G_TASK" $G_FILES
  k=1
  for entry in $G_NAMES; do
    n=${entry%%:*}
    rest=${entry#*:}
    want=${rest%%:*}
    t=$(printf '%s' "${rest#*:}" | tr '\037' ' ')
    got=$(q status "$k")
    ok=ok
    match=0
    for w in $(echo "$want" | tr '|' ' '); do [ "$got" = "$(status_num "$w")" ] && match=1; done
    check "$n ($G_TASK step $k): $(status_name "$got") (expected $want)" [ $match = 1 ]
    [ $match = 1 ] || ok=MISMATCH
    if [ "$t" != "-" ]; then
      if has_any "$k" "$t"; then echo "ok   - $n: says \"$t\""; else
        echo "FAIL - $n: says \"$t\""
        fail=1
        ok=MISMATCH
      fi
    fi
    extra_checks "$n" "$k"
    printf '%-20s %-22s %-15s %-15s %s\n' "$n" "$G_TASK" "$want" "$(status_name "$got")" "$ok" >>"$TABLE"
    k=$((k + 1))
  done
  G_TASK=""
  G_NAMES=""
  G_FILES=""
}
G_TASK=""
G_NAMES=""
G_FILES=""
# (r_ names: episode and start_stack use name, task and others as globals)
while IFS="$TAB" read -r r_name r_file r_plan r_task r_backend r_imports r_timeout r_expect r_text; do
  r_v=$(variant "$r_task" "$r_imports" "$r_timeout")
  [ "$r_v" = "$G_TASK" ] || {
    flush_group </dev/null
    G_TASK=$r_v
  }
  G_FILES="$G_FILES $r_file"
  G_NAMES="$G_NAMES $r_name:$r_expect:$(printf '%s' "$r_text" | tr ' ' '\037')"
done <"$RUNS"
flush_group </dev/null
check "gpuexec survived every fault" kill -0 "$GX_ON"
left=$(ps -eo pid,ppid,stat,etime,comm | awk '$5 == "ka-escapee"')
[ -n "$left" ] && echo "$left"
check "no ka-escapee process left" [ -z "$left" ]
check "no evaluation process left under gpuexec" sh -c "! pgrep -P $GX_ON >/dev/null"

# ---- 2. seccomp off (operator's diagnostic switch): the supervisor still kills what
# the submission left behind, setsid or not, and the verdict says so
start_stack off KA_SANDBOX_SECCOMP=0
GX_OFF=$GX
episode off host/gelu_any tests/adversarial/host/escape.c tasks/host/gelu/baseline/gelu.c \
  tests/adversarial/host/prlimit_baseline.c
check "off 1 escape: RUNTIME_ERROR" [ "$(q status 1)" = 4 ]
check "off 1 the message counts the processes left behind" has message 1 'left 2 processes running'
check "off 1 the log reports the kill" has runtime_log 1 'killed by the supervisor'
check "off 2 honest submission afterwards: OK" [ "$(q status 2)" = 1 ]
# without the seccomp lock, prlimit64 ends the baseline's module process: a baseline
# failure after the candidate ran is the candidate's verdict, never INFRA_ERROR
check "off 3 prlimit of the baseline (no seccomp): RUNTIME_ERROR" [ "$(q status 3)" = 4 ]
check "off 3 the baseline's process was ended by the candidate" has runtime_log 3 'RLIMIT_AS, 1 MiB) = 0'
check "off: gpuexec survived" kill -0 "$GX_OFF"
check "off: no evaluation process left under gpuexec" sh -c "! pgrep -P $GX_OFF >/dev/null"
left=$(ps -eo pid,ppid,stat,etime,comm | awk '$5 == "ka-escapee"')
[ -n "$left" ] && echo "$left"
check "off: no ka-escapee process left" [ -z "$left" ]
printf '%-20s %-22s %-15s %-15s %s\n' escape_seccomp_off host/gelu_any RUNTIME_ERROR \
  "$(status_name "$(q status 1)")" "$([ "$(q status 1)" = 4 ] && echo ok || echo MISMATCH)" >>"$TABLE"
printf '%-20s %-22s %-15s %-15s %s\n' prlimit_seccomp_off host/gelu_any RUNTIME_ERROR \
  "$(status_name "$(q status 3)")" "$([ "$(q status 3)" = 4 ] && echo ok || echo MISMATCH)" >>"$TABLE"

# ---- 3. Landlock off (as on a kernel without it): the assembly check still refuses
# .incbin, and /dev/shm is still private to each evaluation (a tmpfs in a mount
# namespace of its own), so the second evaluation does not find the first one's file
start_stack nolandlock KA_SANDBOX_LANDLOCK=0
GX_NL=$GX
episode nolandlock host/gelu_any tests/adversarial/host/incbin_passwd.c \
  tests/adversarial/host/shm_persist.c tests/adversarial/host/shm_persist.c
check "no Landlock 1 incbin: COMPILE_ERROR" [ "$(q status 1)" = 2 ]
check "no Landlock 1 incbin: refused by the assembly check" has compile_log 1 'uses the directive .incbin'
check "no Landlock 1 incbin: no file content in the logs" nocontent 1
check "no Landlock 2 shm_persist: OK" [ "$(q status 2)" = 1 ]
check "no Landlock 2 shm_persist: the file is made (in the evaluation's own /dev/shm)" \
  has runtime_log 2 'shm_persist: create /dev/shm/ka-shm-persist-probe: done'
check "no Landlock 3 shm_persist: OK" [ "$(q status 3)" = 1 ]
check "no Landlock 3 shm_persist: the first evaluation's file is not there" \
  has runtime_log 3 'shm_persist: open /dev/shm/ka-shm-persist-probe: No such file'
check "no Landlock: nothing left in the machine's /dev/shm" [ ! -e /dev/shm/ka-shm-persist-probe ]
check "no Landlock: gpuexec survived" kill -0 "$GX_NL"
for k in 1 2 3; do
  printf '%-20s %-22s %-15s %-15s %s\n' "nolandlock_$k" host/gelu_any \
    "$([ $k = 1 ] && echo COMPILE_ERROR || echo OK)" "$(status_name "$(q status $k)")" \
    "$([ "$(q status $k)" = "$([ $k = 1 ] && echo 2 || echo 1)" ] && echo ok || echo MISMATCH)" >>"$TABLE"
done

echo
printf '%-20s %-22s %-15s %-15s %s\n' run task expected got ok
cat "$TABLE"
[ $fail -eq 0 ] && echo "sandbox_faults: all checks passed"
exit $fail
