#!/bin/sh
# `envctl mcp` with a real MCP client: the official `mcp` Python SDK from PyPI, in the
# Python environment scripts/install-python-deps.sh makes (.venv; the test installs
# nothing and fails when the SDK is missing). The client runs as a command agent in an episode on a real envserver + gpuexec
# (host backend), evaluates through the MCP tools, and the steps must be recorded by the
# adapter. Also: the claude_code adapter's --mcp-config (fake claude calls evaluate over
# MCP), and malformed JSON-RPC input.
# usage: agents_mcp.sh BIN_DIR SOURCE_DIR [PYTHON]   (default: SOURCE_DIR/.venv/bin/python3)
set -u
BIN=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
PY=${3:-$SRC/.venv/bin/python3}
. "$SRC/tests/lib.sh" # check, jcheck, cleanup on EXIT/INT/TERM, ka_stack
ka_init mcp

if ! "$PY" -c "import mcp"; then
  echo "FAIL - $PY has no mcp Python SDK (scripts/install-python-deps.sh installs it)"
  exit 1
fi
echo "mcp SDK $("$PY" -c 'import importlib.metadata as m; print(m.version("mcp"))')"

# malformed input, by hand: parse error and unknown method, then a valid ping
printf '%s\n' 'not json' '{"jsonrpc":"2.0","id":7,"method":"nope"}' '{"jsonrpc":"2.0","id":8,"method":"ping"}' |
  KA_SERVER=ipc:///nonexistent KA_EPISODE=ep-x KA_FILES=gelu.c "$BIN/envctl" mcp >"$WORK/raw.out"
check "raw: parse error -32700, unknown method -32601, ping answered" python3 -c "
import json,sys
m=[json.loads(l) for l in open(sys.argv[1])]
assert m[0]['error']['code']==-32700 and m[0]['id'] is None
assert m[1]['id']==7 and m[1]['error']['code']==-32601
assert m[2]=={'jsonrpc':'2.0','id':8,'result':{}}, m[2]" "$WORK/raw.out"

mkdir -p "$WORK/tasks/host"
cp -r "$SRC/tasks/host/gelu" "$WORK/tasks/host/"
# (and a generous evaluation time limit: CI machines may be loaded)
sed -i "s/n: 1048576}/n: 65536}/; s/n: 2097152}/n: 131072}/; s/^timeout_s: .*/timeout_s: 180/" \
  "$WORK/tasks/host/gelu/task.yaml"
ka_stack "$WORK/tasks"

OUT=$WORK/sdk
"$BIN/envctl" agent --server "$URL" --task host/gelu --adapter command \
  --set "command=$PY $SRC/tests/agents_mcp_client.py" --out "$OUT" >"$WORK/sdk.out" 2>&1
rc=$?
cat "$WORK/sdk.out" "$OUT/transcript.txt" "$OUT/agent.stderr" | tail -30
check "sdk: envctl agent exits 0" [ "$rc" -eq 0 ]
check "sdk: every client assertion held" grep -q MCP-CLIENT-OK "$OUT/transcript.txt"
jcheck "sdk: the two evaluate calls are the episode's recorded steps" "$OUT/episode.json" \
  "[(s['step'],s['status'],s['by']) for s in d['steps']]==[(1,'COMPILE_ERROR','agent'),(2,'OK','agent')] and d['final_eval'] is False"

OUT=$WORK/claude
PATH="$SRC/tests/fake-cli:$PATH" FAKE_AGENT_PLAN=fast,mcp_step "$BIN/envctl" agent --server "$URL" \
  --task host/gelu --adapter claude_code --set mcp=true --out "$OUT" >"$WORK/claude.out" 2>&1
rc=$?
cat "$WORK/claude.out" "$OUT/agent.stderr" | tail -20
check "claude+mcp: exits 0" [ "$rc" -eq 0 ]
jcheck "claude+mcp: --mcp-config names envctl mcp with the step proxy" "$OUT/mcp.json" \
  "(s:=d['mcpServers']['kernelarena']) and s['command'].endswith('/envctl') and s['args'][0]=='mcp' and s['env']['KA_SERVER'].startswith('ipc://')"
jcheck "claude+mcp: the MCP evaluate call is the recorded step" "$OUT/episode.json" \
  "[(s['status'],s['by']) for s in d['steps']]==[('OK','agent')]"
check "claude+mcp: the tool result is in the transcript" grep -q "mcp__kernelarena__evaluate" "$OUT/transcript.jsonl"
exit $fail
