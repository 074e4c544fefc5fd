"""Actions an agent can take, as validated values with one JSON form.

Coordinates are normalised to 0–1000 on both axes (0 = left/top, 1000 = right/bottom); each
driver converts them to its own pixels. The JSON form is a flat object with a ``type`` field,
e.g. ``{"type": "click", "x": 500, "y": 120}``.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from realbench.errors import ActionError

COORD_MAX = 1000
Coord = Annotated[int, Field(ge=0, le=COORD_MAX)]


class Key(StrEnum):
    BACK = "back"
    HOME = "home"
    ENTER = "enter"
    RECENT = "recent"


class TerminateStatus(StrEnum):
    SUCCESS = "success"
    FAILURE = "failure"


class _ActionBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @property
    def is_final(self) -> bool:
        """True for actions that end the episode (answer, terminate)."""
        return False

    @property
    def point(self) -> tuple[int, int] | None:
        """The normalised point a touch action lands on (the end point of a swipe)."""
        return None


class Click(_ActionBase):
    type: Literal["click"] = "click"
    x: Coord
    y: Coord

    @property
    def point(self) -> tuple[int, int]:
        return (self.x, self.y)


class DoubleClick(_ActionBase):
    type: Literal["double_click"] = "double_click"
    x: Coord
    y: Coord

    @property
    def point(self) -> tuple[int, int]:
        return (self.x, self.y)


class LongPress(_ActionBase):
    type: Literal["long_press"] = "long_press"
    x: Coord
    y: Coord
    duration_ms: int = Field(default=800, ge=100, le=10_000)

    @property
    def point(self) -> tuple[int, int]:
        return (self.x, self.y)


class Swipe(_ActionBase):
    type: Literal["swipe"] = "swipe"
    x: Coord
    y: Coord
    x2: Coord
    y2: Coord
    duration_ms: int = Field(default=300, ge=50, le=10_000)

    @property
    def point(self) -> tuple[int, int]:
        return (self.x2, self.y2)


class Type(_ActionBase):
    """Type text into the focused field."""

    type: Literal["type"] = "type"
    text: str = Field(min_length=1, max_length=2000)


class KeyPress(_ActionBase):
    type: Literal["key"] = "key"
    key: Key


class OpenApp(_ActionBase):
    """Open an app by package name (``com.MobileTicket``) or clone name (``train_ticketing``)."""

    type: Literal["open_app"] = "open_app"
    app: str = Field(min_length=1, max_length=200)


class Wait(_ActionBase):
    type: Literal["wait"] = "wait"
    seconds: float = Field(default=1.0, gt=0, le=60)


class Answer(_ActionBase):
    """Give the final answer to an information task; ends the episode."""

    type: Literal["answer"] = "answer"
    text: str = Field(max_length=2000)

    @property
    def is_final(self) -> bool:
        return True


class Terminate(_ActionBase):
    """Declare the task done (or impossible); ends the episode."""

    type: Literal["terminate"] = "terminate"
    status: TerminateStatus = TerminateStatus.SUCCESS

    @property
    def is_final(self) -> bool:
        return True


Action = Annotated[
    Click | DoubleClick | LongPress | Swipe | Type | KeyPress | OpenApp | Wait | Answer | Terminate,
    Field(discriminator="type"),
]
ACTION_TYPES: tuple[str, ...] = (
    "click",
    "double_click",
    "long_press",
    "swipe",
    "type",
    "key",
    "open_app",
    "wait",
    "answer",
    "terminate",
)
TOUCH_TYPES = frozenset({"click", "double_click", "long_press", "swipe"})

_adapter: TypeAdapter[Action] = TypeAdapter(Action)


def _describe(error: ValidationError) -> ActionError:
    first = error.errors()[0]
    loc = [str(p) for p in first["loc"]]
    # pydantic puts the union tag first in the location; the field is what users need.
    if loc and loc[0] in ACTION_TYPES:
        loc = loc[1:]
    field = ".".join(loc) or "type"
    msg = first["msg"]
    if first["type"] == "union_tag_invalid" or (first["type"] == "union_tag_not_found"):
        field = "type"
        msg = f"must be one of {', '.join(ACTION_TYPES)}"
    return ActionError(f"invalid action: field {field!r}: {msg}", field=field)


def parse_action(data: Any) -> Action:
    """Validate a dict (the JSON form) into an Action, or raise ActionError naming the field."""
    if isinstance(data, _ActionBase):
        return data  # type: ignore[return-value]
    if not isinstance(data, dict):
        raise ActionError(f"invalid action: expected a JSON object, got {type(data).__name__}", field="type")
    try:
        return _adapter.validate_python(data)
    except ValidationError as exc:
        raise _describe(exc) from None


def action_from_json(text: str | bytes) -> Action:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ActionError(f"invalid action: not JSON ({exc.msg})", field="type") from None
    return parse_action(data)


def action_to_dict(action: Action) -> dict[str, Any]:
    return action.model_dump(mode="json")


def action_to_json(action: Action) -> str:
    return json.dumps(action_to_dict(action), ensure_ascii=False, separators=(",", ":"))


def describe_action(action: Action) -> str:
    """A short human-readable form for tables and logs, e.g. ``click(500,120)``."""
    d = action_to_dict(action)
    kind = d.pop("type")
    args = ",".join(str(v) for v in d.values())
    return f"{kind}({args})"
