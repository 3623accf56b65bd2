#!/usr/bin/env python3
"""Memory of envserver under large requests (issue 14): reports the server's peak RSS
(VmHWM) and address space (VmPeak) for

  1. 16 concurrent Steps of SIZE MiB each (default 7: under the client socket's 8 MiB
     limit, over a request's 5 MiB): each must be answered RESOURCE_EXHAUSTED;
  2. 16 concurrent Steps of 120 MiB: nng drops each connection (over 8 MiB);
  3. 60 connections that announce a 120 MiB message and send nothing;
  4. 60 connections that announce a 7 MiB message and send nothing.

usage: inflight_memory.py [--bin build/bin] [--size 20]
"""
import argparse
import os
import socket
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
from kernelarena import kernelarena_pb2 as pb  # noqa: E402


def status(pid, key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024.0
    return 0.0


def steps(url, mib, n):
    data = pb.Request(request_id=1, step=pb.StepRequest(episode_id="ep-0000000000000000", files=[
        pb.File(path="gelu.c", content=b" " * (mib << 20))])).SerializeToString()
    out = []

    def one():
        try:
            with pynng.Req0(resend_time=-1, recv_timeout=20000, send_timeout=20000,
                            recv_max_size=1 << 20, dial=url) as s:
                s.send(data)
                r = pb.Response()
                r.ParseFromString(s.recv())
                out.append(pb.ErrorCode.Name(r.error.code) if r.HasField("error") else "reply")
        except pynng.NNGException as e:
            out.append(type(e).__name__)
    ths = [threading.Thread(target=one) for _ in range(n)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    return sorted(set(out)), len(out)


def announce(path, mib, n):
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        s.sendall(b"\x00SP\x00" + struct.pack(">H", 48) + b"\x00\x00")
        s.recv(8)
        s.sendall(b"\x01" + struct.pack(">Q", mib << 20))  # a header, then nothing
        socks.append(s)
    time.sleep(1.0)
    return socks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(SRC, "build", "bin"))
    ap.add_argument("--size", type=int, default=7)
    a = ap.parse_args()
    state = tempfile.mkdtemp(prefix="ka-mem-")
    srv = subprocess.Popen([os.path.join(a.bin, "envserver"), "--state", state, "--tasks",
                            os.path.join(SRC, "tasks"), "--quiet"])
    url = f"ipc://{state}/env.ipc"
    for _ in range(100):
        if os.path.exists(state + "/env.ipc"):
            break
        time.sleep(0.1)
    time.sleep(0.5)
    print(f"start: RSS {status(srv.pid, 'VmRSS'):.0f} MiB")
    for mib in (a.size, 120):
        codes, n = steps(url, mib, 16)
        print(f"16 concurrent {mib} MiB Steps: answers {codes} ({n}); peak RSS "
              f"{status(srv.pid, 'VmHWM'):.0f} MiB, peak address space "
              f"{status(srv.pid, 'VmPeak'):.0f} MiB")
    for mib in (120, a.size):
        socks = announce(state + "/env.ipc", mib, 60)
        alive = 0
        for s in socks:
            s.setblocking(False)
            try:
                alive += s.recv(1) != b""
            except BlockingIOError:
                alive += 1
        print(f"60 connections announcing {mib} MiB: {alive} still open; address space now "
              f"{status(srv.pid, 'VmSize'):.0f} MiB, RSS {status(srv.pid, 'VmRSS'):.0f} MiB")
        for s in socks:
            s.close()
        time.sleep(0.5)
    srv.terminate()
    srv.wait()
    subprocess.run(["rm", "-rf", state])


if __name__ == "__main__":
    main()
