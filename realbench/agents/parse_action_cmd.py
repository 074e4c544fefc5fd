"""`realbench parse-action`: what a model output becomes, for when a model "does nothing".

Runs the format's own parser (the one `realbench run` uses) on one output and prints the realbench
actions as JSON, the follow-ups included (UI-TARS's ``type(content='…\\n')`` is Type then Enter),
or the format error the episode would have recorded.
"""

from __future__ import annotations

import json
import re
from typing import Any

from realbench.agents.formats import get_format
from realbench.agents.images import ImageSize
from realbench.errors import ConfigError

# A portrait phone screenshot after Qwen's default resize (1080x2400 → 868x1932 at 1280 tokens).
DEFAULT_IMAGE_SIZE = ImageSize(868, 1932)


def parse_image_size(text: str | None) -> ImageSize:
    if text is None:
        return DEFAULT_IMAGE_SIZE
    m = re.fullmatch(r"\s*(\d+)\s*[xX×]\s*(\d+)\s*", text)
    if not m or int(m.group(1)) == 0 or int(m.group(2)) == 0:
        raise ConfigError(f"image size {text!r} is not WIDTHxHEIGHT", hint="e.g. --image-size 868x1932")
    return ImageSize(int(m.group(1)), int(m.group(2)))


def parse_model_output(format_name: str, text: str, image_size: ImageSize) -> dict[str, Any]:
    """The JSON `parse-action` prints: ok, the actions (or the error) and the thought."""
    fmt = get_format(format_name)
    parsed = fmt.parse(text, image_size)
    out: dict[str, Any] = {
        "format": fmt.name,
        "image_size": [image_size.width, image_size.height],
        "coords": fmt.coords.value,
        "thought": parsed.thought,
    }
    if parsed.action is None:
        return {**out, "ok": False, "error": parsed.error}
    actions = [parsed.action, *parsed.then]
    return {**out, "ok": True, "actions": [a.model_dump(mode="json") for a in actions]}


def render(result: dict[str, Any]) -> str:
    return json.dumps(result, ensure_ascii=False, indent=2)
