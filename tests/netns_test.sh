#!/bin/sh
# Executors on many hosts, on one machine (issue 20 item 3; docs/deploy.md): envserver and
# three gpuexec processes each in a network namespace of its own, joined by veth pairs
# (addresses only inside those namespaces), the executors dialling the server over
# tls+tcp:// with client certificates. A load of host-task episodes runs through them
# (every step's candidate sleeps 1 s in its first call, so jobs are seen in flight);
# mid-job one executor is cut off (its link set down past the server's heartbeat timeout)
# and brought back, and another is killed (SIGKILL). Checks:
#  - every episode completes and every step is recorded exactly once (one row per
#    (episode, step), none missing)
#  - the re-dispatched jobs are marked (steps.attempt > 1): as many as Health counts, at
#    least the cut one and the killed one
#  - no stale result accepted: each recorded step holds the result of the job's last
#    dispatch (worker and attempt as the server's log last assigned it), and the cut
#    executor's late result was dropped (Health.stale_results >= 1)
#  - p50 / p99 step overhead printed: a step's latency seen by the client less the
#    executor's wall time of the evaluation, for steps that were not re-dispatched
# Needs root (ip netns) and openssl; cleans up its namespaces on every exit path.
# usage: netns_test.sh BIN_DIR SOURCE_DIR
set -u
BIN=$1
SRC=$2
. "$SRC/tests/lib.sh" # check, ka_run, cleanup on EXIT/INT/TERM (+ ka_cleanup_hook)
. "$SRC/tests/certs.sh"
ka_init netns
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
  echo "FAIL - this test needs root and iproute2 (ip netns)"
  exit 1
fi
TAG=ka$$
NS_S=${TAG}s
A=10.$((100 + $$ % 100))
NEXEC=3
EPISODES=5
STEPS=3
HB_TIMEOUT=3
PORT=7443
ka_cleanup_hook() {
  for n in $NS_S ${TAG}e1 ${TAG}e2 ${TAG}e3; do ip netns del "$n" 2>/dev/null; done
}

# ---- network: one namespace per process, a veth pair from the server to each executor
ip netns add "$NS_S" || exit 1
ip -n "$NS_S" link set lo up
for i in 1 2 3; do
  ip netns add "${TAG}e$i" || exit 1
  ip link add "${TAG}s$i" netns "$NS_S" type veth peer name "${TAG}x$i" netns "${TAG}e$i" || exit 1
  ip -n "$NS_S" addr add "$A.$i.1/24" dev "${TAG}s$i"
  ip -n "${TAG}e$i" addr add "$A.$i.2/24" dev "${TAG}x$i"
  ip -n "$NS_S" link set "${TAG}s$i" up
  ip -n "${TAG}e$i" link set "${TAG}x$i" up
  ip -n "${TAG}e$i" link set lo up
done

# ---- certificates, tasks, the candidate
C=$WORK/certs
ka_certs "$C" envserver || exit 1
mkdir -p "$WORK/tasks/bench"
cp -r "$SRC/bench/tasks/bench/copy" "$WORK/tasks/bench/"
cat >"$WORK/copy.c" <<'EOS'
/* bench/copy, correct; its first call sleeps 1 s, so that a job is seen in flight */
#include <time.h>
void copy_forward(const float *x, float *y, long long n) {
  static int first = 1;
  if (first) {
    first = 0;
    struct timespec t = {1, 0};
    nanosleep(&t, 0);
  }
  for (long long i = 0; i < n; i++) y[i] = x[i];
}
EOS
# the agent: the candidate, and the times at which it started and ended
mkdir -p "$WORK/times"
cat >"$WORK/agent.sh" <<EOS
#!/bin/sh
echo "start \$KA_STEP \$(date +%s.%N)" >>"\$KA_TIMES/\$KA_EPISODE"
cp "$WORK/copy.c" copy.c
echo "end \$KA_STEP \$(date +%s.%N)" >>"\$KA_TIMES/\$KA_EPISODE"
EOS
chmod +x "$WORK/agent.sh"

# ---- processes
STATE=$WORK/state
URL=ipc://$STATE/env.ipc
ip netns exec "$NS_S" "$BIN/envserver" --state "$STATE" --tasks "$WORK/tasks" \
  --exec-listen "tls+tcp://0.0.0.0:$PORT" --tls-cert "$C/server.crt" --tls-key "$C/server.key" \
  --tls-ca "$C/ca.crt" --heartbeat-timeout $HB_TIMEOUT >"$WORK/server.log" 2>&1 &
