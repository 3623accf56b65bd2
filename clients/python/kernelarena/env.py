"""kernelarena.Env: one episode at a time of one task, as a gymnasium.Env.

Observation (a dict, gymnasium.spaces.Dict of Text / Discrete):
    prompt       the task, the device and the rules (after reset; "" after a step)
    files        {path: content} of the editable files now
    step         steps taken so far
    status       the last evaluation's Status name ("" after reset)
    compile_log, runtime_log, message

Action: {path: new content} for some of the editable files (the others keep their
contents); gymnasium.spaces.Dict of Text, one entry per editable file, sized so that
any sampled action fits the server's limits: a sampled action is a valid step whose
code fails to compile (reward 0), never a refused request.

reward: the server's scalar (docs/protocol.md); info["reward_components"] holds the
breakdown with the same keys for every status (compiled, correct, speedup_geomean,
flagged, speedup/<case> for every shown case), info["status"] the status label ("OK",
"COMPILE_ERROR", ...), info["cases"] the shown cases, plus episode_id, seed, job_id,
wall_s, compile_s, worker_id.

The environment is nondeterministic (kernel timings vary, and the inputs of the timed
calls are drawn from a secret the executor mixes into every evaluation), so it is
registered with nondeterministic=True. What reset(seed) fixes: the task, the prompt and
the episode's seed, which the server passes to every evaluation; on one executor the
correctness inputs of the shown cases derive from it (so a GRPO group of one seed shares
its correctness problem). What it does not fix: the timed calls' inputs and any
measurement (docs/python.md, "Determinism").

No socket is opened before the first reset: the task's facts are fetched by a short-
lived forked child when this process has not used nng yet, so an Env made in a parent
that forks afterwards (gymnasium.make_vec(..., vectorization_mode="async")) works.
"""

from __future__ import annotations

import os
import pickle
import re
import select
import time
from collections.abc import Sequence
from typing import Any, Dict, Optional

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import read_from_shared_memory

from . import kernelarena_pb2 as pb
from .client import Client, KernelArenaError, components, nng_started_here, status_name

# Characters an observation string may hold: tab, newline, carriage return and the
# Basic Multilingual Plane minus controls and surrogates. Anything else (astral
# characters, invalid UTF-8) is shown as U+FFFD.
CHARSET = "\t\n\r" + "".join(
    chr(c) for r in ((0x20, 0x7F), (0xA0, 0xD800), (0xE000, 0xFFFE)) for c in range(*r))
_NOT_IN_CHARSET = re.compile("[^\t\n\r\x20-\x7e\xa0-\ud7ff\ue000-\ufffd]")
_STATUS_CHARSET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ_"
# Characters of a prompt, log or message in the observation space. Longer text is cut
# (its end kept, after a marker): gymnasium's shared memory (AsyncVectorEnv's default)
# holds 4 bytes per character of max_length for every text field of every env.
MAX_TEXT = 1 << 16
_CUT = "[... cut: the first {} characters are not shown ...]\n"


def _text(s, limit: Optional[int] = None) -> str:
    if isinstance(s, bytes):
        s = s.decode("utf-8", errors="replace")
    s = _NOT_IN_CHARSET.sub("\ufffd", s)
    if limit is not None and len(s) > limit:
        cut = len(s) - (limit - len(_CUT) - 12)
        s = _CUT.format(cut) + s[cut:]
    return s


class VecText(spaces.Text):
    """A gymnasium Text space whose shared-memory copy (AsyncVectorEnv's default) reads
    the text anew every time. gymnasium 1.x reads a Text buffer into a tuple of strings
    once, when the vector env starts, so every later observation would show the first
    one (blank); here the read gives a TextRows view instead, turned into a tuple of the
    current strings by the vector env's deepcopy (copy=True, its default)."""


class TextRows(Sequence):
    """The rows of a VecText shared-memory buffer as strings, decoded on access."""

    def __init__(self, space: VecText, shared, n: int):
        self._space, self._n = space, n
        self._data = np.frombuffer(shared.get_obj(), dtype=np.int32).reshape(n, space.max_length)

    def __len__(self):
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self[k] for k in range(*i.indices(self._n)))
        row = self._data[i]
        chars = self._space.character_list
        return "".join(chars[v] for v in row[row < len(chars)].tolist())

    def __deepcopy__(self, memo):
        return tuple(self)


