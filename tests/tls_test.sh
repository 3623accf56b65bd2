#!/bin/sh
# Executors across hosts, transport security (issue 20 item 1; docs/deploy.md):
#  - an executor endpoint reachable from other hosts without authentication is refused at
#    start: plain tcp:// on 0.0.0.0 (the error names --insecure-executors; with that flag
#    it starts, the control), tls+tcp:// without --tls-ca; tcp:// on loopback is allowed
#  - over tls+tcp:// with the right certificates a client and an executor complete the
#    handshake and an episode runs (both listeners TLS)
#  - an executor without a client certificate, and one whose certificate another CA
#    signed, are refused: they never register (Health counts no executor while only
#    they run) and never get a job (the server hands every job to the right one; their
#    logs show no job; the trace store names only the right one)
#  - a client that does not trust the server's CA cannot connect (the control of the
#    client listener's TLS)
# Certificates are made here with openssl (tests/certs.sh). Real envserver and gpuexec
# on the host backend, bench/tasks' bench/copy.
# usage: tls_test.sh BIN_DIR SOURCE_DIR
set -u
BIN=$1
SRC=$2
. "$SRC/tests/lib.sh" # check, ka_run, cleanup on EXIT/INT/TERM
. "$SRC/tests/certs.sh"
ka_init tls
C=$WORK/certs
ka_certs "$C" localhost 127.0.0.1 || exit 1
TASKS=$SRC/bench/tasks
mkdir -p "$WORK/tmp"
# ports from the pid, so that parallel runs of this test do not collide
P=$((20000 + ($$ % 4000) * 2))
EP=$((P + 1))

# ---- refusals at start
# refused NAME TEXT ARGS...: envserver with ARGS exits non-zero at once, saying TEXT
refused() {
  name=$1 text=$2
  shift 2
  timeout 20 "$BIN/envserver" --state "$WORK/$name" --tasks "$TASKS" "$@" >"$WORK/$name.log" 2>&1
  rc=$?
  check "$name: envserver refuses to start (rc $rc)" [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]
  check "$name: the error says '$text'" grep -q -- "$text" "$WORK/$name.log"
}
refused plain-any "--insecure-executors" --exec-listen "tcp://0.0.0.0:$EP"
refused plain-host "--insecure-executors" --exec-listen "tcp://$(hostname):$EP"
refused tls-no-ca "--tls-ca" --exec-listen "tls+tcp://127.0.0.1:$EP" --tls-cert "$C/server.crt" \
  --tls-key "$C/server.key"
refused tls-bad-key "cannot read the key" --exec-listen "tls+tcp://127.0.0.1:$EP" --tls-cert "$C/server.crt" \
  --tls-key "$C/missing.key" --tls-ca "$C/ca.crt"

timeout 20 "$BIN/gpuexec" --server "tls+tcp://127.0.0.1:$EP" --tasks "$TASKS" --backends host \
  >"$WORK/gx-no-ca.log" 2>&1
rc=$?
check "gpuexec dialling tls+tcp:// without --tls-ca exits 2 (got $rc)" [ "$rc" -eq 2 ]
check "gpuexec: the error names --tls-ca" grep -q -- "--tls-ca" "$WORK/gx-no-ca.log"

# starts NAME ARGS...: envserver with ARGS comes up (Health answers), then is stopped
starts() {
  name=$1
  shift
  "$BIN/envserver" --state "$WORK/$name" --tasks "$TASKS" "$@" >"$WORK/$name.log" 2>&1 &
  SRV_PID=$!
  i=0
  until "$BIN/envctl" health --server "ipc://$WORK/$name/env.ipc" --timeout 2 >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -gt 50 ] && break
    sleep 0.2
  done
  check "$name: envserver starts" [ $i -le 50 ]
  ka_stop "$SRV_PID"
  SRV_PID=
}
starts plain-any-insecure --exec-listen "tcp://0.0.0.0:$EP" --insecure-executors
check "plain-any-insecure: it warns that executors are not authenticated" \
  grep -q "does not authenticate" "$WORK/plain-any-insecure.log"
starts plain-loopback --exec-listen "tcp://127.0.0.1:$EP"

# ---- the TLS stack
URL=tls+tcp://127.0.0.1:$P
EURL=tls+tcp://127.0.0.1:$EP
STATE=$WORK/state
"$BIN/envserver" --state "$STATE" --tasks "$TASKS" --listen "$URL" --exec-listen "$EURL" \
  --tls-cert "$C/server.crt" --tls-key "$C/server.key" --tls-ca "$C/ca.crt" \
  >"$WORK/server.log" 2>&1 &
SRV_PID=$!
# executor NAME ARGS...: a host-backend gpuexec dialling EURL, pid appended to KA_PIDS
executor() {
  name=$1
  shift
  TMPDIR=$WORK/tmp "$BIN/gpuexec" --server "$EURL" --tasks "$TASKS" --backends host --verbose \
    --tls-ca "$C/ca.crt" "$@" >"$WORK/$name.log" 2>&1 &
  KA_PIDS="$KA_PIDS $!"
  eval "${name}_pid=$!"
}
executor rogue --tls-cert "$C/rogue.crt" --tls-key "$C/rogue.key"
executor nocert
health() { KA_TLS_CA=$C/ca.crt "$BIN/envctl" health --server "$URL" --timeout 3 2>&1; }
i=0
until health | grep -q "ok=1"; do
  i=$((i + 1))
  [ $i -gt 50 ] && break
  sleep 0.2
