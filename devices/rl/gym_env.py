"""The Gymnasium environment of one clone task (``gymnasium.make("realbench/train_ticketing-v1", ...)``).

Spaces are described in `devices.rl.spaces`; rewards in `devices.rl.config.RewardConfig`; episode
ends in `devices.rl.core`. Environments of one process share one clone server and one browser per
resolution (`devices.rl.host`); for many environments use `devices.rl.vector.CloneVectorEnv`.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

from devices.rl.config import EnvConfig, RewardConfig
from devices.rl.errors import EnvNotFound, ErrorInfo
from devices.rl.host import (
    EnvHost,
    ResetRequest,
    RestoreRequest,
    StepRequest,
    acquire_shared_host,
    release_shared_host,
)
from devices.rl.spaces import action_space, observation_space, to_gym_observation
from devices.rl.transitions import EnvSnapshot, Transition


def make_config(config: EnvConfig | dict[str, Any] | None, overrides: dict[str, Any]) -> EnvConfig:
    """An EnvConfig from a config (object or dict) plus keyword overrides (None values ignored)."""
    base: dict[str, Any] = {}
    if isinstance(config, EnvConfig):
        base = config.model_dump()
    elif isinstance(config, dict):
        base = dict(config)
    base.update({k: v for k, v in overrides.items() if v is not None})
    if isinstance(base.get("reward"), RewardConfig):
        base["reward"] = base["reward"].model_dump()
    return EnvConfig.model_validate(base)


def unwrap(result: Any) -> Any:
    if isinstance(result, ErrorInfo):
        raise result.to_exception()
    return result


class RealbenchEnv(gym.Env[dict[str, Any], str]):
    """One clone environment. Keyword arguments are `EnvConfig` fields (``pack``, ``task_id``,
    ``short_side``, ``image``, ``hierarchy``, ``max_steps``, ``reward``...) or ``config=``."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 2}

    def __init__(
        self,
        pack: str | None = None,
        task_id: str | None = None,
        *,
        config: EnvConfig | dict[str, Any] | None = None,
        render_mode: str | None = None,
        host: EnvHost | None = None,
        **fields: Any,
    ) -> None:
        self.config = make_config(config, {"pack": pack, "task_id": task_id, **fields})
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise gym.error.Error(f"render_mode must be one of {self.metadata['render_modes']}")
        self.render_mode = render_mode
        self.action_space = action_space()
        self.observation_space = observation_space(self.config)
        self._own_host = host is None
        self._host = host or acquire_shared_host()
        self._holds_host = True
        self._env_id: int | None = None
        self._last: Transition | None = None
        try:
            self._env_id = unwrap(self._host.create([self.config])[0])
        except BaseException:
            self._release()
            raise

    @property
    def env_id(self) -> int:
        if self._env_id is None:
            raise EnvNotFound("this environment is closed", hint="make a new one")
        return self._env_id

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        result: Transition = unwrap(self._host.reset([ResetRequest(self.env_id, seed, options)])[0])
        self._last = result
        return to_gym_observation(result.observation, self.config), result.info

    def step(self, action: str) -> tuple[dict[str, Any], SupportsFloat, bool, bool, dict[str, Any]]:
        result: Transition = unwrap(self._host.step([StepRequest(self.env_id, action)])[0])
        self._last = result
        return (
            to_gym_observation(result.observation, self.config),
            result.reward,
            result.terminated,
            result.truncated,
            result.info,
        )

    def snapshot(self) -> EnvSnapshot:
        """The environment mid-episode, to restore here or into another environment of the same clone."""
        return unwrap(self._host.snapshot([self.env_id])[0])

    def restore(self, snapshot: EnvSnapshot) -> tuple[dict[str, Any], dict[str, Any]]:
        result: Transition = unwrap(self._host.restore([RestoreRequest(self.env_id, snapshot)])[0])
        self._last = result
        return to_gym_observation(result.observation, self.config), result.info

    def verdict(self) -> dict[str, Any]:
        """The verifier's verdict on the current state (what the terminal reward is computed from)."""
        return unwrap(self._host.verdict([self.env_id])[0])

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array" or self._last is None:
            return None
        return self._last.observation.pixels()

    def close(self) -> None:
        if self._env_id is not None:
            env_id, self._env_id = self._env_id, None
            self._host.close_envs([env_id])
        self._release()
        super().close()

    def _release(self) -> None:
        if self._holds_host and self._own_host:
            release_shared_host(self._host)
        self._holds_host = False