@read_from_shared_memory.register(VecText)
def _read_vec_text(space: VecText, shared_memory, n: int = 1):
    return TextRows(space, shared_memory, n)


def _meta_direct(url, timeout_s, tls=None):
    with Client(url, timeout_s=timeout_s, tls=tls) as c:
        tasks = c.list_tasks()
        return ([t.SerializeToString() for t in tasks],
                c.describe().limits.SerializeToString())


def _task_meta(url: Optional[str], timeout_s: float, tls=None):
    """(TaskInfo list, Limits) of the server. When this process has not used nng yet,
    asked from a forked child (which exits after), so that this process can still fork
    children that use nng. Raises KernelArenaError."""
    if nng_started_here() or not hasattr(os, "fork"):
        tasks, limits = _meta_direct(url, timeout_s, tls)
    else:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            try:
                os.close(r)
                try:
                    out = ("ok", _meta_direct(url, timeout_s, tls))
                except KernelArenaError as e:
                    out = ("error", (e.code, e.message, e.retryable))
                except Exception as e:  # noqa: BLE001
                    out = ("error", ("INTERNAL", f"{type(e).__name__}: {e}", False))
                data = pickle.dumps(out)
                while data:
                    data = data[os.write(w, data):]
            finally:
                os._exit(0)
        os.close(w)
        chunks, end = [], time.monotonic() + timeout_s + 30
        try:
            while time.monotonic() < end:
                if select.select([r], [], [], max(0.0, end - time.monotonic()))[0]:
                    b = os.read(r, 1 << 20)
                    if not b:
                        break
                    chunks.append(b)
        finally:
            os.close(r)
            try:
                if time.monotonic() >= end:
                    os.kill(pid, 9)  # still not answered: not left behind
                os.waitpid(pid, 0)
            except OSError:
                pass
        try:
            kind, val = pickle.loads(b"".join(chunks))
        except Exception:  # noqa: BLE001
            raise KernelArenaError("UNAVAILABLE", f"{url}: no answer to ListTasks", True) from None
        if kind == "error":
            raise KernelArenaError(*val)
        tasks, limits = val
    infos = []
    for t in tasks:
        ti = pb.TaskInfo()
        ti.ParseFromString(t)
        infos.append(ti)
    lim = pb.Limits()
    lim.ParseFromString(limits)
    return infos, lim


