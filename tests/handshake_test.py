#!/usr/bin/env python3
"""Aborted SP handshakes must not stall envserver's endpoints (issue 14, item 1).

A peer that connects to the client endpoint (env) or the executor endpoint (exec),
sends part of the 8-byte SP header (or nothing, or garbage) and closes used to leave
the nng listener accepting sockets that never became pipes (nng 1.5.2, upstream
issue #1518): every later client timed out and a gpuexec started afterwards never got
a job. For ipc:// and tcp://, on a fresh state folder each: envserver alone, every kind
of aborted handshake several times on both endpoints, then
  - a new client's Health is answered within a few seconds (twice: Health, then Describe
    through `envctl tasks`),
  - a gpuexec started after the aborts registers and a one-step host episode completes
    with status OK.
Standard library only (the system python3); the clients are build/bin/envctl.
usage: handshake_test.py BIN_DIR SOURCE_DIR
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

BIN, SRC = sys.argv[1], sys.argv[2]
TASKS = os.path.join(SRC, "bench", "tasks")
TASK = "bench/copy"
ROUNDS = 4  # every abort kind this many times on each endpoint
ANSWER_S = 5.0  # a new client must be answered within this
failures = 0
procs = []


def check(desc, ok):
    global failures
    print(("ok   - " if ok else "FAIL - ") + desc, flush=True)
    if not ok:
        failures += 1
    return ok


def on_signal(signum, frame):
    raise SystemExit(128 + signum)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def connect(url):
    """A raw stream socket connected to an nng ipc:// or tcp:// URL."""
    if url.startswith("ipc://"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(url[len("ipc://"):])
    else:
        host, port = url[len("tcp://"):].rsplit(":", 1)
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect((host, int(port)))
    return s


# Each kind of aborted handshake: whether the peer first reads the server's header
# (then the server is surely waiting for the peer's: the case that stalled nng 1.5.2
# every time; without it, the race of the one-liner), what it sends before it
# goes away, and how (close, or reset). The SP header is 00 'S' 'P' 00, the 16-bit
# protocol id (REQ 0x30), 00 00.
ABORTS = [
    ("nothing, close", False, b"", False),
    ("3 header bytes, close", False, b"\x00SP", False),
    ("3 header bytes, reset", False, b"\x00SP", True),
    ("after the server's header: nothing, close", True, b"", False),
    ("after the server's header: 3 header bytes, close", True, b"\x00SP", False),
    ("after the server's header: 3 header bytes, reset", True, b"\x00SP", True),
    ("after the server's header: 7 header bytes, close", True, b"\x00SP\x00\x00\x30\x00", False),
    ("garbage header, close", False, b"GET / HTTP/1.0\r\n", False),
]


def read_header(s):
    """Reads the server's 8-byte SP header (or what comes within 2 s)."""
    got = b""
    try:
        while len(got) < 8:
            chunk = s.recv(8 - len(got))
            if not chunk:
                break
            got += chunk
    except socket.timeout:
        pass
    return got


def abort_handshake(url, wait_header, data, reset):
    s = connect(url)
    try:
        if wait_header:
            read_header(s)
        if data:
            s.sendall(data)
        if reset:  # SO_LINGER 0: close sends RST (tcp) / drops the queue (ipc)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    finally:
        s.close()


def envctl(args, timeout):
    """Runs envctl; returns (rc, output, seconds). rc -1 when it ran past timeout."""
    t0 = time.monotonic()
    try:
        r = subprocess.run([os.path.join(BIN, "envctl")] + args, capture_output=True,
                           text=True, timeout=timeout)
        return r.returncode, r.stdout + r.stderr, time.monotonic() - t0
    except subprocess.TimeoutExpired:
        return -1, "(timed out after %.0f s)" % timeout, time.monotonic() - t0


def health(url, timeout_s=2):
    return envctl(["health", "--server", url, "--timeout", str(timeout_s)], timeout_s + 3)


def wait_health(url, want_executor, limit_s):
    """Polls Health until ok (and an executor, if asked) or limit_s; returns the last output."""
    deadline = time.monotonic() + limit_s
    out = ""
    while time.monotonic() < deadline:
        rc, out, _ = health(url)
        if rc == 0 and "ok=1" in out and (not want_executor or "executors=0" not in out):
            return True, out
        time.sleep(0.2)
    return False, out


def start(args, log):
    p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    procs.append(p)
    return p


def stop(p):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def run_transport(name, work):
    """One envserver on a fresh state folder, aborts on both endpoints, then the checks."""
    state = os.path.join(work, name + "-state")
    if name == "ipc":
        env_url, exec_url = "ipc://%s/env.ipc" % state, "ipc://%s/exec.ipc" % state
    else:
        env_url = "tcp://127.0.0.1:%d" % free_port()
        exec_url = "tcp://127.0.0.1:%d" % free_port()
    logs = {k: open(os.path.join(work, "%s.%s.log" % (name, k)), "w")
            for k in ("server", "gpuexec")}
    server = start([os.path.join(BIN, "envserver"), "--state", state, "--tasks", TASKS,
                    "--listen", env_url, "--exec-listen", exec_url], logs["server"])
    up, out = wait_health(env_url, False, 20)
    if not check("%s: envserver answers Health before the aborts" % name, up):
        print(out)
        return
    n = 0
    for rnd in range(ROUNDS):
        for kind, wait_header, data, reset in ABORTS:
            for url in (env_url, exec_url):
                abort_handshake(url, wait_header, data, reset)
            n += 1
    # The same peers while envserver is stopped: they are gone before it accepts them, so
    # its first write of the SP header fails (EPIPE on ipc). That is the deterministic form
    # of the one-liner, which only wins this race most of the time.
    os.kill(server.pid, signal.SIGSTOP)
    try:
        for rnd in range(ROUNDS):
            for kind, wait_header, data, reset in ABORTS:
                if not wait_header:
                    for url in (env_url, exec_url):
                        abort_handshake(url, False, data, reset)
                    n += 1
    finally:
        os.kill(server.pid, signal.SIGCONT)
    print("%s: %d aborted handshakes on each endpoint (%d kinds, live and with envserver "
          "stopped)" % (name, n, len(ABORTS)), flush=True)
    time.sleep(0.3)  # let the server see every close

    rc, out, secs = health(env_url, 3)
    check("%s: a new client's Health is answered after the aborts (%.2f s, limit %.0f s)" %
          (name, secs, ANSWER_S), rc == 0 and "ok=1" in out and secs < ANSWER_S)
    if rc != 0:
        print("   " + out.strip())
    rc, out, secs = envctl(["tasks", "--server", env_url, "--timeout", "3"], 6)
    check("%s: a second new client lists the tasks (Describe, %.2f s)" % (name, secs),
          rc == 0 and TASK in out and secs < ANSWER_S)

    start([os.path.join(BIN, "gpuexec"), "--server", exec_url, "--tasks", TASKS,
           "--backends", "host"], logs["gpuexec"])
    up, out = wait_health(env_url, True, 15)
    check("%s: a gpuexec started after the aborts registers (Health: %s)" %
          (name, out.strip() or "no answer"), up)
    if up:
        ws = os.path.join(work, name + "-ws")
        rc, out, secs = envctl(["episode", "--server", env_url, "--task", TASK, "--seed", "1",
                                "--max-steps", "1", "--workspace", ws, "--timeout", "60"], 90)
        check("%s: a one-step host episode completes with status OK (%.1f s)" % (name, secs),
              rc == 0 and "status OK" in out)
        if rc != 0:
            print(out)
    # Aborts after the executor registered must not cut it off either.
    for kind, wait_header, data, reset in ABORTS:
        abort_handshake(exec_url, wait_header, data, reset)
        abort_handshake(env_url, wait_header, data, reset)
    rc, out, secs = health(env_url, 3)
    check("%s: Health still answered after aborts with an executor connected (%.2f s)" %
          (name, secs), rc == 0 and "ok=1" in out and secs < ANSWER_S)
    check("%s: envserver still running" % name, server.poll() is None)
    for p in list(procs):
        stop(p)
        procs.remove(p)
    for f in logs.values():
        f.close()


def main():
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    work = tempfile.mkdtemp(prefix="ka-handshake-")
    try:
        for name in ("ipc", "tcp"):
            run_transport(name, work)
        if failures:
            for log in sorted(os.listdir(work)):
                if log.endswith(".log"):
                    print("--- %s" % log)
                    with open(os.path.join(work, log)) as f:
                        print(f.read()[-3000:])
    finally:
        for p in procs:
            stop(p)
        shutil.rmtree(work, ignore_errors=True)
    print("handshake: %d failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
