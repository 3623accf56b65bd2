"""OpenEnv integration: kernelarena behind openenv-core's own server classes, so any
OpenEnv client (its HTTP endpoints and its WebSocket sessions) drives an envserver
(docs/trainers.md, "OpenEnv"). Needs openenv-core (pip install openenv-core==0.3.0).

Serve (one process in front of one envserver):

    python -m kernelarena.integrations.openenv --url ipc:///srv/ka/env.ipc --port 8000

or build the app yourself: app = create_kernelarena_app(url=URL, task_id="host/gelu").

Use (OpenEnv's EnvClient: one WebSocket session = one environment instance = one
kernelarena episode at a time):

    from kernelarena.integrations.openenv import KernelArenaAction, KernelArenaEnvClient
    async with KernelArenaEnvClient(base_url="http://localhost:8000") as env:
        r = await env.reset(task_id="host/gelu", seed=7)   # r.observation.text: the prompt
        r = await env.step(KernelArenaAction(reply=model_reply))
        r.reward, r.done, r.observation.text (the feedback), r.observation.status

reset() takes task_id (else the app's default task), seed and max_steps; OpenEnv's own
episode_id argument is kept as the state's client_episode_id (kernelarena names its
episodes itself). The reward is the text layer's scaled reward (reward / 100). Closing a
session (or its WebSocket dropping) closes the episode, which cancels its queued work.
The stateless HTTP /reset and /step each make a fresh environment and close it after
the call (OpenEnv's design): a multi-step episode needs the WebSocket session.
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Dict, Optional

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, EnvironmentMetadata, Observation, State
from pydantic import Field

from ..client import KernelArenaError
from .text import TextEpisode, tls_options

__all__ = ["KernelArenaAction", "KernelArenaObservation", "KernelArenaState",
           "KernelArenaEnvironment", "KernelArenaEnvClient", "create_kernelarena_app"]


class KernelArenaAction(Action):
    """One model reply: the changed files in fenced code blocks that name them (the
    text layer's reply format, docs/trainers.md)."""
    reply: str = Field(description="the model's reply: each changed file in a fenced code "
                                   "block whose info string names the file")


class KernelArenaObservation(Observation):
    """What the model sees: text is the prompt after reset and the feedback after a step.
    reward (inherited) is the scaled reward; done (inherited) the episode is over."""
    text: str = Field(default="", description="the prompt (reset) or the feedback (step)")
    status: str = Field(default="", description="the evaluation's status label (OK, "
                                                "INCORRECT, COMPILE_ERROR, ..., NO_FILES); "
                                                "empty after reset")
    raw_reward: float = Field(default=0.0, description="the server's reward (0, 20, "
                                                       "120 + 100 x speedup)")
    components: Dict[str, float] = Field(default_factory=dict,
                                         description="reward components, one fixed key set")
    task_id: str = Field(default="")
    episode_id: str = Field(default="", description="the kernelarena episode id")
    evaluated: bool = Field(default=False, description="the reply was evaluated (False: "
                                                       "it named no editable file)")
    steps_left: int = Field(default=0)


class KernelArenaState(State):
    """The session's episode: episode_id (kernelarena's), step_count (replies so far),
    task_id, seed, done, client_episode_id (the episode_id given to reset, if any)."""
    task_id: str = ""
    seed: Optional[int] = None
    done: bool = False
    client_episode_id: Optional[str] = None


class KernelArenaEnvironment(Environment):
    """One OpenEnv environment instance: one kernelarena episode at a time, over its
    own blocking Client (opened at the first reset, closed by close()). OpenEnv gives
    each WebSocket session its own instance and calls it from that session's thread, so
    instances run concurrently; one instance is not thread-safe."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, url: Optional[str] = None, task_id: Optional[str] = None,
                 max_steps: int = 1, timeout_s: float = 900.0,
                 reward_cap: Optional[float] = None, tls: Optional[Dict[str, str]] = None):
        super().__init__()
        self.url = url or os.environ.get("KERNELARENA_URL")
        self.tls = tls
        self.default_task = task_id
        self.max_steps = int(max_steps)
        self.timeout_s = float(timeout_s)
        self.reward_cap = reward_cap
        self._ep: Optional[TextEpisode] = None
        self._state = KernelArenaState()

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None,
              task_id: Optional[str] = None, max_steps: Optional[int] = None,
              **kwargs: Any) -> KernelArenaObservation:
        """Closes the previous episode and starts one of task_id (default: the app's)
        with seed; returns the prompt as observation.text. Raises ValueError without a
        task, KernelArenaError on server faults (OpenEnv sends them as error messages)."""
        task = task_id or self.default_task
        if not task:
            raise ValueError("kernelarena: reset needs task_id (no default task was set)")
        steps = int(max_steps) if max_steps is not None else self.max_steps
        if self._ep is not None and (self._ep.task_id != task or self._ep.max_steps != steps):
            self._ep.close()
            self._ep = None
        if self._ep is None:
            self._ep = TextEpisode(task, url=self.url, max_steps=steps, timeout_s=self.timeout_s,
                                   reward_cap=self.reward_cap, tls=self.tls)
        prompt = self._ep.reset(seed=seed)
        self._state = KernelArenaState(episode_id=self._ep.episode_id, step_count=0, task_id=task,
                                       seed=self._ep.seed, client_episode_id=episode_id)
        return KernelArenaObservation(text=prompt, task_id=task, episode_id=self._ep.episode_id,
                                      steps_left=steps, done=False, reward=None)

    def step(self, action: KernelArenaAction, timeout_s: Optional[float] = None,
             **kwargs: Any) -> KernelArenaObservation:
        """Parses the reply, evaluates its files (one kernelarena Step) and returns the
        feedback, scaled reward and done. A reply naming no editable file is not
        evaluated (status NO_FILES, reward 0). Raises KernelArenaError before a reset or
        after the episode is done, and on server faults."""
        if self._ep is None:
            raise KernelArenaError("FAILED_PRECONDITION", "reset first: no open episode", False)
        r = self._ep.step(action.reply)
        self._state.step_count = self._ep.turns
        self._state.done = r.done
        return KernelArenaObservation(text=r.feedback, status=r.status, raw_reward=r.raw_reward,
                                      components=r.components, task_id=self._ep.task_id,
                                      episode_id=self._ep.episode_id or "",
                                      evaluated=r.evaluated,
                                      steps_left=self._ep.max_steps - self._ep.turns,
                                      done=r.done, reward=r.reward)

    @property
    def state(self) -> KernelArenaState:
        """The current episode (an empty state before the first reset)."""
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        """Name, description and version (GET /metadata)."""
        from .. import __version__
        return EnvironmentMetadata(
            name="kernelarena", version=__version__,
            description="GPU-kernel optimization: reply with faster kernel sources; each step "
                        "compiles, verifies and times them against the task's baseline")

    def close(self) -> None:
        """Closes the episode (cancelling its queued work) and the client; never raises."""
        if self._ep is not None:
            self._ep.close()
            self._ep = None


def create_kernelarena_app(url: Optional[str] = None, task_id: Optional[str] = None,
                           max_steps: int = 1, max_concurrent_envs: int = 64,
                           timeout_s: float = 900.0, reward_cap: Optional[float] = None,
                           session_timeout_s: Optional[float] = None,
                           tls: Optional[Dict[str, str]] = None):
    """The FastAPI app of openenv-core's create_app serving KernelArenaEnvironment
    (/health, /schema, /metadata, /reset, /step, /state, /ws): each WebSocket session
    gets its own instance, at most max_concurrent_envs at once. url: the envserver
    (default $KERNELARENA_URL); task_id: the default task of reset(); session_timeout_s:
    OpenEnv's idle-session reaper (None: off; kernelarena's own idle TTL still applies);
    tls: a tls+tcp:// url's files (kernelarena.Client's tls)."""
    from openenv.core.env_server.types import ConcurrencyConfig

    def factory() -> KernelArenaEnvironment:
        return KernelArenaEnvironment(url=url, task_id=task_id, max_steps=max_steps,
                                      timeout_s=timeout_s, reward_cap=reward_cap, tls=tls)
    cfg = ConcurrencyConfig(max_concurrent_envs=max_concurrent_envs,
                            session_timeout=session_timeout_s)
    return create_app(factory, KernelArenaAction, KernelArenaObservation, env_name="kernelarena",
                      concurrency_config=cfg)


class KernelArenaEnvClient(EnvClient[KernelArenaAction, KernelArenaObservation, KernelArenaState]):
    """OpenEnv's WebSocket EnvClient for this server (one session, one episode at a
    time). Its message_timeout_s (OpenEnv's default 60 s) must cover a whole step,
    queueing included: the default here is 900 s."""

    def __init__(self, base_url: str, message_timeout_s: float = 900.0, **kwargs: Any):
        super().__init__(base_url, message_timeout_s=message_timeout_s, **kwargs)

    def _step_payload(self, action: KernelArenaAction) -> Dict[str, Any]:
        return action.model_dump()

    def _parse_result(self, payload: Dict[str, Any]) -> StepResult[KernelArenaObservation]:
        obs = KernelArenaObservation(**payload.get("observation", {}),
                                     reward=payload.get("reward"), done=payload.get("done", False))
        return StepResult(observation=obs, reward=payload.get("reward"),
                          done=bool(payload.get("done", False)))

    def _parse_state(self, payload: Dict[str, Any]) -> KernelArenaState:
        return KernelArenaState(**payload)


def main(argv=None) -> int:
    """python -m kernelarena.integrations.openenv: serves the app with uvicorn."""
    ap = argparse.ArgumentParser(prog="python -m kernelarena.integrations.openenv",
                                 description="An OpenEnv server in front of an envserver")
    ap.add_argument("--url", default=None, help="the envserver (default $KERNELARENA_URL)")
    ap.add_argument("--task", default=None, help="the default task of reset()")
    ap.add_argument("--max-steps", type=int, default=1)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--max-sessions", type=int, default=64)
    ap.add_argument("--timeout-s", type=float, default=900.0)
    for k, what in (("ca", "the CA certificate that signed the envserver's (tls+tcp://)"),
                    ("cert", "this client's certificate (an envserver with --tls-client-ca)"),
                    ("key", "its key (unencrypted PEM)"),
                    ("server-name", "the name the envserver's certificate carries")):
        ap.add_argument(f"--tls-{k}", default=None, help=f"{what}; default $KA_TLS_"
                        f"{k.upper().replace('-', '_')}")
    a = ap.parse_args(argv)
    import uvicorn
    uvicorn.run(create_kernelarena_app(url=a.url, task_id=a.task, max_steps=a.max_steps,
                                       max_concurrent_envs=a.max_sessions, timeout_s=a.timeout_s,
                                       tls=tls_options(lambda k: getattr(a, k))),
                host=a.host, port=a.port, log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