class Env(gymnasium.Env):
    """A kernelarena episode as a Gymnasium environment.

    Args:
        task_id: the task (see Client.list_tasks()).
        url: the envserver's client endpoint (default $KERNELARENA_URL).
        max_steps: steps per episode (Reset option; default the server's).
        run, label: the trace-store run id and label of the episodes.
        timeout_s: deadline of each request (a step waits for its evaluation).
        client: an existing Client to share (not closed by close()).
        tls: a tls+tcp:// URL's TLS files and server name (Client's tls argument).
    """

    metadata = {"render_modes": []}

    def __init__(self, task_id: str = "host/gelu", url: Optional[str] = None,
                 max_steps: Optional[int] = None, run: Optional[str] = None,
                 label: Optional[str] = None, timeout_s: float = 900.0,
                 client: Optional[Client] = None, tls: Optional[Dict[str, str]] = None):
        self._own_client = client is None
        self._client = client or Client(url, timeout_s=timeout_s, tls=tls)  # opens no socket yet
        self._episode: Optional[str] = None
        self._steps = 0
        self.task_id = task_id
        try:
            if client is not None:
                tasks = {t.id: t for t in client.list_tasks()}
                limits = client.describe().limits
            else:
                infos, limits = _task_meta(self._client.url, min(timeout_s, 60.0), tls)
                tasks = {t.id: t for t in infos}
        except Exception:
            self._close_client()
            raise
        if task_id not in tasks:
            self._close_client()
            raise ValueError(f"unknown task {task_id!r}; the server has: {sorted(tasks)}")
        self.task = tasks[task_id]
        self.editable = list(self.task.editable_files)
        self.case_names = list(self.task.case_names)
        self.max_steps = int(max_steps or limits.max_steps)
        self._options: Dict[str, str] = {"max_steps": str(self.max_steps)}
        if run:
            self._options["run"] = run
        if label:
            self._options["label"] = label
        # A sampled file must fit the limits: at most 3 UTF-8 bytes per character.
        per_file = min(limits.max_file_bytes, limits.max_total_bytes // max(1, len(self.editable)))
        text = lambda n: VecText(max_length=n, min_length=0, charset=CHARSET)  # noqa: E731
        self.action_space = spaces.Dict({p: text(per_file // 3) for p in self.editable})
        # a file of the observation holds at most max_file_bytes characters
        self.observation_space = spaces.Dict({
            "prompt": text(MAX_TEXT),
            "files": spaces.Dict({p: text(limits.max_file_bytes) for p in self.editable}),
            "step": spaces.Discrete(self.max_steps + 1),
            "status": VecText(max_length=32, min_length=0, charset=_STATUS_CHARSET),
            "compile_log": text(MAX_TEXT),
            "runtime_log": text(MAX_TEXT),
            "message": text(MAX_TEXT),
        })

    # ---- helpers

    def _obs(self, ob, prompt: str = "") -> Dict[str, Any]:
        files = {f.path: _text(f.content) for f in ob.files}
        return {
            "prompt": _text(prompt, MAX_TEXT),
            "files": {p: files.get(p, "") for p in self.editable},
            "step": int(ob.step),
            "status": status_name(ob.status),
            "compile_log": _text(ob.compile_log, MAX_TEXT),
            "runtime_log": _text(ob.runtime_log, MAX_TEXT),
            "message": _text(ob.message, MAX_TEXT),
        }

    @staticmethod
    def _cases(ob):
        return [{"name": c.name, "correct": c.correct, "speedup": c.speedup,
                 "baseline_ms": c.baseline_ms, "candidate_ms": c.candidate_ms,
                 "max_abs_err": c.max_abs_err, "message": c.message} for c in ob.cases]

    def _close_episode(self):
        if self._episode is not None:
            ep, self._episode = self._episode, None
            try:
                self._client.close(ep)
            except KernelArenaError:
                pass  # already gone (reaped, or the server restarted): nothing to release

    def _close_client(self):
        if self._own_client and self._client is not None:
            self._client.close()
        self._client = None

    # ---- gymnasium API

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None):
        """Starts a new episode (closing the previous one). seed: the episode's server
        seed (it fixes the task's prompt and the shown cases' correctness inputs on one
        executor, not the timed calls' inputs: see the module's docstring); None draws
        one from self.np_random, so a seeded reset followed by unseeded ones gets the same
        seeds again. options: Reset options (max_steps, label, run) for this episode."""
        super().reset(seed=seed)
        if self._client is None:
            raise gymnasium.error.ClosedEnvironmentError("the environment is closed")
        self._close_episode()
        server_seed = seed if seed is not None else int(self.np_random.integers(0, 2**63))
        opts = dict(self._options)
        opts.update({k: str(v) for k, v in (options or {}).items()})
        r = self._client.reset(self.task_id, seed=server_seed, options=opts)
        self._episode = r.episode_id
        self._steps = 0
        info = dict(r.info)
        info.update(episode_id=r.episode_id, seed=r.seed)
        return self._obs(r.observation, r.observation.prompt), info

    def step(self, action: Dict[str, Any]):
        """Submits {path: content}; returns (observation, reward, terminated,
        truncated, info). Raises KernelArenaError for refused requests (unknown
        path, too large, server faults: see .retryable)."""
        if self._episode is None:
            raise gymnasium.error.ResetNeeded("call reset() before step()")
        r = self._client.step(self._episode, self._steps, action)
        self._steps = r.observation.step
        info = dict(r.info)
        info.update(episode_id=self._episode,
                    reward_components=components(r, self.case_names),
                    status=status_name(r.observation.status), cases=self._cases(r.observation))
        return (self._obs(r.observation), float(r.reward), bool(r.terminated),
                bool(r.truncated), info)

    def close(self):
        """Closes the episode and (if this Env opened it) the connection. Idempotent."""
        if getattr(self, "_client", None) is not None:
            self._close_episode()
            self._close_client()

    @property
    def episode_id(self) -> Optional[str]:
        return self._episode