SRV_PID=$!
# start_exec I: gpuexec in namespace I, dialling the server's address on its veth
start_exec() {
  mkdir -p "$WORK/tmp$1"
  TMPDIR=$WORK/tmp$1 ip netns exec "${TAG}e$1" "$BIN/gpuexec" --server "tls+tcp://$A.$1.1:$PORT" \
    --tls-server-name envserver --tls-ca "$C/ca.crt" --tls-cert "$C/exec.crt" \
    --tls-key "$C/exec.key" --tasks "$WORK/tasks" --backends host --heartbeat-interval 0.5 \
    --verbose >"$WORK/exec$1.log" 2>&1 &
  eval "GX$1=$!"
  KA_PIDS="$KA_PIDS $!"
}
for i in 1 2 3; do start_exec $i; done
health() { "$BIN/envctl" health --server "$URL" --timeout 3 2>/dev/null; }
# field NAME: the value of NAME= in a Health line
field() { health | tr ' ' '\n' | sed -n "s/^$1=//p"; }
i=0
until [ "$(field executors)" = 3 ]; do
  i=$((i + 1))
  if [ $i -gt 100 ]; then
    echo "FAIL - three executors did not register"
    tail -n 5 "$WORK"/*.log
    exit 1
  fi
  sleep 0.2
done
echo "ok   - three executors registered over tls+tcp:// from their namespaces"
# connects NS HOST: a TCP connection from namespace NS to HOST:PORT opens
connects() {
  ip netns exec "$1" python3 -c "import socket,sys; socket.create_connection((sys.argv[1], $PORT), 2)" \
    "$2" 2>/dev/null
}
check "executor 1 reaches the server on its own link" connects "${TAG}e1" "$A.1.1"
check "executor 1 cannot reach the server's address on executor 2's link" \
  sh -c "! ip netns exec ${TAG}e1 python3 -c \"import socket; socket.create_connection(('$A.2.1', $PORT), 2)\" 2>/dev/null"

# episodes EPISODES TIMES-DIR: starts EPISODES episodes of STEPS steps in the background,
# their agents writing into TIMES-DIR; episode$N.rc gets "rc end-time" as each ends
NEP=0
episodes() {
  mkdir -p "$2"
  for _ in $(seq 1 "$1"); do
    NEP=$((NEP + 1))
    (
      e=$NEP
      KA_TIMES=$2 "$BIN/envctl" episode --server "$URL" --task bench/copy --max-steps $STEPS \
        --workspace "$WORK/ws$e" --agent "command:$WORK/agent.sh" >"$WORK/episode$e.out" 2>&1
      echo "$? $(date +%s.%N)" >"$WORK/episode$e.rc"
    ) &
    KA_PIDS="$KA_PIDS $!"
  done
}
# wait_episodes: until every episode started has its .rc (90 s at most)
wait_episodes() {
  n=0
  while [ "$(ls "$WORK"/episode*.rc 2>/dev/null | wc -l)" -lt $NEP ] && [ $n -lt 900 ]; do
    sleep 0.1
    n=$((n + 1))
  done
}

# ---- phase 1: as many episodes as executors (no queueing): the overhead of the pool
episodes $NEXEC "$WORK/times0"
wait_episodes

# ---- phase 2: the fault load
episodes $EPISODES "$WORK/times"

# midjob I: waits until executor I is in the middle of a job of dispatch 1 (its log shows
# more jobs started than finished, and the server's last assignment to it was a first
# dispatch); 1 if that did not happen within 30 s
midjob() {
  n=0
  while [ $n -lt 300 ]; do
    started=$(grep -c ": job .* (bench/copy)$" "$WORK/exec$1.log")
    done_=$(grep -c ": job .* -> [A-Z_]* in " "$WORK/exec$1.log")
    last=$(grep -- "-> worker [^ ]*/$2/host" "$WORK/server.log" | tail -n 1)
    if [ "$started" -gt "$done_" ] && echo "$last" | grep -q "(dispatch 1)"; then
      echo "$last" | sed 's/.*job \([^ ]*\) .*/\1/'
      return 0
    fi
    sleep 0.1
    n=$((n + 1))
  done
  return 1
}
# (a worker id names gpuexec's pid, which is the pid started in the namespace: ip netns
# exec execs it)
CUT_JOB=$(midjob 1 "$GX1")
check "executor 1 is in the middle of job $CUT_JOB" [ -n "$CUT_JOB" ]
ip -n "${TAG}e1" link set "${TAG}x1" down
echo "     executor 1 cut off (link down) at $(date +%T.%N | cut -c1-12)"
sleep $((HB_TIMEOUT + 3))
ip -n "${TAG}e1" link set "${TAG}x1" up
echo "     executor 1 back (link up)"
KILL_JOB=$(midjob 2 "$GX2")
check "executor 2 is in the middle of job $KILL_JOB" [ -n "$KILL_JOB" ]
kill -KILL "$GX2"
echo "     executor 2 killed (SIGKILL)"

