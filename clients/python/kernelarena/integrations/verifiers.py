"""verifiers integration: kernelarena as a verifiers v1 environment plugin, so that
`vf-eval kernelarena-verifiers ...` (and prime-rl, which loads environments the same
way) runs it (docs/trainers.md, "verifiers"). Needs verifiers (pip install
verifiers==0.4.0; it pins mcp==2.0.0, so scripts/install-python-deps.sh --trainers puts
it in its own venv, .venv-verifiers).

verifiers resolves the plugin id `kernelarena-verifiers` to the top-level module
kernelarena_verifiers (shipped beside this package), which re-exports this module's
__all__: one Taskset, one Env and one Harness.

    vf-eval kernelarena-verifiers --env.taskset.url ipc:///srv/ka/env.ipc \\
        --env.taskset.prompts prompts.jsonl --env.taskset.max-steps 2 \\
        -m MODEL --client.base-url http://localhost:8000/v1 --client.api-key-var KEY -r 8

- KernelArenaTaskset: one task per row of `envctl tasks --prompts` (taskset.prompts, a
  JSONL file), or the one task taskset.task_id with taskset.seed.
- KernelArenaEnv.run: one kernelarena episode per rollout, stepped host-side as the
  run's user: the text layer's prompt is the first user turn, each model reply is
  parsed and evaluated, the feedback is the next user turn until the episode is done;
  the reward `kernelarena` is the scaled reward of the last evaluated step (0 when
  none was), the status label, the raw reward and the last step's feedback (also when
  that reply had no file) go to the trace's info.
- KernelArenaHarness: the model's side in-process, one chat completion per segment
  through the interception endpoint verifiers gives it (verifiers' own harnesses are
  programs prepared with uv; this one needs no program and no container). The agent's
  runtime defaults to subprocess (no sandbox: nothing the model writes runs here; the
  envserver evaluates it).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Optional

import verifiers.v1 as vf
from verifiers.v1.runtimes import ProgramResult

from .text import NO_FILES_REWARD, TextEpisode, tls_options

__all__ = ["KernelArenaTasksetConfig", "KernelArenaData", "KernelArenaTask",
           "KernelArenaEnvConfig", "KernelArenaEnv", "KernelArenaHarnessConfig",
           "KernelArenaHarness", "KernelArenaTaskset"]

SYSTEM_PROMPT = ("You optimize GPU and CPU kernels. Keep them correct; make them fast. "
                 "Reply in the format the task gives.")


class KernelArenaTasksetConfig(vf.TasksetConfig):
    """--env.taskset.*: url (the envserver; default $KERNELARENA_URL), prompts (a JSONL
    file of `envctl tasks --prompts`), or task_id + seed (one task), max_steps (turns per
    episode), timeout_s (one call), reward_cap (text.scale_reward's cap); for a tls+tcp://
    url: tls_ca, tls_cert, tls_key, tls_server_name (kernelarena.Client's tls; default
    $KA_TLS_CA, ...)."""
    url: str = ""
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""
    tls_server_name: str = ""
    prompts: str = ""
    task_id: str = ""
    seed: int = 0
    max_steps: int = 1
    timeout_s: float = 900.0
    reward_cap: Optional[float] = None


class KernelArenaData(vf.TaskData):
    """A task's data: info has task_id and seed (the dataset row's)."""
    info: dict


class KernelArenaTask(vf.Task[KernelArenaData, vf.State, vf.TaskConfig]):
    pass


class KernelArenaHarnessConfig(vf.HarnessConfig):
    pass


class KernelArenaHarness(vf.Harness[KernelArenaHarnessConfig]):
    """One chat completion per segment, in-process, through the interception endpoint
    (which records the call in the trace). A resumed segment (the next turn) gets the
    conversation so far (verifiers' default resume)."""
    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data,
                     tool_interception_url=None) -> ProgramResult:
        import openai
        from verifiers.v1.dialects.chat import message_to_wire
        system_prompt, prompt = self.resolve_prompt(data)
        msgs = [{"role": "system", "content": system_prompt}] if system_prompt else []
        if isinstance(prompt, str):
            msgs.append({"role": "user", "content": prompt})
        elif prompt:
            msgs += [message_to_wire(m) for m in prompt]
        client = openai.AsyncOpenAI(base_url=endpoint, api_key=secret)
        try:
            await client.chat.completions.create(model=ctx.model, messages=msgs)
        finally:
            await client.close()
        return ProgramResult(exit_code=0, stdout="", stderr="")


class KernelArenaEnvConfig(vf.EnvConfig):
    """--env.*: the one agent (--env.agent.*), its runtime subprocess by default."""
    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())


class KernelArenaEnv(vf.Env[KernelArenaEnvConfig]):
    """One rollout = one kernelarena episode, stepped host-side as the run's user."""

    async def run(self, task, agents):
        info = task.data.info
        ep = TextEpisode(info["task_id"], url=info.get("url") or None,
                         max_steps=int(info["max_steps"]), timeout_s=float(info["timeout_s"]),
                         reward_cap=info.get("reward_cap"), tls=info.get("tls"))
        try:
            prompt = await asyncio.to_thread(ep.reset, info.get("seed"))
            reward, status, raw, feedback = NO_FILES_REWARD, "", 0.0, ""
            async with agents.agent.interaction(task) as interaction:
                segment = await interaction.turn(prompt)
                while not segment.terminated:
                    r = await asyncio.to_thread(ep.step, segment.last_reply or "")
                    status, feedback = r.status, r.feedback
                    if r.evaluated:
                        reward, raw = r.reward, r.raw_reward
                    if r.done:
                        break
                    segment = await interaction.turn(r.feedback)
                trace = interaction.trace
                trace.record_reward("kernelarena", reward, 1.0)
                trace.info.update({"status": status, "raw_reward": raw, "feedback": feedback,
                                   "episode_id": ep.episode_id or "", "turns": ep.turns,
                                   "replays": ep.replays})
        finally:
            await asyncio.to_thread(ep.close)


class KernelArenaTaskset(vf.Taskset[KernelArenaTask, KernelArenaTasksetConfig]):
    """The rows of taskset.prompts (or the one taskset.task) as tasks."""

    def _rows(self):
        c = self.config
        if c.prompts:
            with open(c.prompts) as f:
                return [json.loads(line) for line in f if line.strip()]
        if c.task_id:
            return [{"task_id": c.task_id, "seed": c.seed}]
        raise ValueError("kernelarena: set --env.taskset.prompts (a JSONL file of "
                         "`envctl tasks --prompts`) or --env.taskset.task-id")

    def load(self) -> Iterator[KernelArenaTask]:
        c = self.config
        for row in self._rows():
            seed = row.get("seed")
            yield KernelArenaTask(KernelArenaData(
                name=f"{row['task_id']}#{seed}", system_prompt=SYSTEM_PROMPT,
                info={"task_id": row["task_id"], "seed": seed, "url": c.url,
                      "max_steps": c.max_steps, "timeout_s": c.timeout_s,
                      "reward_cap": c.reward_cap,
                      "tls": tls_options(lambda k: getattr(c, k))}), c.task)
