#!/bin/sh
# What CUDA's initialisation needs of the command sandbox (issue 19: the seed's command
# tasks got CUDA error 304 in it). Prebuilt binaries only (build/bin, with
# ka_socket_trace.so from tests/device/socket_trace.c); nothing is built here.
#   1. outside any sandbox: the socket calls that cuInit and torch make (socket_trace);
#   2. inside: the probe task tests/device/cuda_probe, one baseline step through envserver +
#      gpuexec on cuda, once per sandbox setting in VARIANTS (default: "default unix1",
#      unix1 = KA_SANDBOX_UNIX=1), its command's output (the trace) printed.
#   device run: OUT=$OUT sh tests/device/cuda_sockets_h200.sh      (carry: build/bin)
#   env: PYBIN (default /opt/torch/.venv/bin), VARIANTS
set -u
OUT=${OUT:-/tmp/ka-out}
PYBIN=${PYBIN:-/opt/torch/.venv/bin}
R=$(pwd)
B=$R/build/bin
mkdir -p "$OUT"
[ -f "$B/ka_socket_trace.so" ] || { echo "cuda_sockets: no $B/ka_socket_trace.so (carry build/bin)"; exit 2; }
echo "== 1. outside the sandbox"
LD_PRELOAD=$B/ka_socket_trace.so "$PYBIN/python3" "$R/tests/device/cuda_probe/probe.py" 2>&1 |
  sort | uniq -c | sort -rn | head -30
for v in ${VARIANTS:-default unix1}; do
  W=$(mktemp -d)
  mkdir -p "$W/tasks/probe" "$W/state"
  cp -r "$R/tests/device/cuda_probe" "$W/tasks/probe/cuda_init"
  cp "$B/ka_socket_trace.so" "$W/tasks/probe/cuda_init/"
  env=""
  [ "$v" = unix1 ] && env="KA_SANDBOX_UNIX=1"
  "$B/envserver" --state "$W/state" --tasks "$W/tasks" --quiet >"$OUT/probe_server_$v.log" 2>&1 &
  SV=$!
  env $env "$B/gpuexec" --server "ipc://$W/state/exec.ipc" --tasks "$W/tasks" --backends cuda \
    --command-path "$PYBIN" --verbose >"$OUT/probe_gpuexec_$v.log" 2>&1 &
  GX=$!
  i=0
  until "$B/envctl" health --server "ipc://$W/state/env.ipc" --timeout 2 2>/dev/null |
    grep -q "executors=[1-9]"; do
    i=$((i + 1)); [ $i -gt 300 ] && break; sleep 0.2
  done
  "$B/envctl" episode --server "ipc://$W/state/env.ipc" --task probe/cuda_init --seed 1 \
    --max-steps 1 --verbose --agent baseline --timeout 120 >"$OUT/probe_episode_$v.txt" 2>&1
  echo "== 2. inside the command sandbox: $v (${env:-no override})"
  cat "$OUT/probe_episode_$v.txt" "$OUT/probe_gpuexec_$v.log" | grep -E "socket_trace|probe:|^step 1" |
    sed 's/^ *| *//' | sort | uniq -c | sort -rn | head -30
  kill "$GX" "$SV" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$W"
done
