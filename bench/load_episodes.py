#!/usr/bin/env python3
"""Load benchmark of the envserver: many concurrent episodes of several steps each.

Starts a real envserver on a temporary state folder with bench/tasks (the trivial
bench/copy task), an executor, and one asyncio client process that keeps --episodes
episodes in flight (reset, --steps steps, close; each retried on retryable errors with
the same expected_step, as a trainer would). Reports:

  * steps per second (counted steps / wall time of the round);
  * p50/p99 of the server's own overhead per step: the client's Step latency minus the
    executor's evaluation time that the server reports back (StepResponse.info wall_s,
    which covers compile + run on a real executor). What remains is the server's
    decoding, validation, workspace writes, queueing for a free worker, the trace-store
    commit, the reply, and the client library's own time;
  * errors by code (CAPACITY is expected when --max-episodes < --episodes: those resets
    are retried);
  * envserver RSS (VmRSS from /proc/PID/status) before the first round and after each
    round, and its peak (VmHWM);
  * lost or duplicated step records: the trace store (trace.db, sqlite3) must hold exactly
    one record for each step the client saw answered, numbered 1..n, with the reward the
    client received, and no episode the client did not open.

Executors (--executor):
  fake     (default) processes that answer every job at once with a canned OK Result, so
           the figures are the server's alone (a real host evaluation costs 1-3 s of CPU
           on the 2-core CI machine, which would hide the server entirely);
  gpuexec  the real executor on the host backend (use far fewer episodes/steps here).

usage: load_episodes.py [--bin build/bin] [--episodes 1000] [--steps 10] [--rounds 2]
                        [--max-episodes 900] [--executor fake|gpuexec] [--workers 4]
Exit status 0 when the targets hold (no lost or duplicated records, no errors other
than CAPACITY, every episode finished), 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import multiprocessing
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SRC, "clients", "python"))

import pynng  # noqa: E402

from kernelarena import AsyncClient, Client, KernelArenaError  # noqa: E402
from kernelarena import kernelarena_pb2 as pb  # noqa: E402

TASK = "bench/copy"
CANDIDATE = b"void copy_forward(const float *x, float *y, long long n) {\n" \
            b"  for (long long i = 0; i < n; i++) y[i] = x[i];\n}\n"


def fake_worker(url: str, index: int, stop) -> None:
    """A fake executor: long-polls the executor socket and answers each job at once with
    an OK Result whose shown cases are correct and as fast as the baseline."""
    dev = pb.Device(backend="host", index=index, name="fake host CPU (load bench)",
                    arch="x86_64", multiprocessors=1, warp_size=1)
    wid = f"loadbench/{os.getpid()}/host:{index}"
    sock = pynng.Req0(recv_timeout=30000, send_timeout=10000)
    sock.dial(url, block=False)  # the server may not listen yet; nng redials
    result = None
    rid = 0
    while not stop.is_set():
        rid += 1
        poll = pb.WorkerPoll(worker_id=wid, device=dev, wait_ms=1000)
        if result is not None:
            poll.result.CopyFrom(result)
        try:
            sock.send(pb.ExecRequest(request_id=rid, poll=poll).SerializeToString())
            rep = pb.ExecResponse.FromString(sock.recv())
        except pynng.Timeout:
            continue
        except pynng.exceptions.Closed:
            return
        result = None
        if rep.WhichOneof("body") == "assignment" and rep.assignment.HasField("job"):
            t0 = time.perf_counter()
            job = rep.assignment.job
            r = pb.Result(job_id=job.job_id, status=pb.OK, device=dev, geomean_speedup=1.0)
            for name, n in (("n64", 64), ("n100", 100)):
                r.cases.add(name=name, correct=True, elements=n, baseline_ms=0.001,
                            candidate_ms=0.001, speedup=1.0, timed_calls=1)
            r.wall_s = time.perf_counter() - t0
            result = r


def rss_kb(pid: int):
    """(VmRSS, VmHWM) of a process in KiB, from /proc/PID/status."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    return out.get("VmRSS", 0), out.get("VmHWM", 0)


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