done
check "a client trusting the CA reaches the TLS client endpoint" [ $i -le 50 ]
check "a client that does not trust the CA cannot connect" \
  sh -c "! '$BIN/envctl' health --server '$URL' --timeout 2 >/dev/null 2>&1"
sleep 4 # the refused executors have dialled (every 0.1 to 2 s) and been refused for 4 s
h=$(health)
check "only refused executors running: the server counts none ($h)" \
  sh -c "echo '$h' | grep -q 'executors=0 '"
executor good --tls-cert "$C/exec.crt" --tls-key "$C/exec.key"
i=0
until health | grep -q "executors=[1-9]"; do
  i=$((i + 1))
  [ $i -gt 100 ] && break
  sleep 0.2
done
check "the executor with the pool's certificate registers" [ $i -le 100 ]
KA_TLS_CA=$C/ca.crt ka_run "$BIN/envctl" episode --server "$URL" --task bench/copy --seed 5 \
  --max-steps 3 --workspace "$WORK/ws" >"$WORK/episode.out" 2>&1
rc=$?
cat "$WORK/episode.out"
check "episode over TLS exits 0" [ "$rc" -eq 0 ]
check "episode over TLS: 3 steps OK" [ "$(grep -c '^step [0-9]*:.*status OK' "$WORK/episode.out")" -eq 3 ]
h=$(health)
check "still one executor: the refused ones never registered ($h)" \
  sh -c "echo '$h' | grep -q 'executors=1 '"
njobs=$(grep -c -- "-> worker " "$WORK/server.log")
ngood=$(grep -c -- "-> worker [^ ]*/$good_pid/host" "$WORK/server.log")
check "every job went to the executor with the pool's certificate ($ngood of $njobs)" \
  [ "$njobs" -ge 3 ] && [ "$ngood" -eq "$njobs" ]
for r in rogue nocert; do
  check "$r: never got a job" sh -c "! grep -q '(bench/copy)' '$WORK/$r.log'"
  check "$r: its dial was refused" grep -q "cannot reach" "$WORK/$r.log"
done
w=$(sqlite3 "$STATE/trace.db" "SELECT count(*) || ',' || count(DISTINCT worker_id) || ',' ||
  sum(worker_id LIKE '%/$good_pid/%') FROM steps")
check "trace store: 3 steps, all by the right executor (got $w)" [ "$w" = "3,1,3" ]
ka_stop "$SRV_PID"
SRV_PID=

# ---- mutual TLS on the client endpoint (envserver --tls-client-ca): envctl, through
# libkaclient, presents $KA_TLS_CERT with $KA_TLS_KEY (any certificate the clients' CA
# signed; exec.crt has clientAuth)
MURL=tls+tcp://127.0.0.1:$((P + 10000))
"$BIN/envserver" --state "$WORK/mstate" --tasks "$TASKS" --listen "$MURL" \
  --tls-cert "$C/server.crt" --tls-key "$C/server.key" --tls-client-ca "$C/ca.crt" \
  >"$WORK/mserver.log" 2>&1 &
SRV_PID=$!
# mhealth CERT KEY: envctl health against MURL presenting CERT/KEY ("" for none)
mhealth() {
  KA_TLS_CA=$C/ca.crt KA_TLS_CERT=$1 KA_TLS_KEY=$2 "$BIN/envctl" health --server "$MURL" \
    --timeout 3 2>&1
}
i=0
until mhealth "$C/exec.crt" "$C/exec.key" | grep -q "ok=1"; do
  i=$((i + 1))
  [ $i -gt 50 ] && break
  sleep 0.2
done
check "mutual TLS: envctl with a certificate the clients' CA signed is answered" [ $i -le 50 ]
check "mutual TLS: envctl without a certificate is not" \
  sh -c "! KA_TLS_CA='$C/ca.crt' '$BIN/envctl' health --server '$MURL' --timeout 2 >/dev/null 2>&1"
check "mutual TLS: envctl with another CA's certificate is not" \
  sh -c "! KA_TLS_CA='$C/ca.crt' KA_TLS_CERT='$C/rogue.crt' KA_TLS_KEY='$C/rogue.key' \
    '$BIN/envctl' health --server '$MURL' --timeout 2 >/dev/null 2>&1"
out=$(mhealth "$C/exec.crt" "")
check "KA_TLS_CERT without KA_TLS_KEY: refused at once, naming the missing one ($out)" \
  sh -c "echo '$out' | grep -q 'KA_TLS_CERT and KA_TLS_KEY go together (KA_TLS_KEY is not set)'"
out=$(mhealth "$C/exec.crt" "$C/missing.key")
check "a key file that is not there: refused, naming it ($out)" \
  sh -c "echo '$out' | grep -q 'cannot read $C/missing.key'"

[ $fail -ne 0 ] && { echo "--- logs"; tail -n 20 "$WORK"/*.log; }
exit $fail
