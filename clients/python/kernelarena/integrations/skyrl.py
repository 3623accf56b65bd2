"""SkyRL-gym integration: kernelarena as a skyrl_gym BaseTextEnv (docs/trainers.md,
"SkyRL"). Needs skyrl-gym (pip install skyrl-gym==0.4.0).

    import skyrl_gym, kernelarena.integrations.skyrl       # registers "kernelarena"
    env = skyrl_gym.make("kernelarena", env_config={"url": URL, "max_steps": 2},
                         extras={"task_id": "host/gelu", "seed": 7})
    chat, meta = env.init([])              # [{"role": "user", "content": prompt}]
    out = env.step(model_reply)            # observations, reward, done, metadata

env_config (the trainer's environment config: a dict or an OmegaConf node): url
(default $KERNELARENA_URL), max_steps (1), timeout_s (900), reward_cap (None); for a
tls+tcp:// url tls_ca, tls_cert, tls_key, tls_server_name (kernelarena.Client's tls;
default $KA_TLS_CA, ...).
extras (the dataset row's env_extras; the rows of `envctl tasks --prompts` carry both):
task_id (required), seed (optional).

The reward is the scaled reward of the text layer (scale_reward: reward / 100); a
reply that names no editable file scores 0 without an evaluation and gets the reply
format as its feedback. Server faults raise KernelArenaError (see .retryable).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import skyrl_gym
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from .text import TextEpisode, tls_options

ENV_ID = "kernelarena"


def _get(cfg: Any, key: str, default: Any) -> Any:
    if cfg is None:
        return default
    if isinstance(cfg, dict):
        return cfg.get(key, default)
    return getattr(cfg, key, default) if hasattr(cfg, key) else default


class KernelArenaSkyRLEnv(BaseTextEnv):
    """One kernelarena episode as a SkyRL text environment (one per trajectory, as
    SkyRL's generator makes them). Thread-safe across instances (each has its own
    client); one instance serves one trajectory."""

    def __init__(self, env_config: Any = None, extras: Optional[Dict[str, Any]] = None):
        super().__init__()
        extras = dict(extras or {})
        if not extras.get("task_id"):
            raise ValueError("kernelarena: extras['task_id'] is required (a row of "
                             "`envctl tasks --prompts` has it)")
        self.max_turns = int(_get(env_config, "max_steps", 1))
        seed = extras.get("seed")
        self.seed: Optional[int] = None if seed is None else int(seed)
        self.episode = TextEpisode(extras["task_id"], url=_get(env_config, "url", None),
                                   max_steps=self.max_turns,
                                   timeout_s=float(_get(env_config, "timeout_s", 900.0)),
                                   reward_cap=_get(env_config, "reward_cap", None),
                                   tls=tls_options(lambda k: _get(env_config, k, None)))
        self._metrics: Dict[str, Any] = {}

    def init(self, prompt: List[Dict[str, str]]) -> Tuple[List[Dict[str, str]], Dict[str, Any]]:
        """Starts the episode; returns the conversation: the prompt's system messages,
        then the task's prompt (with the current files and the reply format) as the user
        message."""
        text = self.episode.reset(seed=self.seed)
        system = [m for m in (prompt or []) if m.get("role") == "system"]
        return system + [{"role": "user", "content": text}], {
            "episode_id": self.episode.episode_id, "seed": self.episode.seed}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """Evaluates the files of the model's reply; the feedback is the next user
        message unless the episode is done."""
        self.turns += 1
        r = self.episode.step(action)
        self._metrics = {"status": r.status, "raw_reward": r.raw_reward, **r.components}
        obs = [] if r.done else [{"role": "user", "content": r.feedback}]
        return BaseTextEnvStepOutput(observations=obs, reward=r.reward, done=r.done,
                                     metadata={"status": r.status, "feedback": r.feedback,
                                               "raw_reward": r.raw_reward,
                                               "components": r.components,
                                               "episode_id": self.episode.episode_id})

    def get_metrics(self) -> Dict[str, Any]:
        """The last step's components and raw reward (numbers; SkyRL averages them) and
        its status label."""
        return dict(self._metrics)

    def close(self):
        """Closes the episode and the client (never raises)."""
        self.episode.close()


if ENV_ID not in skyrl_gym.registry:
    skyrl_gym.register(id=ENV_ID, entry_point="kernelarena.integrations.skyrl:KernelArenaSkyRLEnv")
