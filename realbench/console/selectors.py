"""Choosing the selector a recipe would use for a node of the UI hierarchy.

The order is by stability across app builds and screen states: a unique resource-id, else unique
visible text, else a unique content-desc; where none is unique, a positional locator (the first
of those attributes, or the class, with `nth` among its matches) — it works on this screen and
is marked as not unique, so a recorder or an inspector can warn about it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from realbench.hierarchy import Hierarchy, Node, Selector


class SelectorKind(StrEnum):
    RESOURCE_ID = "resource-id"
    TEXT = "text"
    CONTENT_DESC = "content-desc"
    RELATIVE = "relative"


@dataclass(frozen=True)
class SelectorChoice:
    selector: Selector
    kind: SelectorKind
    unique: bool
    matches: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "selector": self.selector.model_dump(exclude_defaults=True),
            "kind": str(self.kind),
            "unique": self.unique,
            "matches": self.matches,
            "text": str(self.selector),
        }


def _candidates(node: Node) -> list[tuple[SelectorKind, Selector]]:
    out: list[tuple[SelectorKind, Selector]] = []
    if node.resource_id:
        out.append((SelectorKind.RESOURCE_ID, Selector(resource_id=node.short_id)))
    if node.text:
        out.append((SelectorKind.TEXT, Selector(text=node.text)))
    if node.content_desc:
        out.append((SelectorKind.CONTENT_DESC, Selector(content_desc=node.content_desc)))
    return out


def choose_selector(hierarchy: Hierarchy, node: Node) -> SelectorChoice:
    """The most stable selector that finds `node` on this screen."""
    candidates = _candidates(node)
    for kind, sel in candidates:
        found = hierarchy.find(sel)
        if len(found) == 1 and found[0] is node:
            return SelectorChoice(sel, kind, True, 1)
    base = candidates[0][1] if candidates else Selector(class_name=node.class_name or "android.view.View")
    found = hierarchy.find(base)
    index = next((i for i, n in enumerate(found) if n is node), 0)
    return SelectorChoice(base.model_copy(update={"nth": index}), SelectorKind.RELATIVE, False, len(found))


def _identifiable(node: Node) -> bool:
    return bool(node.resource_id or node.text or node.content_desc)


def node_at(hierarchy: Hierarchy, x: float, y: float) -> Node | None:
    """The node a person means when pointing at (x, y) pixels: the innermost node with an id, text
    or description, else the clickable node a tap there activates, else the innermost node."""
    hits = hierarchy.at(x, y)
    if not hits:
        return None
    named = next((n for n in hits if _identifiable(n)), None)
    return named or hierarchy.target_at(x, y) or hits[0]


def describe_node(node: Node) -> dict[str, Any]:
    b = node.bounds
    return {
        "class": node.class_name,
        "resource_id": node.resource_id,
        "text": node.text,
        "content_desc": node.content_desc,
        "clickable": node.clickable,
        "focused": node.focused,
        "password": node.password,
        "bounds": [b.left, b.top, b.right, b.bottom],
    }
