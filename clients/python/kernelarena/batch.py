"""Many episodes in flight from one process: asyncio over one AsyncClient (one nng
context per request), e.g. a GRPO group of N rollouts of one task with one seed (the
group shares the task, the prompt and, on one executor, the shown cases' correctness
inputs; the timed calls' inputs differ: docs/python.md, "Determinism").
"""

from __future__ import annotations

import asyncio
import inspect
import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

from .client import AsyncClient, KernelArenaError, components, status_name


@dataclass
class Rollout:
    """One finished episode: its id, the reward of each step, their components (a fixed
    key set: kernelarena.components) and status labels ("OK", "COMPILE_ERROR", ...).
    error: why the rollout ended early (a refused request, a failed policy, retries
    exhausted), None when it ran to the end; episodes: how many episodes it took (more
    than one when an episode was lost, e.g. to a server restart, and replayed)."""
    episode_id: str
    seed: int
    rewards: List[float] = field(default_factory=list)
    components: List[Dict[str, float]] = field(default_factory=list)
    statuses: List[str] = field(default_factory=list)
    error: Optional[str] = None
    episodes: int = 0

    @property
    def total_reward(self) -> float:
        return float(sum(self.rewards))


Policy = Callable[[Any, int], Any]  # (observation, rollout index) -> {path: content}


class _Lost(Exception):
    """The episode is gone or its last step's fate is unknown: replay the rollout."""


def _backoff(attempt: int) -> float:
    return min(8.0, 0.5 * 2**attempt) * (0.5 + random.random())


async def _retry(what, retries: int):
    """Awaits what() again after each retryable KernelArenaError, up to `retries` times
    with exponential backoff; re-raises the last error."""
    for attempt in range(retries + 1):
        try:
            return await what()
        except KernelArenaError as e:
            if not e.retryable or attempt == retries:
                raise
            await asyncio.sleep(_backoff(attempt))


async def _close_quietly(client: AsyncClient, episode_id: str):
    try:
        await client.close(episode_id)
    except Exception:  # noqa: BLE001 - cleanup never raises (reaped, server gone)
        pass


async def _episode(client, task_id, seed, policy, index, max_steps, opts, retries, actions,
                   ro: Rollout, case_names):
    """One episode of a rollout, reusing the policy's earlier actions (actions[k] for
    step k) so that a replayed rollout sends the same files. Raises _Lost when the
    episode must be replayed, KernelArenaError when the rollout fails."""
    r = await _retry(lambda: client.reset(task_id, seed=seed, options=opts), retries)
    ro.episode_id, ro.seed, ro.episodes = r.episode_id, r.seed, ro.episodes + 1
    ro.rewards, ro.components, ro.statuses = [], [], []
    ob = r.observation
    try:
        for step in range(max_steps):
            if step == len(actions):
                files = policy(ob, index)
                if inspect.isawaitable(files):
                    files = await files
                actions.append(files)
            uncertain = False
            for attempt in range(retries + 1):
                try:
                    s = await client.step(ro.episode_id, step, actions[step])
                    break
                except KernelArenaError as e:
                    # after a lost reply the step may have been counted, or the episode
                    # lost with a restarted server: a refusal then means "replay"
                    if uncertain and e.code in ("FAILED_PRECONDITION", "NOT_FOUND"):
                        raise _Lost(str(e)) from None
                    if not e.retryable:
                        raise
                    if attempt == retries:
                        raise _Lost(str(e)) from None
                    uncertain = uncertain or e.code in ("UNAVAILABLE", "DEADLINE_EXCEEDED")
                    await asyncio.sleep(_backoff(attempt))
            ro.rewards.append(float(s.reward))
            ro.components.append(components(s, case_names))
            ro.statuses.append(status_name(s.observation.status))
            ob = s.observation
            if s.terminated or s.truncated:
                break
    finally:
        await _close_quietly(client, ro.episode_id)


async def rollout(client: AsyncClient, task_id: str, seed: int, policy: Policy, index: int = 0,
                  max_steps: int = 1, options: Optional[Dict[str, Any]] = None,
                  retries: int = 5, case_names: Sequence[str] = ()) -> Rollout:
    """Runs one episode: reset(task_id, seed), then up to max_steps steps whose files come
    from policy(observation, index) (a function or a coroutine function). Never raises
    for a server or policy fault: the Rollout's error says what ended it.

    Retryable errors (UNAVAILABLE, CAPACITY, DEADLINE_EXCEEDED, INTERNAL) are retried up
    to `retries` times with exponential backoff and the same expected_step, so a step is
    never counted twice. When the episode is lost (the server restarted, or a step's
    reply was lost and its retry is refused), the rollout is replayed in a new episode
    with the same seed and the same files (the policy is not asked again), up to
    `retries` times. Every episode is closed at the end (errors ignored). case_names:
    the task's shown cases (TaskInfo.case_names), the per-case keys of the components."""
    opts = {"max_steps": max_steps}
    opts.update(options or {})
    ro = Rollout(episode_id="", seed=seed)
    actions: List[Any] = []
    for replay in range(retries + 1):
        try:
            await _episode(client, task_id, seed, policy, index, max_steps, opts, retries,
                           actions, ro, case_names)
            ro.error = None
            return ro
        except _Lost as e:
            ro.error = f"episode lost after {ro.episodes} attempt(s): {e}"
            await asyncio.sleep(_backoff(replay))
        except KernelArenaError as e:
            ro.error = str(e)
            return ro
        except Exception as e:  # noqa: BLE001 - the policy failed: this rollout only
            ro.error = f"policy raised {type(e).__name__}: {e}"
            return ro
    return ro


async def rollouts(client: AsyncClient, task_id: str, seed: int, n: int, policy: Policy,
                   max_steps: int = 1, concurrency: Optional[int] = None,
                   options: Optional[Dict[str, Any]] = None, retries: int = 5) -> List[Rollout]:
    """n rollouts of task_id sharing one seed, at most `concurrency` (default n) in flight
    at once; results in index order. One rollout's failure never aborts the others:
    each Rollout reports its own error (see rollout)."""
    sem = asyncio.Semaphore(concurrency or n)
    case_names: Sequence[str] = ()
    try:
        tasks = await _retry(lambda: client.list_tasks(), retries)
        case_names = next((list(t.case_names) for t in tasks if t.id == task_id), ())
    except KernelArenaError:
        pass  # the components then carry only the keys the server sent

    async def one(i):
        async with sem:
            return await rollout(client, task_id, seed, policy, i, max_steps, options,
                                 retries, case_names)

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
