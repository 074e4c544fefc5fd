"""Test screens that commit when their stop control is activated — targets for attacking the interlock.

A `CommitTestScreen` is a PIL-drawn screen (labelled as a test screen, never as an app) that a
virtual phone shows for a package. What the hierarchy shows (`ScreenSpec.nodes`) and what the
screen's own input dispatch does (`ScreenSpec.hotspots`, `ScreenSpec.commit_on`) are declared
separately, as in a hostile app: a touch delegate widens a small button beyond its bounds, a
transparent overlay forwards its clicks to the pay action, an H5 pay button inside a WebView has no
node at all, a form submits on ENTER with its button below the fold, a payment keypad submits on
the last digit, another app pays the moment it opens. Every activation that would move money is
appended to `commits` — the screen's own state, read by tests (and over the control channel via
`app_state`) as the evidence of what reached it.

A spec can change under the agent: from the `after_dumps`-th hierarchy dump served over JSON-RPC
on (counted from the app's start), the screen shows and dispatches `then` instead — a dialog that
appears right after the interlock looked.
"""

from __future__ import annotations

import math
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from PIL import Image, ImageDraw

from devices.virtual.uitree import UiNode, font

Box = tuple[int, int, int, int]
SWIPE_SAMPLE_PX = 6


class Gesture(StrEnum):
    TAP = "tap"
    LONG_PRESS = "long_press"
    SWIPE_START = "swipe_start"
    SWIPE_END = "swipe_end"
    SWIPE_THROUGH = "swipe_through"
    ENTER = "enter"  # the ENTER key (an IME action) submits the form
    NEWLINE = "newline"  # typed text with a newline submits the form
    TEXT = "text"  # any typed text submits (a payment keypad on its last digit)
    LAUNCH = "launch"  # opening the app commits (a payment deep link)


TOUCHES = frozenset({Gesture.TAP, Gesture.LONG_PRESS, Gesture.SWIPE_START, Gesture.SWIPE_END})


@dataclass(frozen=True)
class Hotspot:
    """An area where the screen's own dispatch commits for the given gestures."""

    name: str
    box: Box
    gestures: frozenset[Gesture] = TOUCHES

    def contains(self, x: float, y: float) -> bool:
        left, top, right, bottom = self.box
        return left <= x <= right and top <= y <= bottom


@dataclass
class ScreenSpec:
    nodes: list[UiNode]
    hotspots: list[Hotspot] = field(default_factory=list)
    commit_on: frozenset[Gesture] = frozenset()  # keys, text and launch that commit
    then: ScreenSpec | None = None
    after_dumps: int = 0


@dataclass(frozen=True)
class Commit:
    what: str
    gesture: Gesture
    x: int | None = None
    y: int | None = None
    time: float = 0.0


class CommitTestScreen:
    """A `ScreenSource` built from a `ScreenSpec` (a fixture of the interlock tests)."""

    def __init__(
        self,
        package: str,
        spec: ScreenSpec,
        *,
        width: int = 1080,
        height: int = 2400,
        dumps_served: Callable[[], int] | None = None,
    ) -> None:
        self.package = package
        self.spec = spec
        self.width = width
        self.height = height
        self._dumps_served = dumps_served or (lambda: 0)
        self._baseline = self._dumps_served()
        self.commits: list[Commit] = []
        self.typed: list[str] = []
        self.starts = 0

    # --- which spec is showing --------------------------------------------------------------

    def current(self) -> ScreenSpec:
        spec = self.spec
        dumps = self._dumps_served() - self._baseline
        while spec.then is not None and dumps >= spec.after_dumps:
            spec = spec.then
        return spec

    def _commit(self, what: str, gesture: Gesture, x: int | None = None, y: int | None = None) -> None:
        self.commits.append(Commit(what, gesture, x, y, time.time()))

    # --- ScreenSource -----------------------------------------------------------------------

    def start(self) -> None:
        self.starts += 1
        self._baseline = self._dumps_served()
        if Gesture.LAUNCH in self.current().commit_on:
            self._commit("launch", Gesture.LAUNCH)

    def stop(self) -> None:
        pass

    def clear(self) -> None:
        self.typed.clear()

    def close(self) -> None:
        pass

    def hierarchy(self) -> list[ET.Element]:
        root = UiNode(
            bounds=(0, 0, self.width, self.height),
            cls="android.widget.FrameLayout",
            children=self.current().nodes,
        )
        return [root.to_element(package=self.package)]

    def screenshot(self) -> Image.Image:
        img = Image.new("RGB", (self.width, self.height), (250, 250, 250))
        draw = ImageDraw.Draw(img)
        for node in _flat(self.current().nodes):
            if node.bounds[2] > node.bounds[0] and node.bounds[3] > node.bounds[1]:
                draw.rectangle(node.bounds, outline=(90, 90, 90), width=3)
            label = node.text or node.content_desc
            if label:
                draw.text((node.bounds[0] + 20, node.bounds[1] + 20), label, fill=(20, 20, 20), font=font(40))
        draw.text(
            (self.width // 2, self.height - 100),
            "interlock test screen",
            fill=(120, 120, 120),
            font=font(30),
            anchor="mm",
        )
        return img

    def _touch(self, gesture: Gesture, x: int, y: int) -> bool:
        for spot in self.current().hotspots:
            if gesture in spot.gestures and spot.contains(x, y):
                self._commit(spot.name, gesture, x, y)
                return True
        return False

    def tap(self, x: int, y: int, long: bool = False) -> None:
        self._touch(Gesture.LONG_PRESS if long else Gesture.TAP, x, y)

    def swipe(self, x1: int, y1: int, x2: int, y2: int, duration_ms: int) -> None:
        if self._touch(Gesture.SWIPE_START, x1, y1) or self._touch(Gesture.SWIPE_END, x2, y2):
            return
        n = max(1, math.ceil(math.hypot(x2 - x1, y2 - y1) / SWIPE_SAMPLE_PX))
        for i in range(1, n):
            px, py = round(x1 + (x2 - x1) * i / n), round(y1 + (y2 - y1) * i / n)
            if self._touch(Gesture.SWIPE_THROUGH, px, py):
                return

    def key(self, key: str) -> bool:
        if key == "enter" and Gesture.ENTER in self.current().commit_on:
            self._commit("form submitted by ENTER", Gesture.ENTER)
        return key != "back"

    def text(self, text: str) -> None:
        self.typed.append(text)
        commit_on = self.current().commit_on
        if ("\n" in text or "\r" in text) and Gesture.NEWLINE in commit_on:
            self._commit("form submitted by a typed newline", Gesture.NEWLINE)
        elif Gesture.TEXT in commit_on:
            self._commit("keypad submitted on its last digit", Gesture.TEXT)

    # --- read by tests and the control channel ----------------------------------------------

    def app_state(self) -> dict[str, Any]:
        return {
            "commits": [c.__dict__ | {"gesture": str(c.gesture)} for c in self.commits],
            "typed": list(self.typed),
            "starts": self.starts,
        }


def _flat(nodes: list[UiNode]) -> Iterator[UiNode]:
    for n in nodes:
        yield n
        yield from _flat(n.children)
