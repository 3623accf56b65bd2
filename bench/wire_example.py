#!/usr/bin/env python3
"""Captures one episode on the wire for docs/protocol.md ("A worked example").

Starts a real envserver and gpuexec (host backend) on a temporary state folder with
bench/tasks, then sends Describe, Reset, Step and Close as raw nng messages (pynng REQ
socket, one context) and prints, for each exchange, the byte length of the request and
the reply as they crossed the socket and both envelopes decoded from those exact bytes
into protobuf text format (google.protobuf.text_format). Long strings and bytes are
shortened to keep the output readable (marked with "... [N bytes]").

usage: wire_example.py [--bin build/bin]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SRC, "clients", "python"))

import pynng  # noqa: E402
from google.protobuf import text_format  # noqa: E402

from kernelarena import kernelarena_pb2 as pb  # noqa: E402

CANDIDATE = (b"/* y = x, 4 elements at a time */\n"
             b"void copy_forward(const float *x, float *y, long long n) {\n"
             b"  long long i = 0;\n"
             b"  for (; i + 4 <= n; i += 4) {\n"
             b"    y[i] = x[i]; y[i + 1] = x[i + 1]; y[i + 2] = x[i + 2]; y[i + 3] = x[i + 3];\n"
             b"  }\n"
             b"  for (; i < n; i++) y[i] = x[i];\n"
             b"}\n")


def shorten(msg, limit=160):
    """A copy of msg whose string/bytes fields over `limit` are cut, for printing."""
    m = type(msg)()
    m.CopyFrom(msg)

    def repeated(fd):  # protobuf 7 dropped FieldDescriptor.label
        return fd.is_repeated if hasattr(fd, "is_repeated") else fd.label == fd.LABEL_REPEATED

    def walk(x):
        for fd, val in x.ListFields():
            if fd.type == fd.TYPE_MESSAGE:
                if fd.message_type.GetOptions().map_entry:
                    continue
                for v in (val if repeated(fd) else [val]):
                    walk(v)
            elif fd.type in (fd.TYPE_STRING, fd.TYPE_BYTES) and not repeated(fd):
                if len(val) > limit:
                    n = len(val.encode() if isinstance(val, str) else val)
                    cut = val[:limit]
                    suffix = f"... [{n} bytes]"
                    setattr(x, fd.name, cut + (suffix if isinstance(val, str) else suffix.encode()))
    walk(m)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(SRC, "build", "bin"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="ka-wire-")
    state = os.path.join(work, "state")
    tasks = os.path.join(HERE, "tasks")
    log = open(os.path.join(work, "log"), "w")
    srv = subprocess.Popen([os.path.join(args.bin, "envserver"), "--state", state, "--tasks",
                            tasks], stdout=log, stderr=subprocess.STDOUT)
    gx = None
    try:
        for _ in range(300):
            if os.path.exists(os.path.join(state, "exec.ipc")):
                break
            time.sleep(0.1)
        gx = subprocess.Popen([os.path.join(args.bin, "gpuexec"), "--server",
                               f"ipc://{state}/exec.ipc", "--tasks", tasks, "--backends",
                               "host"], stdout=log, stderr=subprocess.STDOUT)
        sock = pynng.Req0(dial=f"ipc://{state}/env.ipc", recv_timeout=600000)
        rid = [0]

        def call(body_name, body, show=True):
            rid[0] += 1
            req = pb.Request(request_id=rid[0], deadline_ms=300000 if body_name == "step" else 0)
            getattr(req, body_name).CopyFrom(body)
            raw = req.SerializeToString()
            sock.send(raw)
            reply = sock.recv()
            resp = pb.Response.FromString(reply)
            if show:
                print(f"--- request: {len(raw)} bytes")
                print(text_format.MessageToString(shorten(pb.Request.FromString(raw))), end="")
                print(f"--- response: {len(reply)} bytes")
                print(text_format.MessageToString(shorten(resp)), end="")
                print()
            return resp

        while call("health", pb.HealthRequest(), show=False).health.executors < 1:
            time.sleep(0.2)
        call("describe", pb.DescribeRequest())
        r = call("reset", pb.ResetRequest(task_id="bench/copy", seed=42, has_seed=True,
                                          options={"max_steps": "2", "run": "wire-example"}))
        eid = r.reset.episode_id
        call("step", pb.StepRequest(episode_id=eid, expected_step=0,
                                    files=[pb.File(path="copy.c", content=CANDIDATE)]))
        call("close", pb.CloseRequest(episode_id=eid))
    finally:
        if gx:
            gx.terminate()
            gx.wait()
        srv.terminate()
        srv.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
