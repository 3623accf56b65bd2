"""NeMo-Gym integration: a NeMo-Gym resources server whose /verify scores a model
response by evaluating its files on an envserver (docs/trainers.md, "NeMo-Gym"). Needs
nemo-gym (pip install nemo-gym==0.4.0: Python 3.12 or later; scripts/install-python-deps.sh
--trainers makes .venv-nemo with it).

The resources server is single-turn: NeMo-Gym's agent sends the dataset row's
responses_create_params to the model and posts the row's extra fields (task_id, seed)
with the model's response to /verify; verify opens an episode of task_id with seed,
evaluates the reply's files (the text layer's reply format), closes the episode and
returns the scaled reward with the status, raw reward, components and feedback.

    # a NeMo-Gym config (resources_servers.kernelarena.entrypoint: this file's path)
    kernelarena:
      resources_servers:
        kernelarena:
          entrypoint: .../kernelarena/integrations/nemo_gym.py
          url: ipc:///srv/ka/env.ipc

Dataset rows: nemo_gym_rows(rows of `envctl tasks --prompts`) gives each its
responses_create_params (the text layer's prompt as the user input) and task_id, seed.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Dict, List, Mapping, Optional

from nemo_gym.base_resources_server import (BaseResourcesServerConfig, BaseVerifyRequest,
                                            BaseVerifyResponse, SimpleResourcesServer)

from ..client import KernelArenaError
from .text import TextEpisode, render_prompt, tls_options

__all__ = ["KernelArenaResourcesServerConfig", "KernelArenaVerifyRequest",
           "KernelArenaVerifyResponse", "KernelArenaResourcesServer", "nemo_gym_rows"]


class KernelArenaResourcesServerConfig(BaseResourcesServerConfig):
    """The server's config (NeMo-Gym's host, port, entrypoint, name and): url (the
    envserver; default $KERNELARENA_URL), timeout_s (one call), reward_cap; for a
    tls+tcp:// url: tls_ca, tls_cert, tls_key, tls_server_name (kernelarena.Client's tls;
    default $KA_TLS_CA, ...)."""
    url: str = ""
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    tls_server_name: str = ""
    timeout_s: float = 900.0
    reward_cap: Optional[float] = None


class KernelArenaVerifyRequest(BaseVerifyRequest):
    """NeMo-Gym's verify request and the dataset row's task_id and seed."""
    task_id: str
    seed: Optional[int] = None


class KernelArenaVerifyResponse(BaseVerifyResponse):
    """The request's fields (task_id, seed included), reward (scaled), status (label;
    NO_FILES when the reply named no editable file), raw_reward (the server's),
    components (the fixed key set), feedback (text), episode_id (the first episode's),
    replays (episodes lost to a server fault and replayed: text.TextEpisode.replays)."""
    task_id: str
    seed: Optional[int] = None
    status: str
    raw_reward: float
    components: Dict[str, float]
    feedback: str
    episode_id: str = ""
    replays: int = 0


class KernelArenaResourcesServer(SimpleResourcesServer):
    """/verify, /seed_session and /aggregate_metrics (NeMo-Gym's SimpleResourcesServer).
    Each verify has its own episode and client (run on a worker thread), so verifies run
    concurrently. A server fault is raised (NeMo-Gym answers 500); a reply that does not
    compile, is wrong or names no file is a normal response with its reward."""
    config: KernelArenaResourcesServerConfig

    def _verify_blocking(self, body: KernelArenaVerifyRequest) -> KernelArenaVerifyResponse:
        ep = TextEpisode(body.task_id, url=self.config.url or os.environ.get("KERNELARENA_URL"),
                         max_steps=1, timeout_s=self.config.timeout_s,
                         reward_cap=self.config.reward_cap,
                         tls=tls_options(lambda k: getattr(self.config, k)))
        try:
            ep.reset(seed=body.seed)
            eid = ep.episode_id or ""
            r = ep.step(body.response.output_text)
        finally:
            ep.close()
        return KernelArenaVerifyResponse(**body.model_dump(), reward=r.reward, status=r.status,
                                         raw_reward=r.raw_reward, components=r.components,
                                         feedback=r.feedback, episode_id=eid,
                                         replays=ep.replays)

    async def verify(self, body: KernelArenaVerifyRequest) -> KernelArenaVerifyResponse:
        """Evaluates the response's files on a fresh episode of body.task_id (seed
        body.seed) and returns its scaled reward. Raises KernelArenaError on server
        faults."""
        return await asyncio.to_thread(self._verify_blocking, body)


def nemo_gym_rows(rows: List[Mapping[str, Any]], system_prompt: Optional[str] = None) -> List[Dict[str, Any]]:
    """NeMo-Gym dataset rows from rows of `envctl tasks --prompts`: responses_create_params
    with the text layer's prompt (the task, its files, the reply format) as the user
    input (after an optional system message), and the task_id and seed verify needs."""
    out = []
    for r in rows:
        files = dict(r.get("files") or {})
        if not files:
            raise KernelArenaError("INVALID_ARGUMENT", f"row of {r.get('task_id')} has no files", False)
        msgs = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + \
            [{"role": "user", "content": render_prompt(r["prompt"], files, list(files))}]
        out.append({"responses_create_params": {"input": msgs}, "task_id": r["task_id"],
                    "seed": r.get("seed")})
    return out


if __name__ == "__main__":
    KernelArenaResourcesServer.run_webserver()
