"""Synchronous and asyncio clients of the kernelarena environment protocol.

One nng REQ socket per client; every call opens its own nng context, so many calls may
be in flight at once (threads with Client, tasks with AsyncClient). The REQ resend timer
is disabled: a resent Step would be refused (docs/protocol.md, "Rules for REQ clients").

Every request carries a deadline (deadline_ms): the server abandons a Step or an
Evaluate that has no result by then and answers DEADLINE_EXCEEDED (retryable).

The socket is opened at the first call, not in the constructor, so a client made before
a fork (gymnasium's AsyncVectorEnv makes its envs in forked workers) works in the child
as long as no call was made before the fork: nng cannot be used in a child forked from a
process that started it (it aborts the process: "nng is not fork-reentrant safe"); a
client asked to do so raises KernelArenaError("FAILED_PRECONDITION") instead.

A URL with no server behind it fails fast: the first connection this process makes to a
URL is a blocking dial (bounded by connect_timeout_s), so an ipc:// socket file that does
not exist, or a tcp:// port nobody listens on, raises KernelArenaError("UNAVAILABLE",
retryable=False) at once, saying so (Client.wait_ready waits for a server that is still
starting). Once this process has reached a URL, later clients of it dial in the
background instead, so a server that restarts is waited for and retried as below.

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

__all__ = ["Client", "AsyncClient", "KernelArenaError", "pb", "STATUS_NAMES", "status_name",
           "components", "COMPONENT_KEYS", "TLS_KEYS"]

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


def _nng_error(url: str, e: Exception, closed: bool = False) -> KernelArenaError:
    """A pynng exception as a KernelArenaError: retryable (the connection may return),
    except on a client that was closed (closed=True)."""
    if closed:
        return KernelArenaError("FAILED_PRECONDITION", f"{url}: the client is closed", False)
    return KernelArenaError("UNAVAILABLE", f"{url}: {type(e).__name__}: {e}", True)


# URLs this process has connected to at least once: a client's first dial of one of them
# is a background dial (the server may be restarting: calls wait for it up to
# connect_timeout_s and are retried); a URL never reached is dialled blocking, so that no
# server there fails at once (_Base._dial_first).
_reached_urls: set = set()


def _refused_message(url: str) -> str:
    """Why a first dial was refused, and what to do about it."""
    why = "nothing listens there (connection refused)"
    if url.startswith("ipc://") and not os.path.exists(url[len("ipc://"):]):
        why = f"the socket file {url[len('ipc://'):]} does not exist"
    return (f"cannot connect to {url}: no kernelarena server: {why}. Start envserver (or "
            "point the url / $KERNELARENA_URL at one); Client.wait_ready() waits for a "
            "server that is starting")


# The process that started nng (made the first socket), or None: a forked child of it
# cannot use nng (see the module's docstring).
_nng_pid: Optional[int] = None
_nng_lock = threading.Lock()


def nng_started_here() -> bool:
    """True when this process (not a parent it was forked from) started nng."""
    return _nng_pid == os.getpid()


def _check_fork(url: str):
    if _nng_pid is not None and _nng_pid != os.getpid():
        raise KernelArenaError(
            "FAILED_PRECONDITION",
            f"{url}: this process was forked from process {_nng_pid} after that process "
            "made a kernelarena call; nng cannot be used after such a fork. Make the first "
            "call in the child (e.g. create Env or Client objects in the worker), or use the "
            "'spawn' multiprocessing start method", False)


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


# TLS settings of a tls+tcp:// URL (Client(tls=...)), each key defaulting to its
# environment variable (KA_TLS_CA and KA_TLS_SERVER_NAME are envctl's too).
TLS_KEYS = {"ca": "KA_TLS_CA", "cert": "KA_TLS_CERT", "key": "KA_TLS_KEY",
            "server_name": "KA_TLS_SERVER_NAME"}


def _is_tls(url: str) -> bool:
    return url.startswith("tls+tcp") and 0 <= url.find("://") <= 7


def _url_host(url: str) -> str:
    """The host of scheme://HOST:PORT (an IPv6 address without its brackets)."""
    rest = url.split("://", 1)[1]
    if rest.startswith("["):
        return rest[1:].split("]", 1)[0]
    return rest.split("/", 1)[0].rsplit(":", 1)[0]


