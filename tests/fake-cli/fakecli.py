"""Shared part of the fake coding-agent CLIs (claude, codex, cursor-agent) used by the
adapter tests: no real agent CLI can log in on CI, so these accept the real flags, refuse
the combinations the real ones refuse, edit the workspace, call `envctl step` and print
the real event shapes (Claude Code / cursor-agent stream-json, codex exec --json JSONL).

What the fake agent does is a plan in $FAKE_AGENT_PLAN, comma-separated actions:
  break    append a line that does not compile to gelu.c
  fast     replace the double-precision erf( by erff( in gelu.c (still correct)
  restore  put back gelu.c as it was at start
  step     run `envctl step` (the tool call an agent makes to evaluate)
  mcp_step call the `evaluate` tool of the MCP server "kernelarena" of the CLI's
           --mcp-config file (claude only), speaking JSON-RPC to it like the real CLI
  spawn    start a child, and a child that ignores SIGTERM, and write the pids of the
           CLI and both children to $FAKE_PIDFILE (all must die with the process group)
  sleep    sleep 600 s, ignoring SIGTERM if $FAKE_IGNORE_TERM is set
  fail     exit 3 at once
Default plan: break,step,fast,step.  $FAKE_ARGV_LOG (optional) receives argv and the
prompt as JSON, so a test can check the flags the adapter passed."""
import json
import os
import signal
import subprocess
import sys
import time
import uuid

EDIT_FILE = "gelu.c"


def log_invocation(argv, prompt):
    path = os.environ.get("FAKE_ARGV_LOG")
    if path:
        with open(path, "w") as f:
            json.dump({"argv": argv, "prompt": prompt, "cwd": os.getcwd(),
                       "env": {k: v for k, v in os.environ.items() if k.startswith("KA_")
                               and k != "KA_PROMPT"},
                       "has_ka_prompt": bool(os.environ.get("KA_PROMPT"))}, f)


def run_plan(on_edit, on_command):
    """Runs $FAKE_AGENT_PLAN. on_edit(path, what) and on_command(cmd, output, rc) emit
    the CLI's events. Returns the number of actions done."""
    plan = os.environ.get("FAKE_AGENT_PLAN", "break,step,fast,step").split(",")
    original = open(EDIT_FILE).read()
    for act in plan:
        act = act.strip()
        if act == "break":
            with open(EDIT_FILE, "a") as f:
                f.write("\nthis line does not compile; /* fake-agent-break */\n")
            on_edit(EDIT_FILE, "append a line")
        elif act == "fast":
            src = open(EDIT_FILE).read()
            if "fake-agent-break" in src:
                src = original
            with open(EDIT_FILE, "w") as f:
                f.write(src.replace("erf(", "erff("))
            on_edit(EDIT_FILE, "erf -> erff")
        elif act == "restore":
            with open(EDIT_FILE, "w") as f:
                f.write(original)
            on_edit(EDIT_FILE, "restore")
        elif act == "step":
            p = subprocess.run(["envctl", "step"], capture_output=True, text=True)
            on_command("envctl step", p.stdout + p.stderr, p.returncode)
        elif act == "mcp_step":
            out = mcp_evaluate()
            on_command("mcp__kernelarena__evaluate", out, 0)
        elif act == "spawn":
            child = subprocess.Popen(["sleep", "600"])
            stubborn = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 600 & wait"])
            with open(os.environ["FAKE_PIDFILE"], "w") as f:
                f.write("%d %d %d\n" % (os.getpid(), child.pid, stubborn.pid))
            on_command("sleep 600 &", "", 0)
        elif act == "sleep":
            if os.environ.get("FAKE_IGNORE_TERM"):
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(600)
        elif act == "fail":
            sys.exit(3)
        elif act:
            sys.exit("fake agent: unknown action " + act)
    return len(plan)


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def new_id():
    return str(uuid.uuid4())


MCP_CONFIG = None  # set by the fake CLI from its --mcp-config flag


def mcp_evaluate():
    """Starts the "kernelarena" server of the MCP config and calls its evaluate tool."""
    server = json.load(open(MCP_CONFIG))["mcpServers"]["kernelarena"]
    env = dict(os.environ)
    env.update(server.get("env", {}))
    p = subprocess.Popen([server["command"]] + server.get("args", []), env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def rpc(msg):
        p.stdin.write(json.dumps(msg) + "\n")
        p.stdin.flush()
        if "id" in msg:
            return json.loads(p.stdout.readline())

    init = rpc({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "fake-claude", "version": "0"}}})
    assert init["result"]["serverInfo"]["name"] == "kernelarena", init
    rpc({"jsonrpc": "2.0", "method": "notifications/initialized"})
    r = rpc({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "evaluate", "arguments": {}}})
    p.stdin.close()
    p.wait()
    return r["result"]["content"][0]["text"]