async def episode(client, index, args, stats, seen):
    """One episode: reset (retrying CAPACITY), args.steps steps, close."""
    delay = 0.05
    while True:
        try:
            r = await client.reset(TASK, seed=index, options={"max_steps": args.steps,
                                                              "run": args.run})
            break
        except KernelArenaError as e:
            stats["errors"][e.code] += 1
            if not e.retryable:
                stats["failed"] += 1
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
    eid = r.episode_id
    seen[eid] = []
    for step in range(args.steps):
        tries = 0
        while True:
            t0 = time.perf_counter()
            try:
                s = await client.step(eid, step, {"copy.c": CANDIDATE})
                break
            except KernelArenaError as e:
                stats["errors"][e.code] += 1
                tries += 1
                if not e.retryable or tries > 5:
                    stats["failed"] += 1
                    await client.close(eid)
                    return
                await asyncio.sleep(0.1)
        lat = time.perf_counter() - t0
        wall = float(s.info.get("wall_s", "0"))
        stats["latency"].append(lat)
        stats["overhead"].append(lat - wall)
        stats["exec"].append(wall)
        seen[eid].append(s.reward)
        if s.terminated or s.truncated:
            break
    try:
        await client.close(eid)
    except KernelArenaError as e:
        stats["errors"][e.code] += 1


async def run_round(url, args, seen):
    stats = {"errors": collections.Counter(), "latency": [], "overhead": [], "exec": [],
             "failed": 0}
    async with AsyncClient(url, timeout_s=args.deadline) as client:
        t0 = time.perf_counter()
        await asyncio.gather(*(episode(client, args.seed0 + i, args, stats, seen)
                               for i in range(args.episodes)))
        stats["wall"] = time.perf_counter() - t0
    return stats


