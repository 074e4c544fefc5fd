"""Gymnasium spaces of the clone environments, and the conversion of observations into them.

Action space: a `gymnasium.spaces.Text` holding one action in realbench's Action JSON, e.g.
``{"type": "click", "x": 500, "y": 120}`` (coordinates normalised to 0–1000; see
`realbench.actions`). Any string is a valid element of the space; one that does not parse is a
format error (penalised, and ends the episode after `max_format_errors` in a row), never an
exception. The charset is all of Unicode's basic plane, so typed Chinese text is in the space.

Observation space: a `Dict` with
- ``screenshot``: ``Box(0, 255, (height, width, 3), uint8)`` (RGB) in ``image="array"`` mode, or
  the encoded JPEG/PNG bytes as a 1-D uint8 array (``Sequence`` of bytes) in ``"jpeg"``/``"png"``;
- ``hierarchy``: the Android-style UI hierarchy XML (``Text``), when ``hierarchy=True``.
The task instruction is in ``info["instruction"]`` (it does not change within an episode).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from devices.clone_browser import Emulation
from devices.rl.config import EnvConfig, ImageMode
from devices.rl.transitions import EnvObservation

ACTION_MAX_CHARS = 4096
HIERARCHY_MAX_CHARS = 4_000_000


@functools.cache
def unicode_charset() -> str:
    """Every character of Unicode's basic multilingual plane except surrogates and C0 controls
    other than tab and newlines (a string: Gymnasium keeps its order instead of sorting a set)."""
    return "\t\n\r" + "".join(chr(c) for c in range(0x20, 0x10000) if not 0xD800 <= c <= 0xDFFF)


def action_space() -> spaces.Text:
    return spaces.Text(max_length=ACTION_MAX_CHARS, min_length=0, charset=unicode_charset())


def screen_size(config: EnvConfig) -> tuple[int, int]:
    """Screenshot (width, height) in pixels for the configured short side."""
    return Emulation.for_short_side(config.short_side).pixel_size


def observation_space(config: EnvConfig) -> spaces.Dict:
    width, height = screen_size(config)
    shot: spaces.Space[Any]
    if config.image is ImageMode.ARRAY:
        shot = spaces.Box(0, 255, shape=(height, width, 3), dtype=np.uint8)
    else:
        shot = spaces.Sequence(spaces.Discrete(256), stack=True)  # the encoded bytes
    parts: dict[str, spaces.Space[Any]] = {"screenshot": shot}
    if config.hierarchy:
        parts["hierarchy"] = spaces.Text(
            max_length=HIERARCHY_MAX_CHARS, min_length=0, charset=unicode_charset()
        )
    return spaces.Dict(parts)


def batched(space: spaces.Space[Any], n: int) -> spaces.Space[Any]:
    """`gymnasium.vector.utils.batch_space`, except that a Text space is shared by the batch's
    Tuple instead of deep-copied n times (a copy of the Unicode charset costs ~0.1 s each)."""
    if isinstance(space, spaces.Dict):
        return spaces.Dict({k: batched(v, n) for k, v in space.spaces.items()})
    if isinstance(space, spaces.Text | spaces.Sequence):
        return spaces.Tuple([space] * n)
    return batch_space(space, n)


def to_gym_observation(
    obs: EnvObservation, config: EnvConfig, pixels: np.ndarray | None = None
) -> dict[str, Any]:
    """`obs` as the observation space has it; `pixels`: its screenshot already decoded (arrays only)."""
    if config.image is not ImageMode.ARRAY:
        shot = np.frombuffer(obs.image, dtype=np.uint8).copy()
    else:
        shot = obs.pixels() if pixels is None else pixels
    out: dict[str, Any] = {"screenshot": shot}
    if config.hierarchy:
        out["hierarchy"] = obs.hierarchy or ""
    return out
