"""Synchronous and asyncio clients of the kernelarena environment protocol.

One nng REQ socket per client; every call opens its own nng context, so many calls may
be in flight at once (threads with Client, tasks with AsyncClient). The REQ resend timer
is disabled: a resent Step would be refused (docs/protocol.md, "Rules for REQ clients").

Every request carries a deadline (deadline_ms): the server abandons a Step or an
Evaluate that has no result by then and answers DEADLINE_EXCEEDED (retryable).

A dead server is noticed at once: when the connection closes, every call waiting for
its reply fails with KernelArenaError("UNAVAILABLE", retryable=True) instead of waiting
out its timeout (the request may or may not have been carried out: a Step retried with
the same expected_step is refused if it was counted). nng errors never escape as
pynng exceptions.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import threading
import time
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple, Union

import pynng

from . import kernelarena_pb2 as pb

__all__ = ["Client", "AsyncClient", "KernelArenaError", "pb", "STATUS_NAMES"]

STATUS_NAMES = {v.number: v.name for v in pb.Status.DESCRIPTOR.values}
ERROR_NAMES = {v.number: v.name for v in pb.ErrorCode.DESCRIPTOR.values}

Files = Union[Mapping[str, Union[str, bytes]], Iterable[Tuple[str, Union[str, bytes]]]]


class KernelArenaError(Exception):
    """An Error reply of the server (infrastructure faults and refused requests; agent
    failures are ordinary step results). `code` is the ErrorCode name ("CAPACITY",
    "NOT_FOUND", ...), `retryable` says whether the same request may succeed later."""

    def __init__(self, code: str, message: str, retryable: bool):
        super().__init__(f"{code}: {message}" + (" (retryable)" if retryable else ""))
        self.code = code
        self.message = message
        self.retryable = retryable

    def __reduce__(self):
        # Exception pickles its args (the formatted text), which __init__ does not take.
        return (KernelArenaError, (self.code, self.message, self.retryable))


_CONN_LOST = ("the connection to the server closed while waiting for the reply (the server "
              "stopped or restarted); the request may or may not have been carried out")


def _nng_error(url: str, e: Exception) -> KernelArenaError:
    """A pynng exception as a KernelArenaError (retryable: the connection may return)."""
    return KernelArenaError("UNAVAILABLE", f"{url}: {type(e).__name__}: {e}", True)


def _files(files: Optional[Files]):
    if not files:
        return []
    items = files.items() if isinstance(files, Mapping) else files
    out = []
    for path, content in items:
        if isinstance(content, str):
            content = content.encode("utf-8")
        out.append(pb.File(path=path, content=bytes(content)))
    return out


def _default_url() -> str:
    return os.environ.get("KERNELARENA_URL", "ipc://./var/env.ipc")


class _Base:
    def __init__(self, url: Optional[str], timeout_s: float, connect_timeout_s: float):
        self.url = url or _default_url()
        self.timeout_s = float(timeout_s)
        self.connect_timeout_s = float(connect_timeout_s)
        # -1 ms is NNG_DURATION_INFINITE: never resend.
        self._sock = pynng.Req0(resend_time=-1, recv_max_size=256 << 20)
        self._sock.recv_timeout = int(self.timeout_s * 1000) + 5000
        self._sock.send_timeout = int(self.connect_timeout_s * 1000)
        self._sock.reconnect_time_min = 50
        self._sock.reconnect_time_max = 1000
        # Non-blocking dial: a server that is not up yet is dialled again in the
        # background; calls wait for it up to connect_timeout_s (the send timeout).
        self._ids = itertools.count(random.getrandbits(40) << 20)
        self._lock = threading.Lock()
        # contexts waiting for a reply; closed (from a thread: not inside nng's callback)
        # when the connection goes, so the waiting call fails at once
        self._waiting: Dict[int, Any] = {}
        self._lost: set = set()
        self._sock.add_post_pipe_remove_cb(self._pipe_removed)
        try:
            self._sock.dial(self.url, block=False)
        except pynng.NNGException as e:  # a URL nng cannot dial: no retry helps
            self._sock.close()
            raise KernelArenaError("INVALID_ARGUMENT", f"cannot dial {self.url}: {e}",
                                   False) from None

    def _pipe_removed(self, _pipe):
        with self._lock:
            ctxs = list(self._waiting.items())
            self._lost.update(k for k, _ in ctxs)
        if ctxs:
            threading.Thread(target=lambda: [c.close() for _, c in ctxs], daemon=True).start()

    def _wait_begin(self, rid: int, ctx):
        with self._lock:
            self._waiting[rid] = ctx

    def _wait_end(self, rid: int) -> bool:
        """Ends the wait of call rid; True if its connection was lost meanwhile."""
        with self._lock:
            self._waiting.pop(rid, None)
            if rid in self._lost:
                self._lost.discard(rid)
                return True
            return False

    def _request(self, method: str, body, deadline_s: Optional[float]):
        with self._lock:
            rid = next(self._ids) + 1
        d = self.timeout_s if deadline_s is None else deadline_s
        rq = pb.Request(request_id=rid, deadline_ms=max(1, int(d * 1000)))
        getattr(rq, method).CopyFrom(body)
        return rid, rq.SerializeToString()

    @staticmethod
    def _decode(rid: int, method: str, data: bytes):
        resp = pb.Response()
        resp.ParseFromString(data)
        which = resp.WhichOneof("body")
        if which == "error":
            e = resp.error
            raise KernelArenaError(ERROR_NAMES.get(e.code, str(e.code)), e.message, e.retryable)
        if resp.request_id != rid:
            raise KernelArenaError("INTERNAL", "the reply answers another request", True)
        if which != method:
            raise KernelArenaError("INTERNAL", f"expected a {method} reply, got {which}", False)
        return getattr(resp, method)

    # request bodies shared by both clients
    @staticmethod
    def _reset_body(task_id, seed, options):
        opts = {k: str(v) for k, v in (options or {}).items()}
        rr = pb.ResetRequest(task_id=task_id, options=opts)
        if seed is not None:
            rr.seed = int(seed) & 0xFFFFFFFFFFFFFFFF
            rr.has_seed = True
        return rr

    @staticmethod
    def _evaluate_body(task_id, files, seed, episode_id, step, include_held_out, admin_token):
        ev = pb.EvaluateRequest(
            task_id=task_id or "",
            files=_files(files),
            episode_id=episode_id or "",
            step=int(step or 0),
            include_held_out=bool(include_held_out),
            admin_token=admin_token or "",
        )
        if seed is not None:
            ev.seed = int(seed) & 0xFFFFFFFFFFFFFFFF
            ev.has_seed = True
        return ev


class Client(_Base):
    """Blocking client; thread-safe (each call uses its own nng context).

    Args:
        url: the server's client endpoint (ipc://..., tcp://host:port); default
            $KERNELARENA_URL.
        timeout_s: default deadline of a call, seconds (queue wait + evaluation).
        connect_timeout_s: how long a call waits for the connection, seconds.
    """

    def __init__(self, url: Optional[str] = None, timeout_s: float = 900.0,
                 connect_timeout_s: float = 10.0):
        super().__init__(url, timeout_s, connect_timeout_s)

    def call(self, method: str, body, deadline_s: Optional[float] = None):
        """Sends one request (method = the Request body's field name) and returns the
        reply body. Raises KernelArenaError (server error or timeout)."""
        rid, data = self._request(method, body, deadline_s)
        try:
            ctx = self._sock.new_context()
        except pynng.NNGException as e:
            raise _nng_error(self.url, e) from None
        try:
            try:
                ctx.send(data)
            except pynng.Timeout:
                raise KernelArenaError("UNAVAILABLE", f"cannot reach {self.url}", True) from None
            except pynng.NNGException as e:
                raise _nng_error(self.url, e) from None
            self._wait_begin(rid, ctx)
            try:
                reply = ctx.recv()
            except pynng.Timeout:
                raise KernelArenaError("DEADLINE_EXCEEDED", "no reply before the timeout",
                                       True) from None
            except pynng.NNGException as e:
                if self._wait_end(rid):
                    raise KernelArenaError("UNAVAILABLE", _CONN_LOST, True) from None
                raise _nng_error(self.url, e) from None
            finally:
                self._wait_end(rid)
        finally:
            try:
                ctx.close()
            except pynng.NNGException:
                pass
        return self._decode(rid, method, reply)

    def describe(self):
        return self.call("describe", pb.DescribeRequest())

    def list_tasks(self):
        return list(self.call("list_tasks", pb.ListTasksRequest()).tasks)

    def health(self, timeout_s: float = 5.0):
        return self.call("health", pb.HealthRequest(), timeout_s)

    def reset(self, task_id: str, seed: Optional[int] = None,
              options: Optional[Mapping[str, Any]] = None):
        """New episode of task_id; returns ResetResponse (episode_id, observation,
        seed, info). Options: max_steps, label, run."""
        return self.call("reset", self._reset_body(task_id, seed, options))

    def step(self, episode_id: str, expected_step: int, files: Optional[Files] = None,
             deadline_s: Optional[float] = None):
        """Evaluates the changed files; returns StepResponse. expected_step is the
        number of steps taken so far (a duplicate is refused, not re-evaluated)."""
        return self.call("step", pb.StepRequest(episode_id=episode_id,
                                                expected_step=int(expected_step),
                                                files=_files(files)), deadline_s)

    def close(self, episode_id: Optional[str] = None):
        """Closes an episode (idempotent: returns was_open). Without an episode id,
        closes the client's socket."""
        if episode_id is None:
            self._sock.close()
            return None
        return self.call("close", pb.CloseRequest(episode_id=episode_id)).was_open

    def state(self, episode_id: str):
        return self.call("state", pb.StateRequest(episode_id=episode_id))

    def cancel(self, episode_id: str):
        return self.call("cancel", pb.CancelRequest(episode_id=episode_id))

    def get_episode(self, episode_id: str, omit_files: bool = False):
        return self.call("get_episode", pb.GetEpisodeRequest(episode_id=episode_id,
                                                             omit_files=omit_files)).episode

    def list_episodes(self, run_id: str = "", task_id: str = "", limit: int = 100):
        """Every episode of a run (all pages), oldest first, without steps."""
        out, token = [], ""
        while True:
            r = self.call("list_episodes", pb.ListEpisodesRequest(
                run_id=run_id, task_id=task_id, limit=limit, page_token=token))
            out.extend(r.episodes)
            token = r.next_page_token
            if not token:
                return out

    def evaluate(self, task_id: Optional[str] = None, files: Optional[Files] = None,
                 seed: Optional[int] = None, episode_id: Optional[str] = None, step: int = 0,
                 include_held_out: bool = False, admin_token: Optional[str] = None,
                 deadline_s: Optional[float] = None):
        """Stateless one-shot evaluation (no episode, nothing recorded); returns
        EvaluateResponse. Either task_id + files, or episode_id + step (a recorded step's
        files with its seed). include_held_out needs the server's admin token."""
        return self.call("evaluate", self._evaluate_body(task_id, files, seed, episode_id, step,
                                                         include_held_out, admin_token),
                         deadline_s)

    def wait_ready(self, timeout_s: float = 60.0, executors: int = 1):
        """Waits until the server answers Health with at least `executors` live
        executors. Raises KernelArenaError(UNAVAILABLE) after timeout_s."""
        end = time.monotonic() + timeout_s
        while True:
            try:
                if self.health(timeout_s=2.0).executors >= executors:
                    return
            except KernelArenaError:
                pass
            if time.monotonic() > end:
                raise KernelArenaError("UNAVAILABLE", f"{self.url}: no ready server", True)
            time.sleep(0.1)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._sock.close()


class AsyncClient(_Base):
    """asyncio client: every coroutine uses its own nng context, so one process keeps
    hundreds of episodes in flight on one socket. Methods mirror Client."""

    def __init__(self, url: Optional[str] = None, timeout_s: float = 900.0,
                 connect_timeout_s: float = 10.0):
        super().__init__(url, timeout_s, connect_timeout_s)

    async def call(self, method: str, body, deadline_s: Optional[float] = None):
        rid, data = self._request(method, body, deadline_s)
        wait = (self.timeout_s if deadline_s is None else deadline_s) + 5.0
        try:
            ctx = self._sock.new_context()
        except pynng.NNGException as e:
            raise _nng_error(self.url, e) from None
        try:
            try:
                await asyncio.wait_for(ctx.asend(data), self.connect_timeout_s)
            except (asyncio.TimeoutError, pynng.Timeout):
                raise KernelArenaError("UNAVAILABLE", f"cannot reach {self.url}", True) from None
            except pynng.NNGException as e:
                raise _nng_error(self.url, e) from None
            self._wait_begin(rid, ctx)
            try:
                reply = await asyncio.wait_for(ctx.arecv(), wait)
            except (asyncio.TimeoutError, pynng.Timeout):
                raise KernelArenaError("DEADLINE_EXCEEDED", "no reply before the timeout",
                                       True) from None
            except pynng.NNGException as e:
                if self._wait_end(rid):
                    raise KernelArenaError("UNAVAILABLE", _CONN_LOST, True) from None
                raise _nng_error(self.url, e) from None
            finally:
                self._wait_end(rid)
        finally:
            try:
                ctx.close()
            except pynng.NNGException:
                pass
        return self._decode(rid, method, reply)

    async def health(self, timeout_s: float = 5.0):
        return await self.call("health", pb.HealthRequest(), timeout_s)

    async def describe(self):
        return await self.call("describe", pb.DescribeRequest())

    async def reset(self, task_id: str, seed: Optional[int] = None,
                    options: Optional[Mapping[str, Any]] = None):
        return await self.call("reset", self._reset_body(task_id, seed, options))

    async def step(self, episode_id: str, expected_step: int, files: Optional[Files] = None,
                   deadline_s: Optional[float] = None):
        return await self.call("step", pb.StepRequest(episode_id=episode_id,
                                                      expected_step=int(expected_step),
                                                      files=_files(files)), deadline_s)

    async def close(self, episode_id: str):
        return (await self.call("close", pb.CloseRequest(episode_id=episode_id))).was_open

    async def state(self, episode_id: str):
        return await self.call("state", pb.StateRequest(episode_id=episode_id))

    async def cancel(self, episode_id: str):
        return await self.call("cancel", pb.CancelRequest(episode_id=episode_id))

    async def get_episode(self, episode_id: str, omit_files: bool = False):
        return (await self.call("get_episode", pb.GetEpisodeRequest(
            episode_id=episode_id, omit_files=omit_files))).episode

    async def evaluate(self, task_id: Optional[str] = None, files: Optional[Files] = None,
                       seed: Optional[int] = None, episode_id: Optional[str] = None,
                       step: int = 0, include_held_out: bool = False,
                       admin_token: Optional[str] = None, deadline_s: Optional[float] = None):
        return await self.call("evaluate", self._evaluate_body(
            task_id, files, seed, episode_id, step, include_held_out, admin_token), deadline_s)

    def aclose(self):
        self._sock.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self._sock.close()


def components(msg) -> Dict[str, float]:
    """The reward components of a StepResponse / EvaluateResponse as a plain dict."""
    return dict(msg.reward_components)
