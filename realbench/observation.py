"""What a device shows the agent at one step."""

from __future__ import annotations

import io
import time
from dataclasses import dataclass, field
from enum import StrEnum


class ImageFormat(StrEnum):
    PNG = "png"
    JPEG = "jpeg"

    @property
    def suffix(self) -> str:
        return ".png" if self is ImageFormat.PNG else ".jpg"

    @classmethod
    def sniff(cls, data: bytes) -> ImageFormat:
        if data[:8] == b"\x89PNG\r\n\x1a\n":
            return cls.PNG
        if data[:2] == b"\xff\xd8":
            return cls.JPEG
        raise ValueError("image is neither PNG nor JPEG")


@dataclass(frozen=True)
class Screenshot:
    """An encoded screenshot with its pixel size."""

    data: bytes
    width: int
    height: int
    format: ImageFormat

    @classmethod
    def from_bytes(cls, data: bytes) -> Screenshot:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as img:
            width, height = img.size
        return cls(data=data, width=width, height=height, format=ImageFormat.sniff(data))

    def to_pixels(self, x: int, y: int) -> tuple[int, int]:
        """Normalised 0–1000 coordinates to pixels of this screenshot."""
        return (round(x * (self.width - 1) / 1000), round(y * (self.height - 1) / 1000))


@dataclass(frozen=True)
class Observation:
    """Screenshot, optional Android-style hierarchy XML, foreground app and wall time."""

    screenshot: Screenshot
    hierarchy: str | None = None
    app: str | None = None
    time: float = field(default_factory=time.time)
