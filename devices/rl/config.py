"""Typed configuration of one RL environment: which pack and task, what the policy sees, how it is rewarded."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from realbench.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[2]
TASKPACKS = REPO_ROOT / "taskpacks"
DEFAULT_SHORT_SIDE = 448


class ImageMode(StrEnum):
    """How the screenshot appears in the observation."""

    ARRAY = "array"  # uint8 array (height, width, 3), RGB
    JPEG = "jpeg"  # the encoded JPEG bytes as a 1-D uint8 array
    PNG = "png"  # the encoded PNG bytes as a 1-D uint8 array (lossless, slower)

    @property
    def wire_format(self) -> str:
        """What the browser encodes: PNG only when PNG is asked for (arrays decode from JPEG)."""
        return "png" if self is ImageMode.PNG else "jpeg"


class RewardConfig(BaseModel):
    """Reward = success at episode end (verifier), optional shaping by verifier progress, penalties.

    - terminal: ``success_reward`` if the verifier succeeds with no side effects, else 0;
      minus ``side_effect_penalty`` when the verifier or a side-effect check found side effects;
    - ``shaped``: every step also earns the change in the verifier's progress (0–1), a potential-based
      shaping whose sum over an episode is the final progress minus the starting progress;
    - ``format_error_penalty`` is subtracted for every action that does not parse.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    success_reward: float = 1.0
    shaped: bool = False
    format_error_penalty: float = Field(default=0.0, ge=0.0)
    side_effect_penalty: float = Field(default=0.0, ge=0.0)


class EnvConfig(BaseModel):
    """One environment. `pack` is a pack.yaml or its folder; `task_id` fixes the task (else each reset
    samples one from the pack with the reset's seed, or takes ``options["task_id"]``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pack: str = Field(min_length=1)
    task_id: str | None = None
    short_side: int = Field(default=DEFAULT_SHORT_SIDE, ge=64, le=2400)
    image: ImageMode = ImageMode.ARRAY
    jpeg_quality: int = Field(default=80, ge=10, le=100)
    hierarchy: bool = True
    max_steps: int | None = Field(default=None, ge=1, le=500)
    max_format_errors: int = Field(default=3, ge=1, le=100)
    strict_actions: bool = False  # True: an unparseable action is an ActionError, not a format error
    # Raw model text in a realbench format (``qwen-mobile``, ``ui-tars``...) instead of Action JSON;
    # pixel coordinates are read against the screenshot resized by the format's image policy
    # (``action_max_pixels`` overrides its budget), the size the model was shown.
    action_format: str | None = None
    action_max_pixels: int | None = Field(default=None, ge=28 * 28)
    reward: RewardConfig = Field(default_factory=RewardConfig)
    drift: str | dict[str, Any] | None = None
    # Reuse a host's earlier capture and dump of a still screen that a reset or restore swaps in, and
    # a page's last capture after a step that left the still page as it was (both checked against
    # new ones now and then; devices/rl/screen_cache.py). Off: every reset and step is captured.
    screen_cache: bool = True

    def pack_path(self) -> Path:
        return resolve_pack(self.pack)

    @model_validator(mode="after")
    def _known_format(self) -> EnvConfig:
        if self.action_format is not None:
            from realbench.agents.formats import get_format

            get_format(self.action_format)  # an unknown name fails here, with the known ones
        return self


def resolve_pack(pack: str | Path) -> Path:
    """A pack path as given, else relative to the repository, else `taskpacks/<name>`."""
    for candidate in (Path(pack), REPO_ROOT / pack, TASKPACKS / str(pack)):
        if candidate.exists():
            return candidate.resolve()
    raise ConfigError(
        f"no task pack at {pack}",
        hint=f"pass a pack.yaml, a folder holding one, or a name under {TASKPACKS}",
    )
