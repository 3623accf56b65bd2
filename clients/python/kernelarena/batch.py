"""Many episodes in flight from one process: asyncio over one AsyncClient (one nng
context per request), e.g. a GRPO group of N rollouts of one task with one seed.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

from .client import AsyncClient, KernelArenaError


@dataclass
class Rollout:
    """One finished episode: its id, the reward of each step and their components."""
    episode_id: str
    seed: int
    rewards: List[float] = field(default_factory=list)
    components: List[Dict[str, float]] = field(default_factory=list)
    statuses: List[int] = field(default_factory=list)
    error: Optional[str] = None  # a server error that ended the rollout early

    @property
    def total_reward(self) -> float:
        return float(sum(self.rewards))


Policy = Callable[[Any, int], Any]  # (observation, rollout index) -> {path: content}


async def rollout(client: AsyncClient, task_id: str, seed: int, policy: Policy, index: int = 0,
                  max_steps: int = 1, options: Optional[Dict[str, Any]] = None,
                  retries: int = 3) -> Rollout:
    """Runs one episode: reset(task_id, seed), then up to max_steps steps whose files come
    from policy(observation, index) (a function or a coroutine function). Retryable
    errors (CAPACITY, DEADLINE_EXCEEDED, INTERNAL) are retried up to `retries` times with
    the same expected_step, so a step is never evaluated twice. The episode is closed at
    the end."""
    opts = {"max_steps": max_steps}
    opts.update(options or {})
    r = None
    for attempt in range(retries + 1):
        try:
            r = await client.reset(task_id, seed=seed, options=opts)
            break
        except KernelArenaError as e:
            if not e.retryable or attempt == retries:
                raise
            await asyncio.sleep(0.2 * 2**attempt)
    ro = Rollout(episode_id=r.episode_id, seed=r.seed)
    ob = r.observation
    try:
        for step in range(max_steps):
            files = policy(ob, index)
            if inspect.isawaitable(files):
                files = await files
            for attempt in range(retries + 1):
                try:
                    s = await client.step(ro.episode_id, step, files)
                    break
                except KernelArenaError as e:
                    if not e.retryable or attempt == retries:
                        ro.error = str(e)
                        return ro
                    await asyncio.sleep(0.2 * 2**attempt)
            ro.rewards.append(s.reward)
            ro.components.append(dict(s.reward_components))
            ro.statuses.append(s.observation.status)
            ob = s.observation
            if s.terminated or s.truncated:
                break
    finally:
        try:
            await client.close(ro.episode_id)
        except KernelArenaError:
            pass
    return ro


async def rollouts(client: AsyncClient, task_id: str, seed: int, n: int, policy: Policy,
                   max_steps: int = 1, concurrency: Optional[int] = None,
                   options: Optional[Dict[str, Any]] = None) -> List[Rollout]:
    """n rollouts of task_id sharing one seed (the same problem), at most `concurrency`
    (default n) in flight at once; results in index order."""
    sem = asyncio.Semaphore(concurrency or n)

    async def one(i):
        async with sem:
            return await rollout(client, task_id, seed, policy, i, max_steps, options)

    return list(await asyncio.gather(*(one(i) for i in range(n))))


def group_advantages(rewards: Sequence[float], eps: float = 1e-6) -> List[float]:
    """GRPO group-relative advantages: (r - mean) / (std + eps) over one group, std the
    population standard deviation (Shao et al. 2024, DeepSeekMath, eq. 3 / sec. 4.1.2).
    A group whose rewards are all equal gets zero advantages."""
    n = len(rewards)
    if n == 0:
        return []
    mean = sum(rewards) / n
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / n)
    return [(r - mean) / (std + eps) for r in rewards]
