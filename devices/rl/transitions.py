"""What environments return, as plain picklable data: observations, transitions and snapshots.

Screenshots travel encoded (JPEG by default, a few tens of kB) between worker processes, Ray
actors and the rollout service; they become arrays only where a policy consumes them.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from realbench.observation import ImageFormat

State = dict[str, Any]


def decode_jpeg_rgb(data: bytes) -> np.ndarray | None:
    """A JPEG decoded by OpenCV straight into an RGB array, or None where OpenCV cannot read it (a
    truncated file among them). OpenCV and Pillow both decode with libjpeg-turbo, and their pixels
    are equal (tests/test_rl_pixels.py); Pillow's array is a copy of its image, so OpenCV's decode
    takes about 40 % less CPU at 448 px (docs/benchmarks.md)."""
    import cv2

    decoded: np.ndarray | None = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_COLOR_RGB)
    return decoded


def decode_rgb_with_pil(data: bytes) -> np.ndarray:
    """Any image Pillow reads, as an RGB uint8 array (height, width, 3)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:
        img.load()
        # a JPEG decodes to RGB already; converting copied it once more
        rgb = img if img.mode == "RGB" else img.convert("RGB")
        return np.asarray(rgb, dtype=np.uint8)


@dataclass(frozen=True)
class EnvObservation:
    """One screen: the encoded screenshot, its pixel size, and the UI hierarchy (Android-style XML)."""

    image: bytes
    format: ImageFormat
    width: int
    height: int
    hierarchy: str | None = None

    def pixels(self) -> np.ndarray:
        """The screenshot as an RGB uint8 array (height, width, 3)."""
        if self.format is ImageFormat.JPEG:
            decoded = decode_jpeg_rgb(self.image)
            if decoded is not None:
                return decoded
        return decode_rgb_with_pil(self.image)

    def to_json(self, *, hierarchy: bool = True) -> dict[str, Any]:
        return {
            "screenshot": {
                "format": self.format.value,
                "width": self.width,
                "height": self.height,
                "data": base64.b64encode(self.image).decode("ascii"),
            },
            "hierarchy": self.hierarchy if hierarchy else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EnvObservation:
        shot = data["screenshot"]
        return cls(
            image=base64.b64decode(shot["data"]),
            format=ImageFormat(shot["format"]),
            width=int(shot["width"]),
            height=int(shot["height"]),
            hierarchy=data.get("hierarchy"),
        )


@dataclass
class Transition:
    """The answer to a reset (reward 0, not done) or a step."""

    observation: EnvObservation
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    def to_json(self, *, hierarchy: bool = True) -> dict[str, Any]:
        return {
            "observation": self.observation.to_json(hierarchy=hierarchy),
            "reward": self.reward,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "info": self.info,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Transition:
        return cls(
            observation=EnvObservation.from_json(data["observation"]),
            reward=float(data["reward"]),
            terminated=bool(data["terminated"]),
            truncated=bool(data["truncated"]),
            info=dict(data.get("info") or {}),
        )


@dataclass
class EnvSnapshot:
    """An environment mid-episode: the clone state plus the episode's bookkeeping.

    Restoring it into any environment of the same clone and pack (in this process or another) puts
    that environment exactly there: same screen, same step count, same verifier baseline. Page
    scroll offsets are not part of the clone state and start at the top after a restore.
    """

    clone: str
    pack: str
    task_id: str
    seed: int
    params: dict[str, Any]
    instruction: str
    state: State
    before: State
    steps: int
    format_errors: int
    consecutive_format_errors: int
    progress: float
    episode_return: float
