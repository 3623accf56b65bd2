"""TRL integration: an environment class for TRL's GRPOTrainer(environment_factory=...)
(docs/trainers.md, "TRL"). It does not import trl (trl needs torch): it is written
against the interface GRPOTrainer uses in trl 1.16.0 (trl/trainer/grpo_trainer.py):

- the factory is called with no arguments, once to probe the class and then once per
  concurrent rollout; instances are pooled and reused across batches;
- reset(**row) is called with the dataset row's columns before each generation; the
  string it returns is appended to the row's last user message;
- every public method other than reset and get_reward is a tool: its type hints and
  Google-style docstring (Args:) become the tool schema of the chat template, and a
  tool call runs method(**arguments) (an exception becomes {"error": str(e)} for the
  model);
- get_reward() is called once per finished rollout: the environment owns the reward.

    from trl import GRPOConfig, GRPOTrainer
    from kernelarena.integrations.trl import environment_factory, trl_rows
    trainer = GRPOTrainer(model=..., args=GRPOConfig(...),
                          train_dataset=datasets.Dataset.from_list(trl_rows(rows)),
                          environment_factory=environment_factory(url=URL, max_steps=2))

rows are those of `envctl tasks --prompts` (task_id, seed, ...); trl_rows gives each the
conversational prompt TRL needs (an empty user message that reset() fills).
"""

from __future__ import annotations

import functools
import os
from typing import Any, Dict, List, Mapping, Optional

from .text import NO_FILES_REWARD, TextEpisode, tls_options

__all__ = ["KernelArenaTRLEnv", "environment_factory", "trl_rows", "HOW_TO_SUBMIT"]

HOW_TO_SUBMIT = ("Call the tool `submit` with `path` (one of the files you may change) and "
                 "`content` (its whole new contents) to have it compiled, verified and timed; "
                 "its answer is the evaluation. Files you may change: {files}.")


class KernelArenaTRLEnv:
    """One rollout's kernelarena episode for TRL's environment_factory. Configure it
    through environment_factory() (TRL calls the factory with no arguments). Not
    thread-safe: one instance serves one rollout at a time, as TRL uses it."""

    def __init__(self, url: Optional[str] = None, max_steps: int = 1, timeout_s: float = 900.0,
                 reward_cap: Optional[float] = None, tls: Optional[Dict[str, str]] = None):
        self._url = url or os.environ.get("KERNELARENA_URL")
        self._tls = tls
        self._max_steps = int(max_steps)
        self._timeout_s = float(timeout_s)
        self._reward_cap = reward_cap
        self._ep: Optional[TextEpisode] = None
        self._reward = NO_FILES_REWARD
        self.last_status = ""

    def reset(self, **row: Any) -> str:
        """Starts an episode of row["task_id"] with row.get("seed") (the columns of
        `envctl tasks --prompts`; other columns are ignored) and returns the task's
        prompt with the current files and how to submit (TRL appends it to the last user
        message). Closes the previous episode first. Raises KernelArenaError on server
        faults, ValueError without a task_id."""
        task = row.get("task_id")
        if not task:
            raise ValueError("kernelarena: the dataset row needs a task_id column "
                             "(`envctl tasks --prompts` has it)")
        if self._ep is not None and self._ep.task_id != task:
            self._ep.close()
            self._ep = None
        if self._ep is None:
            self._ep = TextEpisode(task, url=self._url, max_steps=self._max_steps,
                                   timeout_s=self._timeout_s, reward_cap=self._reward_cap,
                                   tls=self._tls)
        seed = row.get("seed")
        self._reward, self.last_status = NO_FILES_REWARD, ""
        prompt = self._ep.reset(seed=None if seed is None else int(seed))
        # the text layer's prompt, its last section (the reply format) replaced by the tool
        how = HOW_TO_SUBMIT.format(files=", ".join(f"`{p}`" for p in self._ep.editable))
        return prompt.rsplit("## How to reply", 1)[0] + "## How to reply\n\n" + how + "\n"

    def submit(self, path: str, content: str) -> str:
        """Evaluates a new version of one file of the kernel: compiles it, checks it against the reference and times it against the baseline.

        Args:
            path: The file to replace, one of the files you may change (named in the task).
            content: The whole new contents of that file.

        Returns:
            The evaluation: status, reward, each case's correctness and times, compiler and runtime output.
        """
        if self._ep is None or self._ep.episode_id is None:
            raise RuntimeError("no open episode (reset first)")
        if self._ep.done:
            raise RuntimeError("the episode is over: no steps left")
        r = self._ep.step_files({path: content})
        if r.evaluated:
            self._reward = r.reward
        self.last_status = r.status
        return r.feedback

    def get_reward(self) -> float:
        """The rollout's reward: the scaled reward (text.scale_reward) of its last
        evaluated submission, NO_FILES_REWARD (0) when it submitted nothing. Closes the
        episode (TRL calls this once the rollout is over); never raises."""
        if self._ep is not None:
            self._ep.close_episode()
        return self._reward

    def _close(self) -> None:
        """Closes the episode and the client (never raises)."""
        if self._ep is not None:
            self._ep.close()
            self._ep = None


def environment_factory(url: Optional[str] = None, max_steps: int = 1, timeout_s: float = 900.0,
                        reward_cap: Optional[float] = None, tls: Optional[Dict[str, str]] = None):
    """The zero-argument factory to pass as GRPOTrainer(environment_factory=...): each
    call makes a KernelArenaTRLEnv on url (default $KERNELARENA_URL) with these
    settings (tls: a tls+tcp:// url's files, kernelarena.Client's tls)."""
    return functools.partial(KernelArenaTRLEnv, url=url, max_steps=max_steps,
                             timeout_s=timeout_s, reward_cap=reward_cap, tls=tls)


def trl_rows(rows: List[Mapping[str, Any]], system_prompt: Optional[str] = None) -> List[Dict[str, Any]]:
    """Dataset rows for TRL from rows of `envctl tasks --prompts`: task_id and seed
    kept, and a conversational prompt (an optional system message, then an empty user
    message that reset()'s text fills: TRL appends to the last message)."""
    out = []
    for r in rows:
        msgs = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + \
            [{"role": "user", "content": ""}]
        out.append({"prompt": msgs, "task_id": r["task_id"], "seed": r.get("seed")})
    return out
