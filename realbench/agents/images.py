"""Image preparation for VLM prompts: Qwen-style smart resize and base64 data URLs.

Every checkpoint sees screenshots prepared by the same `ImagePolicy`, so a base and a trained
model differ only in their weights, never in what they were shown.
"""

from __future__ import annotations

import base64
import io
import math
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from realbench.errors import ConfigError
from realbench.observation import Screenshot

# Qwen2-VL merges 2×2 patches of 14 px, so both sides must be multiples of 28.
QWEN_FACTOR = 28
# The largest aspect ratio Qwen's processor accepts.
MAX_ASPECT_RATIO = 200


class ImageEncoding(StrEnum):
    PNG = "png"
    JPEG = "jpeg"


class ImagePolicy(BaseModel):
    """How screenshots are resized and encoded before they are sent to a model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_pixels: int = Field(default=1280 * QWEN_FACTOR * QWEN_FACTOR, ge=QWEN_FACTOR * QWEN_FACTOR)
    min_pixels: int = Field(default=4 * QWEN_FACTOR * QWEN_FACTOR, ge=1)
    factor: int = Field(default=QWEN_FACTOR, ge=1)
    short_side: int | None = Field(default=None, ge=QWEN_FACTOR)
    encoding: ImageEncoding = ImageEncoding.PNG
    jpeg_quality: int = Field(default=90, ge=30, le=100)

    @model_validator(mode="after")
    def _ordered(self) -> ImagePolicy:
        if self.min_pixels > self.max_pixels:
            raise ValueError("min_pixels must not exceed max_pixels")
        return self


@dataclass(frozen=True)
class ImageSize:
    width: int
    height: int


@dataclass(frozen=True)
class PreparedImage:
    """A screenshot as the model sees it: resized, encoded, with both sizes kept for coordinates."""

    data_url: str
    size: ImageSize
    original: ImageSize
    data: bytes


def _round_by(value: float, factor: int) -> int:
    return round(value / factor) * factor


def _floor_by(value: float, factor: int) -> int:
    return math.floor(value / factor) * factor


def _ceil_by(value: float, factor: int) -> int:
    return math.ceil(value / factor) * factor


def smart_resize(
    height: int,
    width: int,
    *,
    factor: int = QWEN_FACTOR,
    min_pixels: int = 4 * QWEN_FACTOR * QWEN_FACTOR,
    max_pixels: int = 1280 * QWEN_FACTOR * QWEN_FACTOR,
) -> tuple[int, int]:
    """Qwen2-VL's resize rule: sides multiples of `factor`, area within [min_pixels, max_pixels],
    aspect ratio kept as closely as the grid allows. Returns (height, width)."""
    if height <= 0 or width <= 0:
        raise ConfigError(f"cannot resize an image of {width}x{height}", hint="the screenshot is empty")
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        raise ConfigError(
            f"aspect ratio of {width}x{height} exceeds {MAX_ASPECT_RATIO}",
            hint="the screenshot is degenerate; check the device's screen capture",
        )
    h_bar = max(factor, _round_by(height, factor))
    w_bar = max(factor, _round_by(width, factor))
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, _floor_by(height / beta, factor))
        w_bar = max(factor, _floor_by(width / beta, factor))
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = _ceil_by(height * beta, factor)
        w_bar = _ceil_by(width * beta, factor)
    return h_bar, w_bar


def target_size(width: int, height: int, policy: ImagePolicy) -> ImageSize:
    """The size a screenshot of `width`×`height` is resized to under `policy`."""
    if policy.short_side is not None and min(width, height) > policy.short_side:
        scale = policy.short_side / min(width, height)
        width, height = max(1, round(width * scale)), max(1, round(height * scale))
    h, w = smart_resize(
        height, width, factor=policy.factor, min_pixels=policy.min_pixels, max_pixels=policy.max_pixels
    )
    return ImageSize(width=w, height=h)


def prepare_image(screenshot: Screenshot, policy: ImagePolicy) -> PreparedImage:
    """Resize and encode a screenshot under `policy` into a data URL."""
    from PIL import Image

    size = target_size(screenshot.width, screenshot.height, policy)
    with Image.open(io.BytesIO(screenshot.data)) as img:
        work = img.convert("RGB")
        if (work.width, work.height) != (size.width, size.height):
            work = work.resize((size.width, size.height), Image.Resampling.BICUBIC)
        buf = io.BytesIO()
        if policy.encoding is ImageEncoding.JPEG:
            work.save(buf, format="JPEG", quality=policy.jpeg_quality)
            mime = "image/jpeg"
        else:
            work.save(buf, format="PNG", optimize=False)
            mime = "image/png"
    data = buf.getvalue()
    url = f"data:{mime};base64," + base64.b64encode(data).decode("ascii")
    return PreparedImage(
        data_url=url,
        size=size,
        original=ImageSize(screenshot.width, screenshot.height),
        data=data,
    )


def decode_data_url(url: str) -> tuple[str, bytes]:
    """Split a ``data:<mime>;base64,<payload>`` URL into (mime, bytes); raises ValueError if malformed."""
    if not url.startswith("data:") or ";base64," not in url:
        raise ValueError("not a base64 data URL")
    head, payload = url.split(",", 1)
    mime = head[5:].split(";", 1)[0]
    return mime, base64.b64decode(payload, validate=True)
