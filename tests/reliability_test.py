#!/usr/bin/env python3
"""Faults that used to stall or poison the server (issue 14), each reproduced against a
real envserver on a temporary state folder, the repository's host tasks, and fake
executors (pynng REQ sockets, or child processes that can be killed or stopped).

    reliability_test.py BIN_DIR SOURCE_DIR CASE

CASE: slow_reader, dead_executor, dead_server, utf8, store_locked, close_unrecorded,
store_refused, max_episodes, inflight_memory, cleanup, exec_auth, enospc, close_cancels, lease_cancels. Prints "ok - ..." per check,
exits 1 at the first failure (with the server's log). Each case runs in under a minute.
"""
import atexit
import os
import pickle
import shutil
import signal
import socket
import sqlite3
import struct
import subprocess
import sys
import tempfile
import threading
import time

BIN, SRC, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, os.path.join(SRC, "clients", "python"))
import pynng  # noqa: E402
from kernelarena import kernelarena_pb2 as pb  # noqa: E402
from kernelarena.client import Client, KernelArenaError  # noqa: E402

TASKS = os.path.join(SRC, "tasks")
WORK = tempfile.mkdtemp(prefix="ka-rel-")
CHILDREN = []
SERVERS = []
GELU = open(os.path.join(TASKS, "host/gelu/baseline/gelu.c"), "rb").read()


def cleanup():
    for p in CHILDREN:
        try:
            p.send_signal(signal.SIGCONT)
            p.kill()
            p.wait()
        except Exception:
            pass
    if not os.environ.get("KA_KEEP_TMP"):
        shutil.rmtree(WORK, ignore_errors=True)


atexit.register(cleanup)


def ok(msg):
    print("ok   -", msg, flush=True)


def fail(msg):
    print("FAIL -", msg, flush=True)
    for s in SERVERS:
        try:
            sys.stdout.write(open(s.logpath).read()[-6000:])
        except OSError:
            pass
    sys.exit(1)


def check(cond, msg):
    if cond:
        ok(msg)
    else:
        fail(msg)


def spawn(argv, **kw):
    p = subprocess.Popen(argv, **kw)
    CHILDREN.append(p)
    return p