# ---- wait for the load
wait_episodes
nok=0
for e in $(seq 1 $NEP); do
  [ "$(cut -d' ' -f1 "$WORK/episode$e.rc" 2>/dev/null)" = 0 ] &&
    [ "$(grep -c '^step [0-9]*: status \(OK\|FLAGGED\)' "$WORK/episode$e.out")" -eq $STEPS ] &&
    nok=$((nok + 1))
done
# (FLAGGED: the host timing of a loaded machine, docs/integrity.md; still an evaluation)
check "all $NEP episodes completed, $STEPS steps evaluated each ($nok did)" \
  [ $nok -eq $NEP ]
# the cut executor's late result: it comes when its connection resumes
n=0
while [ "$(field stale_results)" -lt 1 ] && [ $n -lt 150 ]; do
  sleep 0.2
  n=$((n + 1))
done
H=$(health)
echo "     health: $H"

# ---- the trace store against the server's log
grep -o "job [^ ]* -> worker [^ ]* (dispatch [0-9]*)" "$WORK/server.log" >"$WORK/dispatches"
python3 - "$STATE/trace.db" "$WORK/dispatches" "$WORK/times0" "$WORK/times" "$NEP" "$STEPS" "$H" \
  "$CUT_JOB" "$KILL_JOB" <<'EOP' >"$WORK/verdict" 2>&1
import os, sqlite3, sys
db, disp, times0, times, neps, nsteps, health, cut, kill = sys.argv[1:10]
neps, nsteps = int(neps), int(nsteps)
h = dict(kv.split("=") for kv in health.split())
rows = sqlite3.connect(db).execute(
    "SELECT episode_id, step, worker_id, attempt, wall_s, status FROM steps").fetchall()
last = {}
for line in open(disp):
    _, job, _, _, worker, _, n = line.split()
    last[job] = (worker, int(n.rstrip(")")))
def check(ok, what):
    print(("ok   - " if ok else "FAIL - ") + what)
eps = {}
for ep, step, w, att, wall, st in rows:
    eps.setdefault(ep, []).append(step)
check(len(eps) == neps and all(sorted(v) == list(range(1, nsteps + 1)) for v in eps.values()),
      "every step recorded exactly once: %d episodes x steps 1..%d (%d rows)" % (len(eps), nsteps, len(rows)))
stale = [r for r in rows if last.get("%s/%d" % (r[0], r[1])) != (r[2], r[3])]
check(not stale, "each recorded step holds its last dispatch's result (worker, attempt): "
      "%d mismatches %s" % (len(stale), stale[:3]))
red = {"%s/%d" % (r[0], r[1]) for r in rows if r[3] > 1}
check(len(red) == int(h["redispatched"]) and len(red) >= 2,
      "re-dispatched steps marked (attempt > 1): %d, Health counts %s" % (len(red), h["redispatched"]))
check(cut in red and kill in red, "the cut job %s and the killed job %s are among them" % (cut, kill))
check(int(h["stale_results"]) >= 1, "the cut executor's late result was dropped "
      "(stale_results=%s)" % h["stale_results"])
# overhead: from the agent's end (the client then sends the step) to the step's record
# (created_at, just before the reply), less the executor's wall time of the evaluation
created = dict(((r[0], r[1]), r[2]) for r in sqlite3.connect(db).execute(
    "SELECT episode_id, step, created_at FROM steps").fetchall())
wall = {(r[0], r[1]): r[4] for r in rows}
def latencies(d):
    """(overhead of steps not re-dispatched, latency of re-dispatched ones) in d's episodes"""
    over, lat_red = [], []
    for ep in os.listdir(d):
        for line in open(os.path.join(d, ep)):
            kind, step, t = line.split()
            key = (ep, int(step) + 1)  # KA_STEP: the steps taken before this one
            if kind != "end" or key not in created:
                continue
            lat = created[key] - float(t)
            if "%s/%s" % key in red:
                lat_red.append(lat)
            else:
                over.append(lat - (wall[key] or 0))
    return sorted(over), sorted(lat_red)
def pct(v, q):
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")
o0, r0 = latencies(times0)
o1, r1 = latencies(times)
check(len(o0) + len(r0) + len(o1) + len(r1) == len(rows), "timed every step (%d)" % len(rows))
for name, o in (("phase 1, one episode per executor", o0),
                ("phase 2, the fault load (queueing included)", o1)):
    print("step overhead (client latency - executor wall time), %s, %d steps: p50 %.3f s, "
          "p99 %.3f s, max %.3f s" % (name, len(o), pct(o, 0.5), pct(o, 0.99), o[-1] if o else 0))
print("re-dispatched steps' latency: %s s" % ", ".join("%.2f" % x for x in r0 + r1))
EOP
cat "$WORK/verdict"
grep -q "^FAIL" "$WORK/verdict" && fail=1
[ $fail -ne 0 ] && { echo "--- logs"; tail -n 30 "$WORK"/server.log "$WORK"/exec*.log; }
exit $fail
