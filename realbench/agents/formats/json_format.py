"""realbench's own Action JSON, optionally inside a ```json fence, optionally wrapped as
``{"thought": "...", "action": {...}}``. Coordinates are normalised 0–1000."""

from __future__ import annotations

import json
import re
from typing import Any

from realbench.actions import Action, action_to_dict, parse_action
from realbench.agents.formats.base import (
    ActionFormat,
    CoordSpace,
    FormatError,
    clean_thought,
    first_json_object,
)
from realbench.agents.images import ImageSize

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)(?:```|$)", re.DOTALL)

ACTION_DOC = """{"type": "click", "x": X, "y": Y}
{"type": "double_click", "x": X, "y": Y}
{"type": "long_press", "x": X, "y": Y, "duration_ms": 800}
{"type": "swipe", "x": X, "y": Y, "x2": X2, "y2": Y2}   (the finger moves from (x, y) to (x2, y2))
{"type": "type", "text": "..."}   (types into the focused field)
{"type": "key", "key": "back" | "home" | "enter" | "recent"}
{"type": "open_app", "app": "..."}
{"type": "wait", "seconds": 1}
{"type": "answer", "text": "..."}   (the answer to a question; ends the task)
{"type": "terminate", "status": "success" | "failure"}   (ends the task)"""


class JsonFormat(ActionFormat):
    def __init__(self) -> None:
        self.coords = CoordSpace.NORM_1000
        self.name = "json"

    def system_prompt(self, screen: ImageSize) -> str:
        return (
            "You operate an Android phone to complete the user's task. Each turn you see the current "
            "screenshot and choose exactly one action.\n\n"
            "Coordinates are relative: 0-1000 on both axes, (0, 0) is the top-left corner and "
            "(1000, 1000) the bottom-right corner of the screen.\n\n"
            f"Actions (JSON):\n{ACTION_DOC}\n\n"
            "Reply with one short sentence of reasoning, then a JSON object in a ```json fence:\n"
            '```json\n{"thought": "...", "action": {"type": "click", "x": 500, "y": 300}}\n```'
        )

    def task_text(self, instruction: str, earlier_steps: list[str]) -> str:
        text = f"Task: {instruction}"
        if earlier_steps:
            text += "\nEarlier steps (screenshots omitted):\n" + "\n".join(earlier_steps)
        return text

    def render(self, action: Action, screen: ImageSize, thought: str | None = None) -> str:
        body: dict[str, Any] = {"action": action_to_dict(action)}
        if thought:
            body = {"thought": thought, **body}
        return "```json\n" + json.dumps(body, ensure_ascii=False) + "\n```"

    def split(self, text: str) -> tuple[str | None, str]:
        m = _FENCE.search(text)
        if m and "{" in m.group(1):
            before, body = text[: m.start()], m.group(1)
        else:
            found = first_json_object(text)
            if found is None:
                return clean_thought(text), text
            before, body = text[: found[1]], text[found[1] : found[2]]
        thought = clean_thought(before)
        if thought is None:
            found = first_json_object(body)
            if found is not None and isinstance(found[0], dict) and isinstance(found[0].get("thought"), str):
                thought = found[0]["thought"].strip() or None
        return thought, body

    def parse_action_text(self, body: str, screen: ImageSize) -> Action:
        found = first_json_object(body)
        if found is None:
            raise FormatError("no JSON object in the output", field="type")
        value = found[0]
        if not isinstance(value, dict):
            raise FormatError("the JSON is not an object", field="type")
        if isinstance(value.get("action"), dict):
            value = value["action"]
        value = {k: v for k, v in value.items() if k != "thought"}
        if "type" not in value and "action_type" in value:
            value["type"] = value.pop("action_type")
        for key in ("x", "y", "x2", "y2"):
            # models write 512.0 as often as 512; the grid is integral
            if isinstance(value.get(key), float):
                value[key] = round(value[key])
        return parse_action(value)
