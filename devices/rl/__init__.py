"""Clones as RL environments: Gymnasium environments, a vectorised form with snapshot/restore, an
HTTP rollout service with a thin client, and Ray actors for multi-host runs. See docs/rl.md.

Importing this package registers the Gymnasium ids (``gymnasium.make("devices.rl:realbench/bank-v1")``
imports it on the fly):

- ``realbench/train_ticketing-v1``, ``realbench/bank-v1`` and ``realbench/toy-v1``: the task packs
  under taskpacks/;
- ``realbench/clone-v1``: any pack, passed as ``pack=PATH``.
"""

from __future__ import annotations

import gymnasium

ENTRY_POINT = "devices.rl.gym_env:RealbenchEnv"
PACK_ENVS = {
    "realbench/train_ticketing-v1": "train_ticketing",
    "realbench/bank-v1": "bank",
    "realbench/toy-v1": "toy",
}
GENERIC_ENV = "realbench/clone-v1"


def register_envs() -> None:
    """Register the environment ids with Gymnasium (idempotent)."""
    for env_id, pack in PACK_ENVS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(env_id, entry_point=ENTRY_POINT, kwargs={"pack": pack})
    if GENERIC_ENV not in gymnasium.registry:
        gymnasium.register(GENERIC_ENV, entry_point=ENTRY_POINT)


register_envs()
