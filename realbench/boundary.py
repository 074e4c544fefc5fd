"""Commit-boundary detection: would this action cross the task's irreversible step?

The episode loop asks this before every action on every target, so clone and phone trajectories
end at the same point. On real apps the farm's interlock repeats the test on a fresh hierarchy
right before anything is sent (defence in depth).
"""

from __future__ import annotations

from dataclasses import dataclass

from realbench.actions import Action, Click, DoubleClick, Key, KeyPress, LongPress, Swipe, Type
from realbench.hierarchy import Hierarchy, Node, Selector

# A swipe shorter than this (in normalised units) lands like a tap at its start.
TAP_LIKE_SWIPE = 30


@dataclass(frozen=True)
class BoundaryHit:
    selector: Selector
    node: Node
    reason: str

    def describe(self) -> str:
        label = self.node.all_text() or self.node.resource_id or self.node.class_name
        return f"{self.reason}: {label!r} matches {self.selector}"


def to_pixels(x: int, y: int, width: int, height: int) -> tuple[float, float]:
    return (x * (width - 1) / 1000, y * (height - 1) / 1000)


def _candidates(hierarchy: Hierarchy, px: float, py: float) -> list[Node]:
    """Every node a tap at (px, py) could activate or belongs to: the stack under the point, the
    clickable target and its descendants (a tap on a button's icon presses the button)."""
    under = hierarchy.at(px, py)
    target = hierarchy.target_at(px, py)
    extra = [target, *target.descendants()] if target is not None else []
    seen: set[int] = set()
    out: list[Node] = []
    for node in under + extra:
        if id(node) not in seen:
            seen.add(id(node))
            out.append(node)
    return out


def _match(nodes: list[Node], selectors: list[Selector]) -> tuple[Selector, Node] | None:
    for node in nodes:
        for sel in selectors:
            if sel.matches(node):
                return sel, node
    return None


def reads_screen(action: Action) -> bool:
    """Whether `boundary_hit` looks at the screen for this action (a back key, a wait or a stop
    cannot press a control, so a caller need not parse a hierarchy for them)."""
    return isinstance(action, Click | DoubleClick | LongPress | Swipe | Type) or (
        isinstance(action, KeyPress) and action.key is Key.ENTER
    )


def boundary_hit(
    action: Action,
    hierarchy: Hierarchy | None,
    selectors: list[Selector],
    screen: tuple[int, int],
) -> BoundaryHit | None:
    """The boundary control this action would activate, or None."""
    if not selectors or hierarchy is None or not reads_screen(action):
        return None
    width, height = screen
    points: list[tuple[int, int]] = []
    if isinstance(action, Click | DoubleClick | LongPress):
        points = [(action.x, action.y)]
    elif isinstance(action, Swipe):
        points = [(action.x2, action.y2)]
        if abs(action.x2 - action.x) + abs(action.y2 - action.y) <= TAP_LIKE_SWIPE:
            points.append((action.x, action.y))
    for x, y in points:
        px, py = to_pixels(x, y, width, height)
        found = _match(_candidates(hierarchy, px, py), selectors)
        if found:
            return BoundaryHit(found[0], found[1], f"{action.type} at ({x},{y})")
    if isinstance(action, KeyPress) and action.key is Key.ENTER or isinstance(action, Type):
        focused = hierarchy.focused()
        if focused is not None:
            found = _match([focused, *focused.descendants(), *focused.ancestors()], selectors)
            if found:
                return BoundaryHit(found[0], found[1], f"{action.type} on a focused boundary control")
    return None