def check_store(db_path, seen):
    """Compares the trace store with what the client saw: (lost, duplicated, mismatched,
    unknown episodes)."""
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    rows = collections.defaultdict(list)
    for eid, step, reward in con.execute("SELECT episode_id, step, reward FROM steps"):
        rows[eid].append((step, reward))
    eps = {e for (e,) in con.execute("SELECT id FROM episodes")}
    con.close()
    lost = dup = bad = 0
    for eid, rewards in seen.items():
        recs = sorted(rows.get(eid, []))
        for k, rw in enumerate(rewards):  # step k + 1 was answered: one record, same reward
            match = [r for s, r in recs if s == k + 1]
            if not match:
                lost += 1
            else:
                dup += len(match) - 1
                if abs(match[0] - rw) > 1e-9:
                    bad += 1
        dup += sum(1 for s, _ in recs if not 1 <= s <= len(rewards))  # never answered
    unknown = len(eps - set(seen))
    return lost, dup, bad, unknown


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(SRC, "build", "bin"))
    ap.add_argument("--episodes", type=int, default=1000, help="concurrent episodes")
    ap.add_argument("--steps", type=int, default=10, help="steps per episode")
    ap.add_argument("--rounds", type=int, default=2,
                    help="rounds of --episodes episodes (memory is compared across rounds)")
    ap.add_argument("--max-episodes", type=int, default=900,
                    help="the server's --max-episodes (below --episodes: CAPACITY, retried)")
    ap.add_argument("--executor", choices=("fake", "gpuexec"), default="fake")
    ap.add_argument("--workers", type=int, default=4, help="fake executor processes")
    ap.add_argument("--deadline", type=float, default=600.0, help="per-request deadline, s")
    ap.add_argument("--seed0", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the state folder")
    args = ap.parse_args()
    args.run = "loadbench"

    work = tempfile.mkdtemp(prefix="ka-load-")
    state = os.path.join(work, "state")
    url, exec_url = f"ipc://{state}/env.ipc", f"ipc://{state}/exec.ipc"
    srv_log = open(os.path.join(work, "server.log"), "w")
    srv = subprocess.Popen([os.path.join(args.bin, "envserver"), "--state", state, "--tasks",
                            os.path.join(HERE, "tasks"), "--max-episodes",
                            str(args.max_episodes), "--max-steps", str(args.steps)],
                           stdout=srv_log, stderr=subprocess.STDOUT)
    procs, stop = [], multiprocessing.Event()
    ok = False
    try:
        if args.executor == "fake":
            for i in range(args.workers):
                p = multiprocessing.Process(target=fake_worker, args=(exec_url, i, stop),
                                            daemon=True)
                p.start()
                procs.append(p)
        else:
            gx_log = open(os.path.join(work, "gpuexec.log"), "w")
            procs.append(subprocess.Popen([os.path.join(args.bin, "gpuexec"), "--server",
                                           exec_url, "--tasks", os.path.join(HERE, "tasks"),
                                           "--backends", "host"], stdout=gx_log,
                                          stderr=subprocess.STDOUT))
        for _ in range(300):
            if os.path.exists(os.path.join(state, "env.ipc")):
                break
            time.sleep(0.1)
        with Client(url, timeout_s=30) as c:
            c.wait_ready(timeout_s=60)
        rss0, _ = rss_kb(srv.pid)
        print(f"load_episodes: {args.episodes} concurrent episodes x {args.steps} steps, "
              f"{args.rounds} round(s), executor {args.executor}, server --max-episodes "
              f"{args.max_episodes}; state {state}")
        print(f"envserver RSS before: {rss0} KiB")
        seen = {}
        total_errors = collections.Counter()
        failed = 0
        rss_after = []
        for rnd in range(args.rounds):
            args.seed0 = 1 + rnd * args.episodes
            st = asyncio.run(run_round(url, args, seen))
            rss, hwm = rss_kb(srv.pid)
            rss_after.append(rss)
            n = len(st["latency"])
            total_errors.update(st["errors"])
            failed += st["failed"]
            print(f"round {rnd + 1}: {n} steps in {st['wall']:.1f} s = "
                  f"{n / st['wall']:.1f} steps/s; step latency p50 "
                  f"{pct(st['latency'], 50) * 1e3:.1f} ms p99 {pct(st['latency'], 99) * 1e3:.1f} ms;"
                  f" server overhead p50 {pct(st['overhead'], 50) * 1e3:.1f} ms p99 "
                  f"{pct(st['overhead'], 99) * 1e3:.1f} ms; executor time p50 "
                  f"{pct(st['exec'], 50) * 1e3:.1f} ms; errors "
                  f"{dict(st['errors']) or 'none'}; RSS after {rss} KiB (peak {hwm} KiB)")
        with Client(url, timeout_s=30) as c:
            h = c.health()
        lost, dup, bad, unknown = check_store(os.path.join(state, "trace.db"), seen)
        answered = sum(len(v) for v in seen.values())
        expected = args.rounds * args.episodes * args.steps
        print(f"steps answered {answered} of {expected}; episodes opened {len(seen)}; "
              f"open after: {h.open_episodes}")
        print(f"trace store: lost {lost}, duplicated {dup}, reward mismatches {bad}, "
              f"episodes the client never saw {unknown}")
        print(f"errors by code: {dict(total_errors) or 'none'}")
        print(f"envserver RSS: before {rss0} KiB, after each round "
              f"{', '.join(str(r) for r in rss_after)} KiB")
        other = {k: v for k, v in total_errors.items() if k != "CAPACITY"}
        ok = (lost == dup == bad == unknown == 0 and not other and failed == 0 and
              answered == expected and h.open_episodes == 0)
        print("load_episodes: " + ("PASS" if ok else "FAIL"))
    finally:
        stop.set()
        for p in procs:
            if isinstance(p, subprocess.Popen):
                p.terminate()
                p.wait()
            else:
                p.join(3)
                if p.is_alive():
                    p.terminate()
        srv.terminate()
        srv.wait()
        if not args.keep:
            subprocess.run(["rm", "-rf", work])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
