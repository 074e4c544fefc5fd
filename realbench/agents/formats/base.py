"""The contract every prompt/action format implements, and coordinate conversions between them.

A format owns three things: the system prompt that explains its action space, the rendering of a
realbench Action in its own syntax (used for the assistant turns of the history window), and a
parser from model text back to an Action. Parsers never raise: unparseable text becomes a
`ParsedOutput` with `action=None` and an `error`, which the episode loop counts as a format error.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from realbench.actions import COORD_MAX, Action
from realbench.agents.images import ImagePolicy, ImageSize
from realbench.errors import ActionError


class CoordSpace(StrEnum):
    """How a format writes a point."""

    NORM_1000 = "norm1000"  # 0–1000 on both axes, whatever the image size
    NORM_999 = "norm999"  # 0–999 on both axes (Qwen3-VL: "The screen's resolution is 999x999.")
    PIXELS = "pixels"  # absolute pixels of the resized image the model was shown


class PromptLayout(StrEnum):
    """Where a format's upstream agent puts the instruction and the older steps."""

    # Qwen mobile_use cookbooks: one user turn with the query, a "Task progress" line listing
    # every earlier step, then the screenshot(s).
    PROGRESS_TEXT = "progress_text"
    # UI-TARS: the whole template (instruction included) as the first user turn on its own, then
    # one assistant turn per earlier step, screenshots only for the last few.
    TURNS = "turns"


_GRID_LIMIT = {CoordSpace.NORM_1000: 1000, CoordSpace.NORM_999: 999}


class FormatError(ActionError):
    """Model text that does not parse into an Action (becomes a format_error step, never a crash)."""


@dataclass(frozen=True)
class ParsedOutput:
    action: Action | None
    thought: str | None = None
    error: str | None = None
    # Actions the same output asked for after `action` (UI-TARS's type(content='…\\n') is Type
    # then Enter); the agent takes them on the following steps without asking the model again.
    then: tuple[Action, ...] = ()


def to_norm(x: float, y: float, screen: ImageSize, space: CoordSpace) -> tuple[int, int]:
    """A point written by the model → realbench's normalised 0–1000 coordinates."""
    if space in _GRID_LIMIT:
        limit_x = limit_y = float(_GRID_LIMIT[space])
    else:
        limit_x, limit_y = float(screen.width), float(screen.height)
    # A point a hair outside the image is a rounding artefact; a point far outside is a model error.
    if not (-1 <= x <= limit_x + 1 and -1 <= y <= limit_y + 1):
        raise FormatError(
            f"point ({x:g}, {y:g}) lies outside the {space.value} space ({limit_x:g}x{limit_y:g})",
            field="coordinate",
        )
    if space is CoordSpace.NORM_1000:
        nx, ny = x, y
    elif space is CoordSpace.NORM_999:
        nx, ny = x * COORD_MAX / 999, y * COORD_MAX / 999
    else:
        nx = x * COORD_MAX / max(1, screen.width - 1)
        ny = y * COORD_MAX / max(1, screen.height - 1)
    return (min(COORD_MAX, max(0, round(nx))), min(COORD_MAX, max(0, round(ny))))


def from_norm(x: int, y: int, screen: ImageSize, space: CoordSpace) -> tuple[int, int]:
    """realbench's normalised point → the point as this format writes it (inverse of `to_norm`)."""
    if space is CoordSpace.NORM_1000:
        return (x, y)
    if space is CoordSpace.NORM_999:
        return (_to_grid_999(x), _to_grid_999(y))
    return (round(x * (screen.width - 1) / COORD_MAX), round(y * (screen.height - 1) / COORD_MAX))


def _to_grid_999(n: int) -> int:
    """The 0–999 value that `to_norm` maps back to `n` (plain rounding misses at the ties)."""
    guess = round(n * 999 / COORD_MAX)
    for value in (guess, guess - 1, guess + 1):
        if 0 <= value <= 999 and round(value * COORD_MAX / 999) == n:
            return value
    return guess


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def numbers_in(text: str) -> list[float]:
    return [float(n) for n in _NUMBER.findall(text)]