def _read_pem(url: str, what: str, path: str) -> str:
    try:
        with open(path, encoding="ascii") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise KernelArenaError("INVALID_ARGUMENT", f"{url}: cannot read the TLS {what} "
                               f"{path}: {e}", False) from None


def _tls_settings(url: str, tls: Optional[Mapping[str, Optional[str]]]) -> Optional[Dict[str, Any]]:
    """The TLS settings of url: ca, cert, key as PEM text (cert and key None when not
    given), server_name, and files (the three paths, for messages); None for a URL that
    is not tls+tcp://. tls: {"ca": PATH, "cert":
    PATH, "key": PATH, "server_name": NAME}, a key missing or None taken from its
    environment variable (TLS_KEYS). Raises KernelArenaError(INVALID_ARGUMENT): an
    unknown key, tls given for another scheme, no CA, a cert without its key (or the
    reverse), a file that cannot be read."""
    given = {k: v for k, v in dict(tls or {}).items() if v not in (None, "")}
    unknown = sorted(set(given) - set(TLS_KEYS))
    if unknown:
        raise KernelArenaError("INVALID_ARGUMENT", f"unknown TLS option(s) {unknown}; known: "
                               f"{sorted(TLS_KEYS)}", False)
    if not _is_tls(url):
        if given:
            raise KernelArenaError("INVALID_ARGUMENT", f"TLS options given for {url}: they "
                                   "need a tls+tcp:// URL", False)
        return None
    opt = {k: given.get(k) or os.environ.get(env) or None for k, env in TLS_KEYS.items()}
    if not opt["ca"]:
        raise KernelArenaError("INVALID_ARGUMENT", f"{url}: a tls+tcp:// URL needs the CA "
                               "certificate that signed the server's: tls={'ca': PATH} or "
                               "$KA_TLS_CA", False)
    if bool(opt["cert"]) != bool(opt["key"]):
        raise KernelArenaError("INVALID_ARGUMENT", f"{url}: the TLS client certificate and "
                               "key go together (tls 'cert' and 'key', or $KA_TLS_CERT and "
                               "$KA_TLS_KEY)", False)
    return {"ca": _read_pem(url, "CA certificate", opt["ca"]),
            "cert": opt["cert"] and _read_pem(url, "certificate", opt["cert"]),
            "key": opt["key"] and _read_pem(url, "key", opt["key"]),
            "server_name": opt["server_name"] or _url_host(url),
            "files": {k: opt[k] for k in ("ca", "cert", "key")}}


