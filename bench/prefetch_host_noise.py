#!/usr/bin/env python3
"""Timing noise of the host backend under a Reset storm, with and without the prefetch
gate (issue 15; gpuexec/daemon/prefetch.c, ka_prefetch_pause).

The host backend times its calls on the CPU, so any host work beside them is noise. For
each mode a fresh envserver + gpuexec (host backend) runs; a storm thread opens an
episode of STORM_TASK with a fresh seed every --interval seconds and closes the one it
opened --keep resets before (a Reset storm: every Reset queues a reference prefetch),
while one neighbour episode of --task steps its unchanged baseline --steps times, so
each step's per-case speedup is the baseline timed against itself. Modes:
  none     gpuexec --no-prefetch (no prefetch work at all: the floor)
  ungated  KA_PREFETCH_GATE=0 (prefetches run beside the host runner: before the gate)
  gated    as gpuexec runs by default (no prefetch unit while a host runner works)
The modes take turns, --rounds times (--steps split over the rounds), each time on a fresh
stack. A row per mode: the self-speedups' count, median, min, max, the 5-95 % spread and how
many lie within +-2 %, and the prefetches the executor ran (its log).
  python3 bench/prefetch_host_noise.py [--bin build/bin] [--steps 24] [--rounds 3] [--modes ...]
Needs the Python client (clients/python; PYTHONPATH is set here) and its pynng.
"""
import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))
import kernelarena  # noqa: E402


def start(bin_dir, state, tasks, mode):
    env = dict(os.environ)
    flags = []
    if mode == "none":
        flags = ["--no-prefetch"]
    if mode == "ungated":
        env["KA_PREFETCH_GATE"] = "0"
    sv = subprocess.Popen([f"{bin_dir}/envserver", "--state", state, "--tasks", tasks,
                           "--quiet"], stdout=open(f"{state}/server.log", "w"),
                          stderr=subprocess.STDOUT)
    gx = subprocess.Popen([f"{bin_dir}/gpuexec", "--server", f"ipc://{state}/exec.ipc",
                           "--tasks", tasks, "--backends", "host", "--verbose"] + flags,
                          stdout=open(f"{state}/gpuexec.log", "w"), stderr=subprocess.STDOUT,
                          env=env)
    c = kernelarena.Client(f"ipc://{state}/env.ipc", timeout_s=600)
    for _ in range(300):
        try:
            if c.health(timeout_s=2).executors > 0:
                return sv, gx, c
        except kernelarena.KernelArenaError:
            pass
        time.sleep(0.2)
    raise SystemExit("the stack did not come up: see " + state)


def storm(c, task, interval, keep, stop, opened):
    """Opens an episode every interval s (a fresh seed), closing the one keep before."""
    live = []
    while not stop.is_set():
        try:
            r = c.reset(task, seed=random.randrange(1, 1 << 62))
            live.append(r.episode_id)
            opened.append(r.episode_id)
            if len(live) > keep:
                c.close(live.pop(0))
        except kernelarena.KernelArenaError:
            pass
        stop.wait(interval)
    for e in live:
        try:
            c.close(e)
        except kernelarena.KernelArenaError:
            pass


def run_mode(a, mode, steps):
    state = tempfile.mkdtemp(prefix=f"ka-noise-{mode}-")
    sv, gx, c = start(a.bin, state, a.tasks, mode)
    speeds, stop, opened = [], threading.Event(), []
    try:
        sc = kernelarena.Client(f"ipc://{state}/env.ipc", timeout_s=600)
        th = threading.Thread(target=storm, args=(sc, a.storm_task, a.interval, a.keep, stop,
                                                  opened), daemon=True)
        th.start()
        r = c.reset(a.task, seed=777, options={"max_steps": steps})
        ep = r.episode_id
        for i in range(steps):
            s = c.step(ep, i)
            for k, v in s.reward_components.items():
                if k.startswith("speedup/") and v > 0:
                    speeds.append(v)
        stop.set()
        th.join(timeout=30)
        c.close(ep)
    finally:
        gx.terminate()
        sv.terminate()
        gx.wait()
        sv.wait()
    log = open(f"{state}/gpuexec.log").read()
    ran = log.count("references ready")
    shutil.rmtree(state, ignore_errors=True)
    return speeds, ran, len(opened)


def row(mode, speeds, ran, opened):
    if not speeds:
        return f"{mode:8s} no speedups"
    s = sorted(speeds)
    p5, p95 = s[int(0.05 * (len(s) - 1))], s[int(0.95 * (len(s) - 1))]
    within = sum(1 for v in s if 0.98 <= v <= 1.02)
    return (f"{mode:8s} {len(s):3d} {statistics.median(s):7.4f} {s[0]:7.4f} {s[-1]:7.4f} "
            f"{p5:7.4f}-{p95:<7.4f} {within:3d}/{len(s):<3d} {opened:5d} {ran:5d}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    p.add_argument("--tasks", default=os.path.join(ROOT, "tasks"))
    p.add_argument("--task", default="host/gelu", help="the neighbour's task")
    p.add_argument("--storm-task", default="host/gelu")
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--interval", type=float, default=0.2, help="seconds between Resets")
    p.add_argument("--keep", type=int, default=4, help="storm episodes kept open")
    p.add_argument("--modes", default="none ungated gated")
    p.add_argument("--rounds", type=int, default=3, help="rounds over the modes")
    a = p.parse_args()
    print(f"date: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}  host: "
          f"{os.uname().nodename}, {os.cpu_count()} cores")
    print(f"neighbour: {a.task}, {a.steps} steps of its baseline in {a.rounds} rounds; storm: {a.storm_task}, a "
          f"Reset every {a.interval} s, {a.keep} kept open")
    modes = a.modes.split()
    acc = {m: ([], 0, 0) for m in modes}
    per = max(1, a.steps // a.rounds)
    # rounds: every mode in turn, each on a fresh stack, so that a change of the machine's
    # load spreads over all modes alike
    for rnd in range(a.rounds):
        for mode in modes:
            speeds, ran, opened = run_mode(a, mode, per)
            sp, r0, o0 = acc[mode]
            acc[mode] = (sp + speeds, r0 + ran, o0 + opened)
            print(f"round {rnd + 1}: " + row(mode, speeds, ran, opened), flush=True)
    print("\nmode       n  median     min     max  p5-p95          +-2%    resets prefetches")
    for m in modes:
        print(row(m, *acc[m]))


if __name__ == "__main__":
    main()