class Server:
    """An envserver on a fresh state folder (or `state`), waited on until it answers."""

    def __init__(self, *args, state=None, wait=True, env=None):
        self.state = state or tempfile.mkdtemp(prefix="state-", dir=WORK)
        self.url = f"ipc://{self.state}/env.ipc"
        self.exec_url = f"ipc://{self.state}/exec.ipc"
        self.logpath = os.path.join(WORK, f"server-{len(SERVERS)}.log")
        self.log = open(self.logpath, "w")
        self.p = spawn([os.path.join(BIN, "envserver"), "--state", self.state, "--tasks", TASKS,
                        *args], stdout=self.log, stderr=subprocess.STDOUT, env=env)
        SERVERS.append(self)
        if wait:
            self.wait_up()

    def wait_up(self, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            if self.p.poll() is not None:
                fail(f"envserver exited with {self.p.returncode} at start")
            try:
                r = call(self.url, "health", pb.HealthRequest(), timeout=1)
                if r.WhichOneof("body") == "health":
                    return
            except pynng.NNGException:
                pass
            time.sleep(0.1)
        fail("envserver did not come up")

    def logtext(self):
        self.log.flush()
        return open(self.logpath).read()


_rid = [1000]


def request(method, body, rid=None):
    _rid[0] += 1
    rq = pb.Request(request_id=rid or _rid[0])
    getattr(rq, method).CopyFrom(body)
    return rq


def call(url_or_sock, method, body, timeout=5.0):
    """One request on a fresh REQ socket (or the given one); returns the Response."""
    own = isinstance(url_or_sock, str)
    s = pynng.Req0(resend_time=-1, recv_timeout=int(timeout * 1000),
                   send_timeout=int(timeout * 1000)) if own else url_or_sock
    try:
        if own:
            s.dial(url_or_sock, block=True)
        s.send(request(method, body).SerializeToString())
        r = pb.Response()
        r.ParseFromString(s.recv())
        return r
    finally:
        if own:
            s.close()


DEVICE = pb.Device(backend="host", name="fake host CPU", arch="x86_64", multiprocessors=8,
                   warp_size=1, memory_bytes=16 << 30, l2_bytes=32 << 20,
                   shared_bytes_per_block=48 << 10, mem_bandwidth_gbps=100)


def ok_result(job_id):
    cases = [pb.CaseResult(name=n, correct=True, baseline_ms=2.4, candidate_ms=2.0, speedup=1.2,
                           elements=1 << 20) for n in ("n1M", "n2M")]
    return pb.Result(job_id=job_id, status=pb.OK, device=DEVICE, wall_s=0.5, compile_s=0.1,
                     cases=cases, geomean_speedup=1.2)


class Exec:
    """A fake executor worker on its own REQ socket."""

    def __init__(self, url, wid, heartbeats=False):
        self.wid = wid
        self.heartbeats = heartbeats
        self.s = pynng.Req0(resend_time=-1, recv_timeout=30000, send_timeout=5000)
        self.s.dial(url, block=True)
        self.hb = None

    def send_poll(self, result=None, wait_ms=3000):
        _rid[0] += 1
        poll = pb.WorkerPoll(worker_id=self.wid, device=DEVICE, wait_ms=wait_ms,
                             heartbeats=self.heartbeats)
        if result is not None:
            poll.result.CopyFrom(result)
        self.s.send(pb.ExecRequest(request_id=_rid[0], poll=poll).SerializeToString())

    def recv(self, timeout=30.0):
        self.s.recv_timeout = int(timeout * 1000)
        r = pb.ExecResponse()
        r.ParseFromString(self.s.recv())
        return r

    def take(self, timeout=10.0):
        """Polls until a job comes (or timeout); returns it or None."""
        end = time.time() + timeout
        while time.time() < end:
            self.send_poll(wait_ms=int(min(3.0, max(0.1, end - time.time())) * 1000))
            r = self.recv()
            if r.WhichOneof("body") == "assignment" and r.assignment.HasField("job"):
                return r.assignment.job
        return None

    def heartbeat(self, url, job_id):
        if self.hb is None:
            self.hb = pynng.Req0(resend_time=-1, recv_timeout=5000, dial=url)
        _rid[0] += 1
        self.hb.send(pb.ExecRequest(request_id=_rid[0], heartbeat=pb.WorkerHeartbeat(
            worker_id=self.wid, job_id=job_id)).SerializeToString())
        r = pb.ExecResponse()
        r.ParseFromString(self.hb.recv())
        return r.heartbeat.job_wanted

    def close(self):
        self.s.close()
        if self.hb:
            self.hb.close()


# A fake executor in its own process, to be killed or stopped: it polls (parked for
# 10 s at a time) and acknowledges a job with a heartbeat at once, as gpuexec does.
CHILD_EXEC = r"""
import sys, time
sys.path.insert(0, sys.argv[3])
import pynng
from kernelarena import kernelarena_pb2 as pb
url, wid = sys.argv[1], sys.argv[2]
dev = pb.Device(backend="host", name="fake host CPU", arch="x86_64", multiprocessors=8,
                warp_size=1, memory_bytes=16 << 30)
s = pynng.Req0(resend_time=-1, recv_timeout=60000, dial=url)
hb = pynng.Req0(resend_time=-1, recv_timeout=60000, dial=url)
rid = 1
while True:
    rid += 1
    s.send(pb.ExecRequest(request_id=rid, poll=pb.WorkerPoll(
        worker_id=wid, device=dev, wait_ms=10000, heartbeats=True)).SerializeToString())
    print("polling", flush=True)
    r = pb.ExecResponse(); r.ParseFromString(s.recv())
    if r.WhichOneof("body") == "assignment" and r.assignment.HasField("job"):
        rid += 1
        hb.send(pb.ExecRequest(request_id=rid, heartbeat=pb.WorkerHeartbeat(
            worker_id=wid, job_id=r.assignment.job.job_id)).SerializeToString())
        hb.recv()
        print("job", r.assignment.job.job_id, flush=True)
        time.sleep(3600)
"""


def child_exec(url, wid):
    p = spawn([sys.executable, "-c", CHILD_EXEC, url, wid, os.path.join(SRC, "clients", "python")],
              stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if "polling" not in line:
        fail(f"child executor {wid} did not start: {line!r}")
    return p


def reset(url, **opts):
    r = call(url, "reset", pb.ResetRequest(task_id="host/gelu", seed=7, has_seed=True,
                                           options={k: str(v) for k, v in opts.items()}))
    if r.WhichOneof("body") != "reset":
        fail(f"reset: {r}")
    return r.reset.episode_id


def step_async(url, ep, expected=0, content=GELU, timeout=30.0):
    """Sends a Step on its own socket; returns a function that waits for the reply."""
    s = pynng.Req0(resend_time=-1, recv_timeout=int(timeout * 1000), dial=url)
    s.send(request("step", pb.StepRequest(episode_id=ep, expected_step=expected, files=[
        pb.File(path="gelu.c", content=content)])).SerializeToString())

    def wait():
        try:
            r = pb.Response()
            r.ParseFromString(s.recv())
            return r
        finally:
            s.close()
    return wait


def health_time(url, timeout=10.0):
    t = time.time()
    r = call(url, "health", pb.HealthRequest(), timeout=timeout)
    return time.time() - t, r


def err(r):
    return (pb.ErrorCode.Name(r.error.code), r.error.message, r.error.retryable) \
        if r.WhichOneof("body") == "error" else None


# ---------------------------------------------------------------- cases

def case_slow_reader():
    """Item 2: a client pipelines more requests than the server has contexts and never
    reads: other clients are still served, and its stuck replies are dropped."""
    srv = Server()
    path = srv.url[len("ipc://"):]
    raw = socket.socket(socket.AF_UNIX)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.connect(path)
    raw.sendall(b"\x00SP\x00" + struct.pack(">H", 48) + b"\x00\x00")  # REQ v0
    if raw.recv(8)[:3] != b"\x00SP":
        fail("no SP handshake from the server")
    frames = []
    for i in range(400):
        body = request("list_tasks", pb.ListTasksRequest(), rid=i + 1).SerializeToString()
        payload = struct.pack(">I", 0x80000000 | (i + 1)) + body
        frames.append(b"\x01" + struct.pack(">Q", len(payload)) + payload)
    raw.setblocking(False)
    data = b"".join(frames)
    sent, end = 0, time.time() + 5
    while sent < len(data) and time.time() < end:
        try:
            sent += raw.send(data[sent:])
        except BlockingIOError:
            time.sleep(0.01)
    print(f"  pipelined {sent} bytes of 400 ListTasks requests, reading nothing")
    time.sleep(1.0)
    for i in range(3):
        try:
            dt, r = health_time(srv.url, timeout=3)
        except pynng.Timeout:
            fail("Health timed out while a client pipelines requests and reads no reply")
        check(r.WhichOneof("body") == "health" and dt < 2.0,
              f"Health answered in {dt:.2f} s while a slow reader holds the contexts")
    time.sleep(11)  # past ES_SEND_TIMEOUT_MS: its replies are dropped
    dt, r = health_time(srv.url, timeout=3)
    check(r.WhichOneof("body") == "health" and dt < 2.0, f"Health after the send timeout: {dt:.2f} s")
    check(srv.p.poll() is None, "the server is still running")
    raw.close()


def case_dead_executor():
    """Item 3: an idle executor killed (kill -9) or stopped (SIGSTOP) while its poll is
    parked does not get the next job, or gives it up: another idle executor runs it."""
    srv = Server()
    a = child_exec(srv.exec_url, "A/1/host:0")
    time.sleep(0.3)
    a.kill()
    a.wait()
    time.sleep(0.5)
    b = Exec(srv.exec_url, "B/2/host:0")
    b.send_poll(wait_ms=10000)
    time.sleep(0.3)
    ep = reset(srv.url)
    wait = step_async(srv.url, ep)
    t = time.time()
    try:
        r = b.recv(timeout=8)
    except pynng.Timeout:
        fail("the job went to the killed executor's poll: the live one got nothing in 8 s")
    job = r.assignment.job if r.assignment.HasField("job") else None
    check(job is not None and time.time() - t < 3,
          f"killed executor: the job went to the live one in {time.time() - t:.2f} s")
    b.send_poll(ok_result(job.job_id), wait_ms=100)
    b.recv()
    rs = wait()
    check(rs.WhichOneof("body") == "step" and rs.step.observation.step == 1,
          f"the step was counted: {err(rs)}")

    # SIGSTOP: its poll is parked first (the oldest), so the job is handed to it
    a2 = child_exec(srv.exec_url, "A2/3/host:0")
    time.sleep(0.3)
    a2.send_signal(signal.SIGSTOP)
    b.send_poll(wait_ms=10000)
    time.sleep(0.3)
    wait = step_async(srv.url, ep, expected=1)
    t = time.time()
    job = None
    while time.time() - t < 12 and job is None:
        try:
            r = b.recv(timeout=12 - (time.time() - t))
        except pynng.Timeout:
            break
        if r.assignment.HasField("job"):
            job = r.assignment.job
        else:
            b.send_poll(wait_ms=10000)
    waited = time.time() - t
    check(job is not None and waited < 9,
          f"stopped executor: the job went to the live one after {waited:.1f} s")
    log = srv.logtext()
    check("did not acknowledge job" in log, "the server says the job was not acknowledged")
    # its attempt was not used: the live worker's connection closing re-queues it (a
    # second and last attempt) rather than failing the step
    b.close()
    c = Exec(srv.exec_url, "C/4/host:0")
    job2 = c.take(timeout=8)
    check(job2 is not None and job2.job_id == job.job_id,
          "after the live worker disconnected, the job was re-dispatched (attempts left)")
    c.send_poll(ok_result(job2.job_id), wait_ms=100)
    c.recv()
    rs = wait()
    check(rs.WhichOneof("body") == "step" and rs.step.observation.step == 2,
          f"the step was counted once: {err(rs)}")
    a2.send_signal(signal.SIGCONT)


def case_dead_server():
    """Item 4: envserver killed mid-request: the Python client raises KernelArenaError
    (retryable, picklable) at once, and envctl (libkaclient) fails fast."""
    srv = Server()
    e = Exec(srv.exec_url, "E/1/host:0")
    e.send_poll(wait_ms=100)
    e.recv()
    ep = reset(srv.url)
    client = Client(srv.url, timeout_s=120)
    out = {}

    def run():
        t = time.time()
        try:
            client.step(ep, 0, {"gelu.c": GELU})
            out["r"] = "reply"
        except Exception as x:  # noqa: BLE001
            out["r"] = x
        out["t"] = time.time() - t
    th = threading.Thread(target=run)
    th.start()
    job = e.take(timeout=5)
    check(job is not None, "the step's job reached the executor")
    time.sleep(0.3)
    srv.p.kill()
    th.join(20)
    x = out.get("r")
    check(not th.is_alive() and isinstance(x, KernelArenaError),
          f"Python client: {type(x).__name__}: {x}")
    check(x.retryable and x.code == "UNAVAILABLE" and out["t"] < 5,
          f"retryable UNAVAILABLE after {out['t']:.2f} s")
    y = pickle.loads(pickle.dumps(x))
    check(isinstance(y, KernelArenaError) and (y.code, y.message, y.retryable) ==
          (x.code, x.message, x.retryable), "KernelArenaError survives pickle")
    client.close()
    e.close()

    # envctl: an episode whose step the executor never answers; the server is killed
    srv2 = Server()
    e2 = Exec(srv2.exec_url, "E/2/host:0")
    e2.send_poll(wait_ms=100)
    e2.recv()
    p = spawn([os.path.join(BIN, "envctl"), "episode", "--server", srv2.url, "--task",
               "host/gelu", "--seed", "1", "--timeout", "120"], stdout=subprocess.PIPE,
              stderr=subprocess.STDOUT, text=True)
    job = e2.take(timeout=10)
    check(job is not None, "envctl's step reached the executor")
    time.sleep(0.3)
    t = time.time()
    srv2.p.kill()
    try:
        outp, _ = p.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        fail("envctl still waits 15 s after the server died")
    dt = time.time() - t
    print("  envctl said:", outp.strip().splitlines()[-1:] if outp else "")
    check(p.returncode != 0 and dt < 5, f"envctl failed (exit {p.returncode}) {dt:.2f} s after "
                                        "the server died")
    check("connection" in outp.lower(), "envctl names the lost connection")
    e2.close()

    # envctl against a URL where nothing listens: a clear error within the connect
    # timeout (10 s, or --timeout when shorter), not a wait of the whole request timeout
    t = time.time()
    r = subprocess.run([os.path.join(BIN, "envctl"), "health", "--server",
                        f"ipc://{WORK}/nothing-here.ipc", "--timeout", "2"], capture_output=True,
                       text=True, timeout=60)
    dt = time.time() - t
    check(r.returncode == 1 and "cannot reach an envserver" in r.stderr and 1.5 < dt < 8,
          f"envctl health with nothing listening: exit {r.returncode} after {dt:.1f} s: "
          f"{r.stderr.strip()[:120]}")
    # a --server that is no URL: said at once; validate's --task is not --tasks
    r = subprocess.run([os.path.join(BIN, "envctl"), "health", "--server", "foo"],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 1 and "is not a server URL" in r.stderr,
          f"envctl --server foo: exit {r.returncode}: {r.stderr.strip()[:120]}")
    r = subprocess.run([os.path.join(BIN, "envctl"), "validate", "--task", "host/gelu"],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 2 and "give the task id as an argument" in r.stderr,
          f"envctl validate --task: exit {r.returncode}: {r.stderr.strip()[:120]}")
    # envctl step in a workspace whose step proxy is gone: said at once
    ws = os.path.join(WORK, "ws-gone")
    os.makedirs(ws, exist_ok=True)
    open(os.path.join(ws, "gelu.c"), "wb").write(GELU)
    t = time.time()
    r = subprocess.run([os.path.join(BIN, "envctl"), "step"], cwd=ws, capture_output=True,
                       text=True, timeout=60,
                       env=dict(os.environ, KA_SERVER=f"ipc://{WORK}/gone.ipc",
                                KA_EPISODE="ep-0000000000000000", KA_FILES="gelu.c"))
    check(r.returncode != 0 and "nothing listens" in r.stderr and time.time() - t < 5,
          f"envctl step with its proxy gone: exit {r.returncode} after {time.time() - t:.1f} s: "
          f"{r.stderr.strip()[:120]}")
    # SIGTERM ends envctl at once, in the middle of a request
    p = spawn([os.path.join(BIN, "envctl"), "health", "--server", f"ipc://{WORK}/nothing2.ipc"],
              stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    p.terminate()
    try:
        p.wait(3)
    except subprocess.TimeoutExpired:
        fail("envctl still runs 3 s after SIGTERM")
    check(p.returncode == 143, f"envctl ends on SIGTERM (exit {p.returncode})")
    # ... and takes its embedded envserver and gpuexec with it
    p = spawn([os.path.join(BIN, "envctl"), "tasks", "--prompts", "--tasks", TASKS],
              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kids = []
    for _ in range(100):
        try:
            kids = open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()
        except OSError:
            kids = []
        if len(kids) >= 2:
            break
        time.sleep(0.05)
    p.terminate()
    p.wait(10)

    def alive(pid):
        try:
            return open(f"/proc/{pid}/stat").read().split(") ")[1][0] != "Z"
        except OSError:
            return False
    time.sleep(0.5)
    check(len(kids) >= 2 and not any(alive(k) for k in kids),
          f"SIGTERM during an embedded command: its servers {kids} are gone")


def wait_or_fail(wait):
    try:
        return wait()
    except pynng.Timeout:
        fail("the Step of the closed episode is still unanswered")


def case_close_cancels():
    """Issue 18: Close cancels the episode's step in flight, queued or running: the job is
    never evaluated (no executor gets it, a running one is told to drop it, and the trace
    store records no step) and the parked Step is answered CANCELLED."""
    srv = Server()
    # queued: the executor polled once (Reset needs a live one) and polls no more yet
    e = Exec(srv.exec_url, "E/1/host:0", heartbeats=True)
    e.send_poll(wait_ms=100)
    e.recv()
    ep = reset(srv.url)
    wait = step_async(srv.url, ep, timeout=5)
    time.sleep(0.3)
    h = call(srv.url, "health", pb.HealthRequest()).health
    check(h.queued_jobs == 1, f"the step is queued ({h.queued_jobs} queued)")
    r = call(srv.url, "close", pb.CloseRequest(episode_id=ep))
    check(r.WhichOneof("body") == "close" and r.close.was_open, f"Close answered: {err(r)}")
    rs = wait_or_fail(wait)
    check(err(rs) is not None and err(rs)[0] == "CANCELLED" and not err(rs)[2],
          f"the parked Step was answered CANCELLED: {err(rs)}")
    h = call(srv.url, "health", pb.HealthRequest()).health
    check(h.queued_jobs == 0 and h.running_jobs == 0, "no job is left queued or running")
    check(e.take(timeout=2) is None, "an executor polling after the Close gets no job")
    g = call(srv.url, "get_episode", pb.GetEpisodeRequest(episode_id=ep))
    check(g.WhichOneof("body") == "get_episode" and g.get_episode.episode.steps == 0 and
          len(g.get_episode.episode.step_records) == 0,
          "the trace store records no step of the closed episode")
    # running: the executor holds the job when the episode is closed
    ep2 = reset(srv.url)
    wait = step_async(srv.url, ep2, timeout=5)
    job = e.take(timeout=5)
    check(job is not None, "the second episode's step reached the executor")
    check(e.heartbeat(srv.exec_url, job.job_id), "the executor is asked to run it")
    r = call(srv.url, "close", pb.CloseRequest(episode_id=ep2))
    check(r.WhichOneof("body") == "close" and r.close.was_open, f"Close answered: {err(r)}")
    rs = wait_or_fail(wait)
    check(err(rs) is not None and err(rs)[0] == "CANCELLED",
          f"the running Step was answered CANCELLED: {err(rs)}")
    check(not e.heartbeat(srv.exec_url, job.job_id),
          "the executor's next heartbeat is told the job is no longer wanted")
    e.send_poll(ok_result(job.job_id), wait_ms=100)
    e.recv()
    g = call(srv.url, "get_episode", pb.GetEpisodeRequest(episode_id=ep2))
    check(g.get_episode.episode.steps == 0 and len(g.get_episode.episode.step_records) == 0,
          "its late result is not recorded")
    h = call(srv.url, "health", pb.HealthRequest()).health
    check(h.queued_jobs == 0 and h.running_jobs == 0 and h.open_episodes == 0,
          "nothing is left queued, running or open")
    e.close()


def case_lease_cancels():
    """Issue 18: an episode whose lease expires (--idle-ttl) with a step in flight, queued
    or running, is closed (idle_ttl) and its step cancelled: never evaluated or recorded,
    the parked Step answered CANCELLED, a running executor told to drop the job."""
    srv = Server("--idle-ttl", "2")
    e = Exec(srv.exec_url, "E/1/host:0", heartbeats=True)
    e.send_poll(wait_ms=100)
    e.recv()
    # queued: the executor polls no more; the Step carries no deadline
    ep = reset(srv.url)
    t = time.time()
    wait = step_async(srv.url, ep, timeout=8)
    rs = wait_or_fail(wait)
    check(err(rs) is not None and err(rs)[0] == "CANCELLED" and "idle TTL" in err(rs)[1],
          f"the queued Step was answered CANCELLED after {time.time() - t:.1f} s: {err(rs)}")
    st = call(srv.url, "state", pb.StateRequest(episode_id=ep)).state
    check(st.closed and st.close_reason == "idle_ttl" and st.step == 0,
          f"the episode is closed (idle_ttl) with no step counted ({st.close_reason}, {st.step})")
    h = call(srv.url, "health", pb.HealthRequest()).health
    check(h.queued_jobs == 0 and h.open_episodes == 0, "nothing is left queued or open")
    check(e.take(timeout=1.5) is None, "an executor polling now gets no job")
    # running: the executor holds the job and never answers
    ep2 = reset(srv.url)
    wait = step_async(srv.url, ep2, timeout=8)
    job = e.take(timeout=3)
    check(job is not None and e.heartbeat(srv.exec_url, job.job_id), "the job is running")
    rs = wait_or_fail(wait)
    check(err(rs) is not None and err(rs)[0] == "CANCELLED",
          f"the running Step was answered CANCELLED: {err(rs)}")
    check(not e.heartbeat(srv.exec_url, job.job_id), "the executor is told to drop the job")
    g = call(srv.url, "get_episode", pb.GetEpisodeRequest(episode_id=ep2))
    check(g.get_episode.episode.steps == 0 and not g.get_episode.episode.step_records and
          g.get_episode.episode.close_reason == "idle_ttl", "the trace store records no step")
    e.close()


def _raw_reset_with(label_bytes):
    placeholder = b"L" * len(label_bytes)
    rq = request("reset", pb.ResetRequest(task_id="host/gelu", options={"label": placeholder.decode()}))
    data = rq.SerializeToString()
    assert data.count(placeholder) == 1
    return data.replace(placeholder, label_bytes)


def case_utf8():
    """Item 5: string fields that are not UTF-8 are refused, naming the field, and never
    stored or echoed."""
    srv = Server()
    e = Exec(srv.exec_url, "E/1/host:0")
    e.send_poll(wait_ms=100)
    e.recv()
    s = pynng.Req0(resend_time=-1, recv_timeout=5000, dial=srv.url)
    s.send(_raw_reset_with(b"bad\xff\xfe"))
    r = pb.Response()
    r.ParseFromString(s.recv())  # a conforming decoder: raises if the reply is not UTF-8
    check(err(r) is not None and err(r)[0] == "INVALID_ARGUMENT" and
          "reset.options[0].value" in r.error.message,
          f"Reset with a non-UTF-8 label: {err(r)}")
    # an episode id of bad bytes: refused, not echoed
    rq = request("state", pb.StateRequest(episode_id="ep-XXXX"))
    s.send(rq.SerializeToString().replace(b"ep-XXXX", b"ep-\xc0\xaf\xed\xa0"))
    r = pb.Response()
    r.ParseFromString(s.recv())
    check(err(r) is not None and err(r)[0] == "INVALID_ARGUMENT" and
          "state.episode_id" in r.error.message, f"State with a non-UTF-8 id: {err(r)}")
    # nothing was stored: ListEpisodes decodes in Python and lists no episode
    r = call(srv.url, "list_episodes", pb.ListEpisodesRequest())
    check(r.WhichOneof("body") == "list_episodes" and len(r.list_episodes.episodes) == 0,
          "ListEpisodes decodes and holds no episode")
    # valid multi-byte UTF-8 passes
    s.send(_raw_reset_with("étiquette ✓".encode()))
    r = pb.Response()
    r.ParseFromString(s.recv())
    check(r.WhichOneof("body") == "reset", f"a valid UTF-8 label is accepted: {err(r)}")
    # an executor result with bad bytes in its compile log is repaired, not echoed raw
    ep = r.reset.episode_id
    wait = step_async(srv.url, ep)
    job = e.take()
    res = pb.Result(job_id=job.job_id, status=pb.COMPILE_ERROR, device=DEVICE,
                    compile_log="gelu.c:1: error: XXXX")
    _rid[0] += 1
    data = pb.ExecRequest(request_id=_rid[0], poll=pb.WorkerPoll(
        worker_id=e.wid, device=DEVICE, wait_ms=100, result=res)).SerializeToString()
    e.s.send(data.replace(b"XXXX", b"\x80\xffAB"))
    e.recv()
    rs = wait()  # decodes only if the log was made UTF-8
    check(rs.WhichOneof("body") == "step" and "?" in rs.step.observation.compile_log,
          "a compile log with bad bytes is stored and echoed as UTF-8")
    r = call(srv.url, "list_episodes", pb.ListEpisodesRequest())
    check(r.WhichOneof("body") == "list_episodes" and len(r.list_episodes.episodes) == 1,
          "ListEpisodes still decodes")


def _lock_store(db, seconds):
    """Holds an exclusive lock on the trace store from another process."""
    return spawn([sys.executable, "-c",
                  "import sqlite3,sys,time; c=sqlite3.connect(sys.argv[1], isolation_level=None);"
                  "c.execute('BEGIN EXCLUSIVE'); c.execute('CREATE TABLE IF NOT EXISTS hold(x)');"
                  "print('locked', flush=True); time.sleep(float(sys.argv[2]))", db, str(seconds)],
                 stdout=subprocess.PIPE, text=True)


def case_store_locked():
    """Item 7: with the trace store locked by another process, results waiting to be
    recorded do not delay Health."""
    srv = Server()
    n = 12
    workers = [Exec(srv.exec_url, f"W/{i}/host:0") for i in range(n)]
    for w in workers:
        w.send_poll(wait_ms=100)
        w.recv()
    eps = [reset(srv.url) for _ in range(n)]
    waits = [step_async(srv.url, ep) for ep in eps]
    jobs = [w.take(timeout=10) for w in workers]
    check(all(jobs), f"{n} jobs handed out")
    locker = _lock_store(os.path.join(srv.state, "trace.db"), 4)
    check("locked" in locker.stdout.readline(), "another process holds trace.db locked")
    for w, j in zip(workers, jobs):
        w.send_poll(ok_result(j.job_id), wait_ms=3000)
    time.sleep(0.5)
    worst = 0.0
    for _ in range(4):
        try:
            dt, r = health_time(srv.url, timeout=8)
        except pynng.Timeout:
            fail("Health got no answer in 8 s while results wait on the locked store")
        worst = max(worst, dt)
        time.sleep(0.2)
    check(worst < 1.0, f"Health answered within {worst:.2f} s while the store is locked")
    locker.wait()
    got = [wt() for wt in waits]
    nstep = sum(1 for g in got if g.WhichOneof("body") == "step")
    check(nstep == n, f"all {n} steps recorded once the lock was released ({nstep})")


def case_close_unrecorded():
    """Item 8: a Close whose write fails is not answered was_open = true; a retry records
    it (the store here is locked past its busy timeout; a full disk takes the same path)."""
    srv = Server()
    e = Exec(srv.exec_url, "E/1/host:0")
    e.send_poll(wait_ms=100)
    e.recv()
    ep = reset(srv.url)
    db = os.path.join(srv.state, "trace.db")
    locker = _lock_store(db, 7)
    locker.stdout.readline()
    r = call(srv.url, "close", pb.CloseRequest(episode_id=ep), timeout=15)
    check(err(r) is not None and err(r)[0] == "INTERNAL" and err(r)[2],
          f"Close with an unwritable store: {err(r)}")
    locker.wait()
    r = call(srv.url, "close", pb.CloseRequest(episode_id=ep), timeout=15)
    check(r.WhichOneof("body") == "close", f"Close retried: {err(r)}")
    row = sqlite3.connect(db).execute("SELECT closed_at, close_reason FROM episodes WHERE id=?",
                                      (ep,)).fetchone()
    check(row and row[0] is not None and row[1] == "closed", f"the close is recorded: {row}")
    check(not os.path.exists(os.path.join(srv.state, "workspaces", ep)),
          "the episode's workspace is removed once its close is recorded")


def _start_refused(pre, state):
    """Starts envserver on state and expects it to exit (refusing the store) within 15 s."""
    try:
        return subprocess.run(pre + [os.path.join(BIN, "envserver"), "--state", state, "--tasks",
                                     TASKS], capture_output=True, text=True, timeout=15)
    except subprocess.TimeoutExpired:
        fail("the server accepted the trace store at start (still running after 15 s)")


def case_store_refused():
    """Item 9: a read-only or damaged trace.db is refused at start with a clear error."""
    srv = Server()
    srv.p.terminate()
    srv.p.wait()
    db = os.path.join(srv.state, "trace.db")
    # read-only: as a user that may not write it (root may write anything)
    os.chmod(srv.state, 0o777)
    os.chmod(os.path.join(srv.state, "workspaces"), 0o777)
    os.chmod(db, 0o444)
    for f in ("trace.db-wal", "trace.db-shm"):
        if os.path.exists(os.path.join(srv.state, f)):
            os.remove(os.path.join(srv.state, f))
    pre = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] \
        if os.getuid() == 0 else []
    os.chmod(WORK, 0o755)
    p = _start_refused(pre, srv.state)
    check(p.returncode != 0 and "read-only" in p.stderr,
          f"read-only trace.db refused (exit {p.returncode}): {p.stderr.strip()[-200:]}")
    os.chmod(db, 0o644)
    # damaged: garbage over the pages after the header page
    con = sqlite3.connect(db)
    con.executescript("CREATE TABLE IF NOT EXISTS filler(x); INSERT INTO filler VALUES "
                      + ",".join(["(randomblob(3000))"] * 40) + ";")
    con.close()
    size = os.path.getsize(db)
    with open(db, "r+b") as f:
        f.seek(size // 2)
        f.write(os.urandom(8192))
    p = _start_refused([], srv.state)
    check(p.returncode != 0 and ("damaged" in p.stderr or "malformed" in p.stderr),
          f"damaged trace.db refused (exit {p.returncode}): {p.stderr.strip()[-200:]}")


def case_max_episodes():
    """Item 12 (part): concurrent Resets never open more than --max-episodes."""
    srv = Server("--max-episodes", "2")
    e = Exec(srv.exec_url, "E/1/host:0")
    e.send_poll(wait_ms=100)
    e.recv()
    results = []

    def one():
        try:
            results.append(call(srv.url, "reset", pb.ResetRequest(task_id="host/gelu"), 20))
        except pynng.NNGException as x:
            results.append(x)
    # the store locked for a moment widens the window between a Reset's admission and
    # its episode's insertion (the workspace and store I/O run unlocked)
    locker = _lock_store(os.path.join(srv.state, "trace.db"), 1.5)
    locker.stdout.readline()
    ths = [threading.Thread(target=one) for _ in range(24)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    opened = sum(1 for r in results if isinstance(r, pb.Response) and r.WhichOneof("body") == "reset")
    cap = sum(1 for r in results if isinstance(r, pb.Response) and err(r) and err(r)[0] == "CAPACITY")
    check(opened == 2 and cap == 22, f"24 concurrent Resets: {opened} opened, {cap} CAPACITY")
    h = call(srv.url, "health", pb.HealthRequest())
    check(h.health.open_episodes == 2, f"Health: {h.health.open_episodes} open episodes")


def case_inflight_memory():
    """The bytes of requests and evaluations held at once are bounded: past
    --max-inflight-mb a request is refused RESOURCE_EXHAUSTED (retryable)."""
    srv = Server("--max-inflight-mb", "1")
    e = Exec(srv.exec_url, "E/1/host:0")
    e.send_poll(wait_ms=100)
    e.recv()
    ep1, ep2 = reset(srv.url), reset(srv.url)
    big = GELU + b"\n/*" + b" " * (700 << 10) + b"*/\n"
    w1 = step_async(srv.url, ep1, content=big)
    time.sleep(0.5)
    r = step_async(srv.url, ep2, content=big)()
    check(err(r) is not None and err(r)[0] == "RESOURCE_EXHAUSTED" and err(r)[2],
          f"a second 700 KiB step past a 1 MiB limit: {err(r)}")
    st = call(srv.url, "state", pb.StateRequest(episode_id=ep2))
    check(st.state.step == 0 and st.state.inflight_step == 0, "the refused step changed nothing")
    dt, h = health_time(srv.url)
    check(h.WhichOneof("body") == "health", "small requests are still served")
    job = e.take()
    e.send_poll(ok_result(job.job_id), wait_ms=100)
    e.recv()
    check(w1().WhichOneof("body") == "step", "the first step completes")
    w2 = step_async(srv.url, ep2, content=big)
    job = e.take()
    check(job is not None, "retried after the first released its bytes: admitted")
    e.send_poll(ok_result(job.job_id), wait_ms=100)
    e.recv()
    check(w2().WhichOneof("body") == "step", "and counted")


def case_cleanup():
    """Item 10: gpuexec removes its evaluation folders on SIGTERM, a later gpuexec those of
    one killed with -9; episode workspaces go when the close is recorded."""
    tmp = tempfile.mkdtemp(prefix="tmpdir-", dir=WORK)
    bench = os.path.join(SRC, "bench", "tasks")
    state = tempfile.mkdtemp(prefix="state-", dir=WORK)
    log = open(os.path.join(WORK, "cleanup-server.log"), "w")
    srv = spawn([os.path.join(BIN, "envserver"), "--state", state, "--tasks", bench],
                stdout=log, stderr=subprocess.STDOUT)
    url = f"ipc://{state}/env.ipc"
    env = dict(os.environ, TMPDIR=tmp)
    slow = open(os.path.join(SRC, "tests/candidates/bench_copy_slow/copy.c"), "rb").read()

    def gpuexec():
        return spawn([os.path.join(BIN, "gpuexec"), "--server", f"ipc://{state}/exec.ipc",
                      "--tasks", bench, "--backends", "host"], env=env,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def leftovers():
        out = []
        for root, dirs, _ in os.walk(tmp):
            out += [os.path.join(root, d) for d in dirs if d.startswith(("ka-eval-", "ka-gpuexec-"))]
        return out

    def mid_job(g):
        c = Client(url, timeout_s=60)
        c.wait_ready(30)
        r = c.reset("bench/copy", seed=3)
        th = threading.Thread(target=lambda: _ignore(lambda: c.step(r.episode_id, 0,
                                                                    {"copy.c": slow})))
        th.start()
        end = time.time() + 30
        while time.time() < end and not any("ka-eval-" in d for d in leftovers()):
            time.sleep(0.1)
        check(any("ka-eval-" in d for d in leftovers()), "an evaluation folder exists mid-job")
        return c, r.episode_id

    g = gpuexec()
    c, ep = mid_job(g)
    g.terminate()
    g.wait(20)
    check(leftovers() == [], f"SIGTERM mid-job leaves nothing in TMPDIR: {leftovers()}")
    g = gpuexec()
    c2, _ = mid_job(g)
    g.kill()
    g.wait()
    check(leftovers() != [], "kill -9 mid-job leaves its folder")
    g = gpuexec()
    end = time.time() + 20
    while time.time() < end and leftovers():
        time.sleep(0.1)
    check(leftovers() == [] or all(f"ka-gpuexec-{g.pid}" in d for d in leftovers()),
          f"a new gpuexec removed the dead one's folder: {leftovers()}")
    g.terminate()
    g.wait(20)
    # SIGTERM taken by a thread other than main (the kernel picks any): gpuexec exits too
    g = gpuexec()
    end = time.time() + 30  # until its workers run (main, workers, heartbeats, nng's)
    while time.time() < end and len(os.listdir(f"/proc/{g.pid}/task")) < 10:
        time.sleep(0.2)
    time.sleep(0.5)
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    tids = [int(t) for t in os.listdir(f"/proc/{g.pid}/task") if int(t) != g.pid]
    check(tids and libc.syscall(234, g.pid, tids[-1], signal.SIGTERM) == 0,  # tgkill
          "SIGTERM sent to one of gpuexec's other threads")
    try:
        g.wait(10)
        ok("gpuexec exits when another thread takes the SIGTERM")
    except subprocess.TimeoutExpired:
        fail("gpuexec still runs 10 s after a SIGTERM taken by another thread")
    check(leftovers() == [], f"and leaves nothing: {leftovers()}")
    ws = os.path.join(state, "workspaces", ep)
    check(os.path.isdir(ws), "an open episode has its workspace")
    c.close(ep)
    check(not os.path.exists(ws), "Close removed the workspace once recorded")
    srv.terminate()


def case_exec_auth():
    """What authenticates an executor: over ipc, the socket file is the owner's alone
    (0600) and peers of other users are refused; a job's result counts only from the
    connection that took it, whatever worker id another peer claims."""
    srv = Server()
    path = srv.exec_url[len("ipc://"):]
    mode = os.stat(path).st_mode & 0o777
    check(mode == 0o600, f"exec.ipc has mode {oct(mode)}")
    if os.getuid() == 0:
        os.chmod(WORK, 0o755)
        os.chmod(srv.state, 0o755)
        os.chmod(path, 0o666)  # even if its mode is widened, the peer's uid is checked
        probe = ("import socket,sys; s=socket.socket(socket.AF_UNIX); s.settimeout(3);"
                 "s.connect(sys.argv[1]); s.sendall(b'\\x00SP\\x00\\x00\\x30\\x00\\x00');"
                 "s.recv(8); print('closed' if s.recv(1) == b'' else 'open')")
        p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            sys.executable, "-c", probe, path], capture_output=True, text=True,
                           timeout=20)
        check(p.stdout.strip() == "closed",
              f"a peer of another user gets no executor connection: {p.stdout.strip()} "
              f"{p.stderr.strip()[-120:]}")
        os.chmod(path, 0o600)
    w = Exec(srv.exec_url, "W/1/host:0")
    w.send_poll(wait_ms=100)
    w.recv()
    ep = reset(srv.url)
    wait = step_async(srv.url, ep)
    job = w.take()
    impostor = Exec(srv.exec_url, "W/1/host:0")
    impostor.send_poll(ok_result(job.job_id), wait_ms=100)
    impostor.recv()
    st = call(srv.url, "state", pb.StateRequest(episode_id=ep))
    check(st.state.step == 0 and st.state.inflight_step == 1,
          "a result posted by another connection under the same worker id is ignored")
    w.send_poll(ok_result(job.job_id), wait_ms=100)
    w.recv()
    r = wait()
    check(r.WhichOneof("body") == "step", "the result of the connection that took the job counts")


def case_enospc():
    """Item 8: on a full disk (writes under the state folder fail with ENOSPC, through an
    LD_PRELOAD shim), a Reset and a Close say so, the Close is not answered
    was_open = true, and both work again once there is space."""
    shim = os.environ.get("KA_TEST_ENOSPC_SHIM")
    if not shim or not os.path.exists(shim):
        fail("KA_TEST_ENOSPC_SHIM must name the built enospc shim (tests/reliability.cmake)")
    state = tempfile.mkdtemp(prefix="state-", dir=WORK)
    flag = os.path.join(WORK, "disk-full")
    srv = Server(state=state, env=dict(os.environ, LD_PRELOAD=shim, KA_TEST_ENOSPC_DIR=state,
                                       KA_TEST_ENOSPC_FLAG=flag))
    e = Exec(srv.exec_url, "E/1/host:0")
    e.send_poll(wait_ms=100)
    e.recv()
    ep = reset(srv.url)
    open(flag, "w").close()
    r = call(srv.url, "reset", pb.ResetRequest(task_id="host/gelu"), timeout=15)
    check(err(r) is not None and err(r)[0] == "INTERNAL" and err(r)[2] and
          "no space left on device" in r.error.message.lower(), f"Reset on a full disk: {err(r)}")
    r = call(srv.url, "close", pb.CloseRequest(episode_id=ep), timeout=15)
    check(err(r) is not None and err(r)[0] == "INTERNAL" and
          "no space left on device" in r.error.message.lower(), f"Close on a full disk: {err(r)}")
    os.remove(flag)
    r = call(srv.url, "close", pb.CloseRequest(episode_id=ep), timeout=15)
    check(r.WhichOneof("body") == "close", f"Close once there is space: {err(r)}")
    row = sqlite3.connect(os.path.join(state, "trace.db")).execute(
        "SELECT closed_at FROM episodes WHERE id=?", (ep,)).fetchone()
    check(row and row[0] is not None, "the close is recorded")
    r = call(srv.url, "reset", pb.ResetRequest(task_id="host/gelu"), timeout=15)
    check(r.WhichOneof("body") == "reset", f"Reset once there is space: {err(r)}")


def _ignore(f):
    try:
        f()
    except Exception:  # noqa: BLE001
        pass


CASES = {k[len("case_"):]: v for k, v in globals().items() if k.startswith("case_")}
if CASE not in CASES:
    print("unknown case; one of:", ", ".join(CASES))
    sys.exit(2)
print(f"# {CASE}: {CASES[CASE].__doc__.strip().splitlines()[0]}")
CASES[CASE]()
print(f"# {CASE}: all checks passed")