class _Base:
    def __init__(self, url: Optional[str], timeout_s: float, connect_timeout_s: float,
                 tls: Optional[Mapping[str, Optional[str]]] = None):
        self.url = url or _default_url()
        if "://" not in self.url:
            raise KernelArenaError("INVALID_ARGUMENT", f"cannot dial {self.url!r}: not a URL "
                                   "(ipc://PATH, tcp://HOST:PORT, tls+tcp://HOST:PORT)", False)
        self._tls = _tls_settings(self.url, tls)
        self.timeout_s = float(timeout_s)
        self.connect_timeout_s = float(connect_timeout_s)
        self._ids = itertools.count(random.getrandbits(40) << 20)
        self._lock = threading.Lock()
        self._sock = None  # opened by the first call (_socket)
        self._closed = False
        # contexts waiting for a reply; closed (from a thread: not inside nng's callback)
        # when the connection goes, so the waiting call fails at once
        self._waiting: Dict[int, Any] = {}
        self._lost: set = set()

    def _socket(self):
        """The REQ socket, opened and dialled on first use. Raises KernelArenaError
        (closed client, forked process, a URL nng cannot dial)."""
        global _nng_pid
        with self._lock:
            if self._closed:
                raise _nng_error(self.url, None, closed=True)
            if self._sock is not None:
                return self._sock
            _check_fork(self.url)
            with _nng_lock:
                if _nng_pid is None:
                    _nng_pid = os.getpid()
            # -1 ms is NNG_DURATION_INFINITE: never resend.
            sock = pynng.Req0(resend_time=-1, recv_max_size=256 << 20)
            sock.recv_timeout = int(self.timeout_s * 1000) + 5000
            sock.send_timeout = int(self.connect_timeout_s * 1000)
            sock.reconnect_time_min = 50
            sock.reconnect_time_max = 1000
            sock.add_post_pipe_remove_cb(self._pipe_removed)
            if self._tls is not None:
                self._tls_setup(sock)
            if self.url in _reached_urls:
                self._dial_background(sock)
            else:
                self._dial_first(sock)
            self._sock = sock
            return sock

    def _tls_setup(self, sock):
        """Sets the socket's TLS client config: the server's certificate must be signed
        by the CA and name server_name; the client's own certificate and key sent when
        given (a server started with --tls-client-ca requires them). Closes sock and
        raises KernelArenaError(INVALID_ARGUMENT) when nng refuses the PEM text."""
        t = self._tls
        try:
            kw = {"own_cert_string": t["cert"], "own_key_string": t["key"]} if t["cert"] else {}
            sock.tls_config = pynng.TLSConfig(
                pynng.TLSConfig.MODE_CLIENT, server_name=t["server_name"], ca_string=t["ca"],
                auth_mode=pynng.TLSConfig.AUTH_MODE_REQUIRED, **kw)
        except pynng.NNGException as e:
            sock.close()
            raise KernelArenaError("INVALID_ARGUMENT", f"{self.url}: TLS files {t['files']}: "
                                   f"{e} (PEM files, the key unencrypted and of that "
                                   "certificate?)", False) from None

    def _dial_background(self, sock):
        """Non-blocking dial of a URL this process has reached before: a server that is
        down (restarting) is dialled again in the background; calls wait for it up to
        connect_timeout_s (the send timeout). Closes sock and raises
        KernelArenaError(INVALID_ARGUMENT) for a URL nng cannot dial."""
        try:
            sock.dial(self.url, block=False)
        except pynng.NNGException as e:  # a URL nng cannot dial: no retry helps
            sock.close()
            raise KernelArenaError("INVALID_ARGUMENT", f"cannot dial {self.url}: {e}",
                                   False) from None

    def _dial_first(self, sock):
        """Blocking dial of a URL this process has not reached yet, on a helper thread,
        waited for up to connect_timeout_s. Connected: the URL is remembered
        (_reached_urls) and nng redials it by itself if the connection drops. Refused
        (no ipc socket file, nobody on the tcp port) or another dial error: closes sock
        and raises KernelArenaError(UNAVAILABLE, not retryable) at once; no answer in
        time (a tcp host that drops packets): closes sock and raises UNAVAILABLE,
        retryable. Blocks the calling thread (an AsyncClient's event loop too) for at
        most connect_timeout_s."""
        box: Dict[str, BaseException] = {}

        def dial():
            try:
                sock.dial(self.url, block=True)
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                box["error"] = e
        t = threading.Thread(target=dial, name="kernelarena-dial", daemon=True)
        t.start()
        t.join(self.connect_timeout_s)
        if t.is_alive():
            sock.close()  # aborts the dial
            t.join(1.0)
            raise KernelArenaError("UNAVAILABLE", f"cannot reach {self.url}: no connection "
                                   f"within {self.connect_timeout_s:g} s", True)
        e = box.get("error")
        if e is None:
            _reached_urls.add(self.url)
            return
        sock.close()
        if isinstance(e, pynng.ConnectionRefused):
            raise KernelArenaError("UNAVAILABLE", _refused_message(self.url), False) from None
        if isinstance(e, (pynng.AddressInvalid, pynng.NotSupported, pynng.InvalidOperation)):
            raise KernelArenaError("INVALID_ARGUMENT", f"cannot dial {self.url}: {e}",
                                   False) from None
        if self._tls is not None:
            raise KernelArenaError(
                "UNAVAILABLE", f"cannot connect to {self.url}: the TLS handshake failed "
                f"({type(e).__name__}: {e}): is the server's certificate signed by the CA "
                f"{self._tls['files']['ca']} and does it name {self._tls['server_name']!r} "
                "(tls 'server_name', $KA_TLS_SERVER_NAME)? Does the server want a client "
                "certificate (tls 'cert' and 'key') of its --tls-client-ca?", False) from None
        raise KernelArenaError("UNAVAILABLE", f"cannot connect to {self.url}: "
                               f"{type(e).__name__}: {e}", False) from None

    def _new_context(self):
        sock = self._socket()
        try:
            return sock.new_context()
        except pynng.NNGException as e:
            raise _nng_error(self.url, e, self._closed) from None

    def _close_socket(self):
        """Closes the socket (idempotent; never raises). Later calls raise
        FAILED_PRECONDITION."""
        with self._lock:
            self._closed = True
            sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.close()
            except Exception:  # noqa: BLE001 - closing must not raise
                pass

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
    def _evaluate_body(task_id, files, seed, episode_id, step, include_held_out, admin_token,
                       reproducible=False):
        ev = pb.EvaluateRequest(
            task_id=task_id or "",
            files=_files(files),
            episode_id=episode_id or "",
            step=int(step or 0),
            include_held_out=bool(include_held_out),
            admin_token=admin_token or "",
            reproducible=bool(reproducible),
        )
        if seed is not None:
            ev.seed = int(seed) & 0xFFFFFFFFFFFFFFFF
            ev.has_seed = True
        return ev


