#!/usr/bin/env python3
"""Soak under faults: a real envserver and real gpuexecs (host backend, bench/tasks'
bench/copy) serve a steady load of episodes while faults from issue 14 are injected at
random; at the end every acknowledged step must be in the trace store exactly once, with
the reward the client saw, and nothing may be left behind.

Faults (one every --every seconds on average, chosen at random):
  stop      SIGSTOP a gpuexec for 2-20 s, then SIGCONT
  kill9     kill -9 a gpuexec, start a new one
  term      SIGTERM a gpuexec, start a new one
  slowread  a client pipelines 300 requests and reads nothing for 15 s
  badutf8   a Reset whose label is not UTF-8 (must be refused INVALID_ARGUMENT)
  lock      another process holds trace.db locked (BEGIN EXCLUSIVE) for 3 s
  health    (always, every second) Health must answer within 2 s

Clients retry retryable errors with the same expected_step, as rollout() does; a Step
refused FAILED_PRECONDITION after a retry reads State to learn whether it was counted.

usage: soak_faults.py [--bin build/bin] [--seconds 600] [--clients 6] [--executors 2]
                      [--every 8] [--seed 1]
Prints the figures and exits 0 when no step is lost or duplicated, no fault broke the
server, Health always answered, and no evaluation folder or workspace is left.
"""
import argparse
import collections
import os
import random
import resource  # noqa: F401  (RSS below comes from /proc)
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

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SRC, "clients", "python"))
import pynng  # noqa: E402
from kernelarena import Client, KernelArenaError  # noqa: E402
from kernelarena import kernelarena_pb2 as pb  # noqa: E402

TASK = "bench/copy"
CANDIDATE = b"void copy_forward(const float *x, float *y, long long n) {\n" \
            b"  for (long long i = 0; i < n; i++) y[i] = x[i];\n}\n"


