"""kernelarena: Python client of the kernelarena environment server.

    import kernelarena
    with kernelarena.Env("host/gelu", url="ipc:///path/to/state/env.ipc") as env:
        obs, info = env.reset(seed=1)
        obs, reward, terminated, truncated, info = env.step({"gelu.c": source})

Also registered with Gymnasium: gymnasium.make("kernelarena/KernelArena-v0", task_id=...,
url=...). docs/python.md describes the package.
"""

from typing import Any, Optional

import gymnasium

from . import kernelarena_pb2 as pb
from .batch import Rollout, group_advantages, rollout, rollouts
from .client import (COMPONENT_KEYS, STATUS_NAMES, AsyncClient, Client, KernelArenaError,
                     components, status_name)
from .env import Env

__all__ = ["Env", "Client", "AsyncClient", "KernelArenaError", "evaluate", "rollout",
           "rollouts", "group_advantages", "Rollout", "pb", "STATUS_NAMES", "components",
           "status_name", "COMPONENT_KEYS"]
__version__ = "0.1.0"

ENV_ID = "kernelarena/KernelArena-v0"
if ENV_ID not in gymnasium.registry:
    # Timings and the timed calls' secret inputs make steps nondeterministic.
    gymnasium.register(id=ENV_ID, entry_point="kernelarena.env:Env", nondeterministic=True)


def evaluate(task_id: Optional[str] = None, files: Any = None, url: Optional[str] = None,
             seed: Optional[int] = None, episode_id: Optional[str] = None, step: int = 0,
             include_held_out: bool = False, admin_token: Optional[str] = None,
             timeout_s: float = 900.0, tls: Optional[dict] = None):
    """One stateless evaluation (no episode): returns the EvaluateResponse (observation,
    reward, reward_components, info, seed). See Client.evaluate (and Client's tls)."""
    with Client(url, timeout_s=timeout_s, tls=tls) as c:
        return c.evaluate(task_id=task_id, files=files, seed=seed, episode_id=episode_id,
                          step=step, include_held_out=include_held_out, admin_token=admin_token)