class Client(_Base):
    """Blocking client; thread-safe (each call uses its own nng context).

    Args:
        url: the server's client endpoint (ipc://..., tcp://host:port,
            tls+tcp://host:port); default $KERNELARENA_URL.
        timeout_s: default deadline of a call, seconds (queue wait + evaluation).
        connect_timeout_s: how long a call waits for the connection, seconds.
        tls: for a tls+tcp:// URL: {"ca": PATH (required: the CA certificate that
            signed the server's), "cert": PATH, "key": PATH (the client's certificate
            and unencrypted key, for a server started with --tls-client-ca),
            "server_name": NAME (the name the server's certificate must carry; default
            the URL's host)}; a key left out defaults to $KA_TLS_CA, $KA_TLS_CERT,
            $KA_TLS_KEY, $KA_TLS_SERVER_NAME. The files are read here.

    Raises KernelArenaError(INVALID_ARGUMENT) for a bad URL or TLS options (see
    _tls_settings); opens no socket (the first call does).
    """

    def __init__(self, url: Optional[str] = None, timeout_s: float = 900.0,
                 connect_timeout_s: float = 10.0,
                 tls: Optional[Mapping[str, Optional[str]]] = None):
        super().__init__(url, timeout_s, connect_timeout_s, tls)

    def call(self, method: str, body, deadline_s: Optional[float] = None):
        """Sends one request (method = the Request body's field name) and returns the
        reply body. Raises KernelArenaError (server error or timeout)."""
        rid, data = self._request(method, body, deadline_s)
        ctx = self._new_context()
        try:
            try:
                ctx.send(data)
            except pynng.Timeout:
                raise KernelArenaError("UNAVAILABLE", f"cannot reach {self.url}", True) from None
            except pynng.NNGException as e:
                raise _nng_error(self.url, e, self._closed) from None
            self._wait_begin(rid, ctx)
            try:
                reply = ctx.recv()
            except pynng.Timeout:
                raise KernelArenaError("DEADLINE_EXCEEDED", "no reply before the timeout",
                                       True) from None
            except pynng.NNGException as e:
                if self._wait_end(rid):
                    raise KernelArenaError("UNAVAILABLE", _CONN_LOST, True) from None
                raise _nng_error(self.url, e, self._closed) from None
            finally:
                self._wait_end(rid)
        finally:
            try:
                ctx.close()
            except Exception:  # noqa: BLE001 - closing must not raise
                pass
        return self._decode(rid, method, reply)

    def describe(self):
        return self.call("describe", pb.DescribeRequest())

    def list_tasks(self, include_prompts: bool = False):
        """The server's TaskInfo list; include_prompts adds each task's prompt and
        starting files (TaskInfo.prompt, .files)."""
        return list(self.call("list_tasks", pb.ListTasksRequest(
            include_prompts=include_prompts)).tasks)

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
            self._close_socket()
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
                 deadline_s: Optional[float] = None, reproducible: bool = False):
        """Stateless one-shot evaluation (no episode, nothing recorded); returns
        EvaluateResponse. Either task_id + files, or episode_id + step (a recorded step's
        files with its seed). include_held_out needs the server's admin token.

        reproducible (admin token too): every input is drawn from the seed alone, with no
        secret of the executor's, so the same call repeats its inputs (correctness results
        bit for bit; timings are measured again) on any executor. For debugging and
        re-scoring only: the inputs are then predictable (docs/integrity.md)."""
        return self.call("evaluate", self._evaluate_body(task_id, files, seed, episode_id, step,
                                                         include_held_out, admin_token,
                                                         reproducible),
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
        self._close_socket()


class AsyncClient(_Base):
    """asyncio client: every coroutine uses its own nng context, so one process keeps
    hundreds of episodes in flight on one socket. Methods and arguments (tls too)
    mirror Client."""

    def __init__(self, url: Optional[str] = None, timeout_s: float = 900.0,
                 connect_timeout_s: float = 10.0,
                 tls: Optional[Mapping[str, Optional[str]]] = None):
        super().__init__(url, timeout_s, connect_timeout_s, tls)

    async def call(self, method: str, body, deadline_s: Optional[float] = None):
        rid, data = self._request(method, body, deadline_s)
        wait = (self.timeout_s if deadline_s is None else deadline_s) + 5.0
        ctx = self._new_context()
        try:
            try:
                await asyncio.wait_for(ctx.asend(data), self.connect_timeout_s)
            except (asyncio.TimeoutError, pynng.Timeout):
                raise KernelArenaError("UNAVAILABLE", f"cannot reach {self.url}", True) from None
            except pynng.NNGException as e:
                raise _nng_error(self.url, e, self._closed) from None
            self._wait_begin(rid, ctx)
            try:
                reply = await asyncio.wait_for(ctx.arecv(), wait)
            except (asyncio.TimeoutError, pynng.Timeout):
                raise KernelArenaError("DEADLINE_EXCEEDED", "no reply before the timeout",
                                       True) from None
            except pynng.NNGException as e:
                if self._wait_end(rid):
                    raise KernelArenaError("UNAVAILABLE", _CONN_LOST, True) from None
                raise _nng_error(self.url, e, self._closed) from None
            finally:
                self._wait_end(rid)
        finally:
            try:
                ctx.close()
            except Exception:  # noqa: BLE001 - closing must not raise
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
                       admin_token: Optional[str] = None, deadline_s: Optional[float] = None,
                       reproducible: bool = False):
        return await self.call("evaluate", self._evaluate_body(
            task_id, files, seed, episode_id, step, include_held_out, admin_token,
            reproducible), deadline_s)

    async def list_tasks(self, include_prompts: bool = False):
        return list((await self.call("list_tasks", pb.ListTasksRequest(
            include_prompts=include_prompts))).tasks)

    def aclose(self):
        """Closes the socket (idempotent; never raises)."""
        self._close_socket()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self._close_socket()


# The scalar reward components every step reports, whatever its status (the server's
# "status" component is left out: it is an enum, given as a label by status_name).
COMPONENT_KEYS = ("compiled", "correct", "speedup_geomean", "flagged")


def status_name(status: int) -> str:
    """A Status value as its label ("OK", "COMPILE_ERROR", ...); "" for
    STATUS_UNSPECIFIED (after a Reset)."""
    return STATUS_NAMES.get(status, str(status)) if status else ""


def components(msg, case_names: Iterable[str] = ()) -> Dict[str, float]:
    """The reward components of a StepResponse / EvaluateResponse as a dict with a fixed
    key set for every status: COMPONENT_KEYS, then speedup/<case> for every shown case
    in case_names (TaskInfo.case_names; 0.0 where the step has none, e.g. a compile
    error), then any other numeric component the server sent (e.g. held_out_*). The
    status is not a component: use status_name(msg.observation.status)."""
    raw = dict(msg.reward_components)
    out = {k: float(raw.get(k, 0.0)) for k in COMPONENT_KEYS}
    for c in case_names:
        out[f"speedup/{c}"] = float(raw.get(f"speedup/{c}", 0.0))
    for k, v in raw.items():
        if k != "status" and k not in out:
            out[k] = float(v)
    return out