def rss_kb(pid, key="VmRSS"):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Soak:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed)
        self.work = tempfile.mkdtemp(prefix="ka-soak-")
        self.state = os.path.join(self.work, "state")
        self.tmp = os.path.join(self.work, "tmp")
        os.makedirs(self.tmp)
        self.url = f"ipc://{self.state}/env.ipc"
        self.exec_url = f"ipc://{self.state}/exec.ipc"
        self.tasks = os.path.join(SRC, "bench", "tasks")
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acked = {}  # episode -> {step: reward}
        self.errors = collections.Counter()
        self.faults = collections.Counter()
        self.problems = []
        self.health_worst = 0.0
        self.health_fail = 0
        self.execs = []

    # ---- processes
    def start_server(self):
        self.slog = open(os.path.join(self.work, "server.log"), "w")
        self.srv = subprocess.Popen(
            [os.path.join(self.a.bin, "envserver"), "--state", self.state, "--tasks", self.tasks,
             "--heartbeat-timeout", "6", "--quiet"], stdout=self.slog, stderr=subprocess.STDOUT)

    def start_exec(self):
        env = dict(os.environ, TMPDIR=self.tmp)
        p = subprocess.Popen([os.path.join(self.a.bin, "gpuexec"), "--server", self.exec_url,
                              "--tasks", self.tasks, "--backends", "host",
                              "--heartbeat-interval", "1"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.execs.append(p)
        return p

    # ---- load
    def client_loop(self, idx):
        c = Client(self.url, timeout_s=120, connect_timeout_s=10)
        rng = random.Random(self.a.seed * 1000 + idx)
        while not self.stop.is_set():
            try:
                r = self.retry(lambda: c.reset(TASK, seed=rng.randrange(1 << 30),
                                               options={"max_steps": 3}))
            except KernelArenaError as e:
                self.errors["reset:" + e.code] += 1
                continue
            ep = r.episode_id
            with self.lock:
                self.acked[ep] = {}
            for step in range(3):
                if self.stop.is_set():
                    break
                s = self.step(c, ep, step)
                if s is None:
                    break
                with self.lock:
                    self.acked[ep][step + 1] = s.reward
            try:
                self.retry(lambda: c.close(ep))
            except KernelArenaError as e:
                self.errors["close:" + e.code] += 1
        c.close()

    def retry(self, f, tries=30):
        for i in range(tries):
            try:
                return f()
            except KernelArenaError as e:
                if not e.retryable or i == tries - 1:
                    raise
                self.errors["retried:" + e.code] += 1
                time.sleep(min(2.0, 0.1 * 2 ** i))

    def step(self, c, ep, step):
        for i in range(8):
            try:
                return c.step(ep, step, {"copy.c": CANDIDATE}, deadline_s=90)
            except KernelArenaError as e:
                if e.code == "FAILED_PRECONDITION" and i > 0:
                    st = c.state(ep)
                    if st.step > step:  # the earlier attempt was counted; its reply was lost
                        self.errors["step:counted_reply_lost"] += 1
                        return None
                if not e.retryable:
                    self.errors["step:" + e.code] += 1
                    return None
                self.errors["retried:" + e.code] += 1
                time.sleep(min(2.0, 0.1 * 2 ** i))
        self.errors["step:gave_up"] += 1
        return None

    # ---- faults
    def fault(self):
        kind = self.rng.choice(["stop", "kill9", "term", "slowread", "badutf8", "lock"])
        self.faults[kind] += 1
        live = [p for p in self.execs if p.poll() is None]
        if kind in ("stop", "kill9", "term") and live:
            p = self.rng.choice(live)
            if kind == "stop":
                p.send_signal(signal.SIGSTOP)
                t = threading.Timer(self.rng.uniform(2, 20), lambda: p.send_signal(signal.SIGCONT))
                t.daemon = True
                t.start()
            else:
                p.send_signal(signal.SIGCONT)
                p.send_signal(signal.SIGKILL if kind == "kill9" else signal.SIGTERM)
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    self.problems.append(f"gpuexec {p.pid} did not exit 20 s after {kind}")
                    p.kill()
                    p.wait()
                self.execs.remove(p)
                self.start_exec()
        elif kind == "slowread":
            threading.Thread(target=self.slow_reader, daemon=True).start()
        elif kind == "badutf8":
            rq = pb.Request(request_id=7, reset=pb.ResetRequest(task_id=TASK,
                                                                options={"label": "LLLL"}))
            data = rq.SerializeToString().replace(b"LLLL", b"\xff\xfe\xfd\xfc")
            with pynng.Req0(resend_time=-1, recv_timeout=10000, dial=self.url) as s:
                s.send(data)
                r = pb.Response()
                r.ParseFromString(s.recv())
                if r.WhichOneof("body") != "error" or r.error.code != pb.INVALID_ARGUMENT:
                    self.problems.append(f"bad UTF-8 Reset answered {r.WhichOneof('body')}")
        elif kind == "lock":
            subprocess.Popen([sys.executable, "-c",
                              "import sqlite3,sys,time; c=sqlite3.connect(sys.argv[1], "
                              "isolation_level=None); c.execute('BEGIN EXCLUSIVE');"
                              "c.execute('CREATE TABLE IF NOT EXISTS hold(x)'); time.sleep(3)",
                              os.path.join(self.state, "trace.db")])

    def slow_reader(self):
        raw = socket.socket(socket.AF_UNIX)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        raw.connect(self.url[len("ipc://"):])
        raw.sendall(b"\x00SP\x00" + struct.pack(">H", 48) + b"\x00\x00")
        raw.recv(8)
        raw.setblocking(False)
        for i in range(300):
            body = pb.Request(request_id=i + 1, list_tasks=pb.ListTasksRequest()).SerializeToString()
            payload = struct.pack(">I", 0x80000000 | (i + 1)) + body
            try:
                raw.send(b"\x01" + struct.pack(">Q", len(payload)) + payload)
            except BlockingIOError:
                break
        time.sleep(15)
        raw.close()

    def health_loop(self):
        while not self.stop.is_set():
            t = time.time()
            try:
                with pynng.Req0(resend_time=-1, recv_timeout=2000, send_timeout=2000,
                                dial=self.url) as s:
                    s.send(pb.Request(request_id=1, health=pb.HealthRequest()).SerializeToString())
                    s.recv()
                self.health_worst = max(self.health_worst, time.time() - t)
            except pynng.NNGException:
                self.health_fail += 1
            time.sleep(1)

    # ---- run and verify
    def run(self):
        a = self.a
        self.start_server()
        for _ in range(a.executors):
            self.start_exec()
        Client(self.url, timeout_s=30).wait_ready(60, executors=a.executors)
        rss0 = rss_kb(self.srv.pid)
        ths = [threading.Thread(target=self.client_loop, args=(i,)) for i in range(a.clients)]
        ths.append(threading.Thread(target=self.health_loop))
        for t in ths:
            t.start()
        t0 = time.time()
        while time.time() - t0 < a.seconds:
            time.sleep(self.rng.expovariate(1.0 / a.every))
            if time.time() - t0 < a.seconds:
                self.fault()
        self.stop.set()
        for p in self.execs:
            p.send_signal(signal.SIGCONT)
        for t in ths:
            t.join(300)
        wall = time.time() - t0
        rss1, hwm = rss_kb(self.srv.pid), rss_kb(self.srv.pid, "VmHWM")
        for p in self.execs:
            p.send_signal(signal.SIGTERM)
        for p in self.execs:
            p.wait(30)
        alive = self.srv.poll() is None
        self.srv.send_signal(signal.SIGTERM)
        self.srv.wait(30)
        return self.verify(wall, rss0, rss1, hwm, alive)

    def verify(self, wall, rss0, rss1, hwm, alive):
        db = sqlite3.connect(os.path.join(self.state, "trace.db"))
        rows = collections.defaultdict(dict)
        for ep, step, reward in db.execute("SELECT episode_id, step, reward FROM steps"):
            rows[ep][step] = reward
        nacked = sum(len(v) for v in self.acked.values())
        lost = [(ep, s) for ep, st in self.acked.items() for s in st if s not in rows.get(ep, {})]
        wrong = [(ep, s) for ep, st in self.acked.items() for s, r in st.items()
                 if s in rows.get(ep, {}) and abs(rows[ep][s] - r) > 1e-9]
        unclosed = db.execute("SELECT count(*) FROM episodes WHERE closed_at IS NULL").fetchone()[0]
        left = [os.path.join(r, d) for r, ds, _ in os.walk(self.tmp) for d in ds
                if d.startswith(("ka-eval-", "ka-gpuexec-"))]  # not the reference cache
        ws = os.listdir(os.path.join(self.state, "workspaces"))
        print(f"soak: {wall:.0f} s, {self.a.clients} clients, {self.a.executors} gpuexecs (host)")
        print(f"faults injected: {sum(self.faults.values())} {dict(self.faults)}")
        print(f"episodes {len(self.acked)}, acknowledged steps {nacked}, recorded steps "
              f"{sum(len(v) for v in rows.values())}")
        print(f"lost {len(lost)}, reward mismatches {len(wrong)}, episodes not closed {unclosed}")
        print(f"errors seen by clients: {dict(self.errors)}")
        print(f"Health: worst {self.health_worst:.2f} s, unanswered {self.health_fail}")
        print(f"envserver RSS {rss0 / 1024:.1f} MiB at start, {rss1 / 1024:.1f} MiB at end, "
              f"peak {hwm / 1024:.1f} MiB; alive at the end: {alive}")
        print(f"left in TMPDIR: {left}; workspaces left: {len(ws)}")
        for p in self.problems:
            print("problem:", p)
        ok = (alive and not lost and not wrong and not left and self.health_fail == 0 and
              not self.problems and nacked > 0 and unclosed == 0 and not ws)
        print("soak:", "PASS" if ok else "FAIL")
        if ok:
            shutil.rmtree(self.work, ignore_errors=True)
        else:
            print("kept", self.work)
        return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(SRC, "build", "bin"))
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--executors", type=int, default=2)
    ap.add_argument("--every", type=float, default=8.0)
    ap.add_argument("--seed", type=int, default=1)
    sys.exit(0 if Soak(ap.parse_args()).run() else 1)


if __name__ == "__main__":
    main()
