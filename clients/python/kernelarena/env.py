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
breakdown (compiled, correct, speedup_geomean, status, speedup/<case>), info["cases"]
the shown cases, plus episode_id, seed, job_id, wall_s, compile_s, worker_id.

The environment is nondeterministic (kernel timings vary), so it is registered with
nondeterministic=True; reset(seed) is deterministic: the same seed gives the same
problem (the server derives every case's inputs from it).
"""

from __future__ import annotations

import re
from typing import Any, Dict, Optional

import gymnasium
from gymnasium import spaces

from .client import STATUS_NAMES, Client, KernelArenaError

# Characters an observation string may hold: tab, newline, carriage return and the
# Basic Multilingual Plane minus controls and surrogates. Anything else (astral
# characters, invalid UTF-8) is shown as U+FFFD.
CHARSET = "\t\n\r" + "".join(
    chr(c) for r in ((0x20, 0x7F), (0xA0, 0xD800), (0xE000, 0xFFFE)) for c in range(*r))
_NOT_IN_CHARSET = re.compile("[^\t\n\r\x20-\x7e\xa0-\ud7ff\ue000-\ufffd]")
_STATUS_CHARSET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ_"
_MAX_TEXT = 1 << 24  # characters of a log or a prompt in the observation space


def _text(s) -> str:
    if isinstance(s, bytes):
        s = s.decode("utf-8", errors="replace")
    return _NOT_IN_CHARSET.sub("\ufffd", s)


class Env(gymnasium.Env):
    """A kernelarena episode as a Gymnasium environment.

    Args:
        task_id: the task (see Client.list_tasks()).
        url: the envserver's client endpoint (default $KERNELARENA_URL).
        max_steps: steps per episode (Reset option; default the server's).
        run, label: the trace-store run id and label of the episodes.
        timeout_s: deadline of each request (a step waits for its evaluation).
        client: an existing Client to share (not closed by close()).
    """

    metadata = {"render_modes": []}

    def __init__(self, task_id: str = "host/gelu", url: Optional[str] = None,
                 max_steps: Optional[int] = None, run: Optional[str] = None,
                 label: Optional[str] = None, timeout_s: float = 900.0,
                 client: Optional[Client] = None):
        self._own_client = client is None
        self._client = client or Client(url, timeout_s=timeout_s)
        self._episode: Optional[str] = None
        self._steps = 0
        self.task_id = task_id
        try:
            tasks = {t.id: t for t in self._client.list_tasks()}
            limits = self._client.describe().limits
        except Exception:
            self._close_client()
            raise
        if task_id not in tasks:
            self._close_client()
            raise ValueError(f"unknown task {task_id!r}; the server has: {sorted(tasks)}")
        self.task = tasks[task_id]
        self.editable = list(self.task.editable_files)
        self.max_steps = int(max_steps or limits.max_steps)
        self._options: Dict[str, str] = {"max_steps": str(self.max_steps)}
        if run:
            self._options["run"] = run
        if label:
            self._options["label"] = label
        # A sampled file must fit the limits: at most 3 UTF-8 bytes per character.
        per_file = min(limits.max_file_bytes, limits.max_total_bytes // max(1, len(self.editable)))
        text = lambda n: spaces.Text(max_length=n, min_length=0, charset=CHARSET)  # noqa: E731
        self.action_space = spaces.Dict({p: text(per_file // 3) for p in self.editable})
        self.observation_space = spaces.Dict({
            "prompt": text(_MAX_TEXT),
            "files": spaces.Dict({p: text(_MAX_TEXT) for p in self.editable}),
            "step": spaces.Discrete(self.max_steps + 1),
            "status": spaces.Text(max_length=32, min_length=0, charset=_STATUS_CHARSET),
            "compile_log": text(_MAX_TEXT),
            "runtime_log": text(_MAX_TEXT),
            "message": text(_MAX_TEXT),
        })

    # ---- helpers

    def _obs(self, ob, prompt: str = "") -> Dict[str, Any]:
        files = {f.path: _text(f.content) for f in ob.files}
        return {
            "prompt": _text(prompt),
            "files": {p: files.get(p, "") for p in self.editable},
            "step": int(ob.step),
            "status": STATUS_NAMES.get(ob.status, "") if ob.status else "",
            "compile_log": _text(ob.compile_log),
            "runtime_log": _text(ob.runtime_log),
            "message": _text(ob.message),
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
                pass  # already gone (e.g. reaped); nothing to release

    def _close_client(self):
        if self._own_client and self._client is not None:
            self._client.close()
        self._client = None

    # ---- gymnasium API

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None):
        """Starts a new episode (closing the previous one). seed: the server seed
        (same seed, same problem); None draws one from self.np_random, so a seeded
        reset followed by unseeded ones is reproducible too. options: Reset options
        (max_steps, label, run) for this episode."""
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
        info.update(episode_id=self._episode, reward_components=dict(r.reward_components),
                    cases=self._cases(r.observation))
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