def point_from(value: Any) -> tuple[float, float]:
    """A point from [x, y], "(x,y)", "<point>x y</point>" or a box [x1, y1, x2, y2] (its centre)."""
    if isinstance(value, list | tuple):
        nums = [float(v) for v in value if isinstance(v, int | float) and not isinstance(v, bool)]
        if len(nums) != len(value):
            raise FormatError(f"coordinate {value!r} is not a list of numbers", field="coordinate")
    elif isinstance(value, str):
        nums = numbers_in(value)
    else:
        raise FormatError(f"coordinate {value!r} is not a point", field="coordinate")
    if len(nums) == 2:
        return (nums[0], nums[1])
    if len(nums) == 4:
        return ((nums[0] + nums[2]) / 2, (nums[1] + nums[3]) / 2)
    raise FormatError(f"coordinate {value!r} needs 2 numbers (a point) or 4 (a box)", field="coordinate")


def first_json_object(text: str) -> tuple[Any, int, int] | None:
    """The first balanced ``{...}`` in `text` that parses as JSON: (value, start, end)."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(text, start)
            return value, start, end
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
    return None


def clean_thought(text: str, labels: tuple[str, ...] = ("Thought:",)) -> str | None:
    t = text.strip()
    for label in labels:
        if t.startswith(label):
            t = t[len(label) :].strip()
    return t or None


class ActionFormat(ABC):
    """A prompt builder plus a parser for one model family's action syntax."""

    name: str
    coords: CoordSpace
    layout: PromptLayout = PromptLayout.PROGRESS_TEXT

    @abstractmethod
    def system_prompt(self, screen: ImageSize) -> str:
        """The system message: the action space and the output format."""

    @abstractmethod
    def task_text(self, instruction: str, earlier_steps: list[str]) -> str:
        """The first user message: the instruction and the steps older than the image window."""

    @abstractmethod
    def render(self, action: Action, screen: ImageSize, thought: str | None = None) -> str:
        """The text a model of this format would have written for `action` (history turns, fakes)."""

    def history_line(self, action: Action, screen: ImageSize) -> str:
        """One line for a step older than the image window."""
        return " ".join(self.render(action, screen).split())

    @abstractmethod
    def split(self, text: str) -> tuple[str | None, str]:
        """Separate the model's reasoning from the action part: (thought, action text)."""

    @abstractmethod
    def parse_action_text(self, body: str, screen: ImageSize) -> Action:
        """The action part → an Action; raises ActionError (FormatError) when it cannot."""

    def image_policy(self) -> ImagePolicy:
        """How this model family's own processor sizes a screenshot (what it was trained on)."""
        return ImagePolicy()

    def default_image_window(self) -> int:
        """Screenshots per request, the current one included, as in the family's upstream agent."""
        return 1

    def parse_followups(self, body: str, screen: ImageSize) -> tuple[Action, ...]:
        """Actions the output asks for after the first one (see `ParsedOutput.then`)."""
        return ()

    def tools(self, screen: ImageSize) -> list[dict[str, Any]] | None:
        """Tool schemas for the API's ``tools`` field, when the format sends them that way."""
        return None

    def settings(self) -> dict[str, Any]:
        """Everything that shapes the prompt and the parsing (hashed into every step's record)."""
        return {"format": self.name, "coords": self.coords.value}

    def parse(self, text: str, screen: ImageSize) -> ParsedOutput:
        """Model text → an Action, or `action=None` with the reason. Never raises."""
        if not text or not text.strip():
            return ParsedOutput(action=None, error="empty model output")
        thought, body = self.split(text)
        try:
            action = self.parse_action_text(body, screen)
            return ParsedOutput(action=action, thought=thought, then=self.parse_followups(body, screen))
        except ActionError as exc:
            return ParsedOutput(action=None, thought=thought, error=exc.message)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:  # odd shapes of model JSON
            return ParsedOutput(action=None, thought=thought, error=f"unparseable output: {exc}")
