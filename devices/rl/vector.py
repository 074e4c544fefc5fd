"""N clone environments stepped together, over one browser per worker process (and resolution).

`CloneVectorEnv` is a `gymnasium.vector.VectorEnv` without autoreset: an environment whose episode
ended waits for ``reset(options={"reset_mask": mask})``, and a ``None`` action leaves an
environment untouched for that step (its last observation is repeated with reward 0 and
``info["skipped"]``). `snapshot(i)` and `restore(snapshot, indices)` branch a group of rollouts
from one state (GRPO-style): restored environments continue from the same screen, step count
and verifier baseline.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from devices.rl.batch_arrays import BatchArrays
from devices.rl.config import EnvConfig
from devices.rl.errors import ErrorInfo
from devices.rl.gym_env import make_config, unwrap
from devices.rl.pool import EnvPool
from devices.rl.spaces import action_space, batched, observation_space, to_gym_observation
from devices.rl.transitions import EnvSnapshot, Transition
from devices.rl.workers import Backend
from realbench.errors import ConfigError

DECODE_THREADS = 4


class CloneVectorEnv(gym.vector.VectorEnv[dict[str, Any], Any, Any]):
    """`num_envs` environments of one configuration over `workers` workers (``backend``: "process",
    "inline" or "ray"). Keyword arguments are `EnvConfig` fields, or ``config=``. ``renderers``:
    renderer processes per worker's browser (default: process workers share this machine's cores,
    `devices.rl.workers.renderers_per_browser`)."""

    metadata = {"autoreset_mode": AutoresetMode.DISABLED}

    def __init__(
        self,
        num_envs: int,
        pack: str | None = None,
        task_id: str | None = None,
        *,
        config: EnvConfig | dict[str, Any] | None = None,
        workers: int = 1,
        backend: Backend | str = Backend.PROCESS,
        imports: tuple[str, ...] = (),
        ray_address: str | None = None,
        pool: EnvPool | None = None,
        renderers: int | None = None,
        **fields: Any,
    ) -> None:
        if num_envs < 1:
            raise ConfigError("num_envs must be at least 1")
        self.config = make_config(config, {"pack": pack, "task_id": task_id, **fields})
        self.num_envs = num_envs
        self.single_action_space = action_space()
        self._single_spaces = observation_space(self.config)
        self.single_observation_space = self._single_spaces
        self.action_space = batched(self.single_action_space, num_envs)
        self._last: list[Transition | None] = [None] * num_envs
        self._obs: list[dict[str, Any] | None] = [None] * num_envs
        # the encoded screenshot each environment's observation in `_obs` was decoded from
        self._encoded: list[bytes | None] = [None] * num_envs
        self._decoders = ThreadPoolExecutor(max_workers=DECODE_THREADS, thread_name_prefix="rl-decode")
        self._batches = BatchArrays()
        self._own_pool = pool is None
        self.pool = pool or EnvPool(
            backend=backend, workers=workers, imports=imports, ray_address=ray_address, renderers=renderers
        )
        try:
            self.keys: list[int] = [int(unwrap(k)) for k in self.pool.create([self.config] * num_envs)]
        except BaseException:
            if self._own_pool:
                self.pool.close()
            raise

    @functools.cached_property
    def observation_space(self) -> gym.spaces.Dict:  # type: ignore[override]
        """Built on first use: a batched image Box materialises its bounds (2 x N x H x W x 3 bytes)."""
        space = batched(self.single_observation_space, self.num_envs)
        assert isinstance(space, gym.spaces.Dict)
        return space

    # --- Gymnasium API ---

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        indices = list(range(self.num_envs)) if mask is None else [i for i in range(self.num_envs) if mask[i]]
        if seed is None:
            seeds: list[int | None] = [None] * self.num_envs
        elif isinstance(seed, int):
            seeds = [seed + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ConfigError(f"{len(seeds)} seeds for {self.num_envs} environments")
        results = self.pool.reset([(self.keys[i], seeds[i], options or None) for i in indices])
        for i, result in zip(indices, results, strict=True):
            self._last[i] = unwrap(result)
        return self._batch(indices, {i: self._last[i] for i in indices})

    def step(
        self, actions: Sequence[Any]
    ) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        actions = list(actions)
        if len(actions) != self.num_envs:
            raise ConfigError(f"{len(actions)} actions for {self.num_envs} environments")
        live = [i for i, a in enumerate(actions) if a is not None]
        results = self.pool.step([(self.keys[i], actions[i]) for i in live])
        fresh: dict[int, Transition | None] = {}
        for i, result in zip(live, results, strict=True):
            self._last[i] = fresh[i] = unwrap(result)
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        for i, t in fresh.items():
            assert t is not None
            rewards[i], terminated[i], truncated[i] = t.reward, t.terminated, t.truncated
        obs, infos = self._batch(live, fresh, skipped=[i for i in range(self.num_envs) if i not in fresh])
        return obs, rewards, terminated, truncated, infos

    def close_extras(self, **kwargs: Any) -> None:
        if getattr(self, "pool", None) is None:
            return
        self._decoders.shutdown(wait=False)
        if self._own_pool:
            self.pool.close()
        else:
            self.pool.close_envs(self.keys)

    # --- branching ---

    def snapshot(self, index: int) -> EnvSnapshot:
        """Environment `index` mid-episode."""
        return unwrap(self.pool.snapshot([self.keys[index]])[0])

    def restore(self, snapshot: EnvSnapshot, indices: Sequence[int]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Put the environments `indices` into `snapshot` (the same one for all: a GRPO group)."""
        indices = list(indices)
        results = self.pool.restore([(self.keys[i], snapshot) for i in indices])
        errors = [r for r in results if isinstance(r, ErrorInfo)]
        if errors:
            raise errors[0].to_exception()
        for i, result in zip(indices, results, strict=True):
            self._last[i] = unwrap(result)
        return self._batch(indices, {i: self._last[i] for i in indices})

    def branch(self, source: int, targets: Sequence[int]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Snapshot environment `source` and restore it into `targets`."""
        return self.restore(self.snapshot(source), targets)

    def verdicts(self) -> list[dict[str, Any]]:
        """The verifier's verdict on every environment's current state."""
        return [unwrap(v) for v in self.pool.verdict(self.keys)]

    # --- helpers ---

    def _batch(
        self, indices: list[int], fresh: dict[int, Transition | None], skipped: list[int] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The batched observation of every environment (the last one where nothing new came)."""
        todo = [(i, t) for i, t in fresh.items() if t is not None]
        # A step that left the screen as it was brings the same bytes again (a tap on nothing:
        # about two steps in three of rl_envs.py's random ones): their pixels are decoded already.
        # The arrays kept here are never handed out, only stacked into the batch.
        again = {i for i, t in todo if self._encoded[i] == t.observation.image and self._obs[i] is not None}
        fresh_images = [(i, t) for i, t in todo if i not in again]
        if len(fresh_images) > 1:
            # JPEG decoding releases the GIL: decode a batch's screenshots on a few threads.
            decoded = list(
                self._decoders.map(
                    lambda it: to_gym_observation(it[1].observation, self.config), fresh_images
                )
            )
        else:
            decoded = [to_gym_observation(t.observation, self.config) for _, t in fresh_images]
        for (i, t), obs in zip(fresh_images, decoded, strict=True):
            self._obs[i] = obs
            self._encoded[i] = t.observation.image
        for i, t in todo:
            last = self._obs[i]
            if i in again and last is not None:
                self._obs[i] = to_gym_observation(t.observation, self.config, pixels=last["screenshot"])
        observations = [o for o in self._obs if o is not None]
        if len(observations) != self.num_envs:
            missing = [i for i, o in enumerate(self._obs) if o is None]
            raise ConfigError(
                f"environments {missing} have not been reset yet",
                hint="call reset() on all environments first",
            )
        batched: dict[str, Any] = {}
        for name in observations[0]:
            values = [o[name] for o in observations]
            image = isinstance(self._single_spaces[name], gym.spaces.Box)
            batched[name] = self._batches.stack(values) if image else tuple(values)
        infos: dict[str, Any] = {}
        for i, t in todo:
            infos = self._add_info(infos, {**t.info, "skipped": False}, i)
        for i in skipped or []:
            infos = self._add_info(infos, {"skipped": True}, i)
        return batched, infos
