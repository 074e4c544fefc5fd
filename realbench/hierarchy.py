"""Android-style UI hierarchy XML: parsing, selectors and hit-testing.

Phones (uiautomator2 `dumpWindowHierarchy`) and clones (a DOM dump) produce the same shape, so
golden plans, real-side checks and the safety interlock work on either.
"""

from __future__ import annotations

import functools
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, model_validator

from realbench.errors import RealbenchError
from realbench.evidence import Evidence

_BOUNDS = re.compile(r"\[(-?\d+),(-?\d+)\]\[(-?\d+),(-?\d+)\]")

# A run of single ASCII letters or digits each separated by one space, not glued to another letter or
# digit on either side: how 12306's H5 pages spell train numbers for accessibility (`G 7 0 0 4`). Only
# such runs fold; `¥41 9折` (a two-digit token) and spaces around other characters stay as written.
_SPACED_RUN = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9](?:[ \u00a0][A-Za-z0-9])+(?![A-Za-z0-9])")
_SPACE = re.compile(r"\s+")


@functools.lru_cache(maxsize=16384)
def fold_spacing(text: str) -> str:
    """The text with letter-spaced runs closed up: `G 7 0 0 4次列车` -> `G7004次列车`."""
    if " " not in text and "\u00a0" not in text:
        return text
    return _SPACED_RUN.sub(lambda m: _SPACE.sub("", m.group(0)), text)


def read_as_shown(text: str, regex: str | None) -> str | None:
    """An answer read off a node's text as a person reads it (a letter-spaced `G 7 0 0 4` is
    `G7004`), cut by the task's regex (its first group, else the whole match); None when the
    regex does not match. The golden runner and the browser-free plan runner both read this way."""
    text = fold_spacing(text)
    if not regex:
        return text
    m = re.search(regex, text)
    if m is None:
        return None
    return m.group(1) if m.groups() else m.group(0)


@functools.lru_cache(maxsize=16384)
def strip_spacing(text: str) -> str:
    """The text without any whitespace (what `text_pattern` compares)."""
    return _SPACE.sub("", text)


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """A `text_pattern` as a regular expression: `*` is any run of characters, everything else is
    literal, whitespace is dropped; the whole text must match."""
    parts = strip_spacing(pattern).split("*")
    return re.compile("(?s)" + ".*".join(re.escape(p) for p in parts))


@dataclass(frozen=True)
class Bounds:
    left: int
    top: int
    right: int
    bottom: int

    @classmethod
    def parse(cls, text: str) -> Bounds:
        m = _BOUNDS.fullmatch(text.strip())
        if not m:
            raise ValueError(f"bad bounds {text!r}")
        left, top, right, bottom = (int(g) for g in m.groups())
        return cls(left, top, right, bottom)

    @property
    def width(self) -> int:
        return self.right - self.left

    @property
    def height(self) -> int:
        return self.bottom - self.top

    @property
    def center(self) -> tuple[int, int]:
        return ((self.left + self.right) // 2, (self.top + self.bottom) // 2)

    @property
    def empty(self) -> bool:
        return self.width <= 0 or self.height <= 0

    def contains(self, x: float, y: float) -> bool:
        """Inclusive of the edges: a tap on the border is a tap on the control."""
        return self.left <= x <= self.right and self.top <= y <= self.bottom

    def __str__(self) -> str:
        return f"[{self.left},{self.top}][{self.right},{self.bottom}]"


@dataclass
class Node:
    """One element of the hierarchy."""

    text: str = ""
    resource_id: str = ""
    class_name: str = ""
    package: str = ""
    content_desc: str = ""
    bounds: Bounds = field(default_factory=lambda: Bounds(0, 0, 0, 0))
    clickable: bool = False
    long_clickable: bool = False
    enabled: bool = True
    focused: bool = False
    focusable: bool = False
    scrollable: bool = False
    checked: bool = False
    selected: bool = False
    password: bool = False
    # uiautomator's visible-to-user (dumps without it: visible)
    visible: bool = True
    parent: Node | None = field(default=None, repr=False, compare=False)
    children: list[Node] = field(default_factory=list, repr=False, compare=False)

    @property
    def short_id(self) -> str:
        """The resource id without its ``package:id/`` prefix."""
        return self.resource_id.rsplit("/", 1)[-1]

    def ancestors(self) -> Iterator[Node]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def descendants(self) -> Iterator[Node]:
        for child in self.children:
            yield child
            yield from child.descendants()

    def all_text(self) -> str:
        """Text of this node and its descendants, joined — what a reader sees inside it."""
        parts = [self.text, self.content_desc] + [n.text for n in self.descendants()]
        return " ".join(p for p in parts if p)


def _flag(el: ET.Element, name: str) -> bool:
    return el.get(name, "false") == "true"


class Hierarchy:
    """A parsed hierarchy: every node in document order, with parent links."""

    def __init__(self, xml: str) -> None:
        try:
            root = ET.fromstring(xml)
        except ET.ParseError as exc:
            raise RealbenchError(f"UI hierarchy is not valid XML: {exc}") from None
        self.nodes: list[Node] = []
        self.root = self._convert(root, None)

    def _convert(self, el: ET.Element, parent: Node | None) -> Node:
        bounds_text = el.get("bounds")
        node = Node(
            text=el.get("text", ""),
            resource_id=el.get("resource-id", ""),
            class_name=el.get("class", ""),
            package=el.get("package", ""),
            content_desc=el.get("content-desc", ""),
            bounds=Bounds.parse(bounds_text) if bounds_text else Bounds(0, 0, 0, 0),
            clickable=_flag(el, "clickable"),
            long_clickable=_flag(el, "long-clickable"),
            enabled=el.get("enabled", "true") == "true",
            focused=_flag(el, "focused"),
            focusable=_flag(el, "focusable"),
            scrollable=_flag(el, "scrollable"),
            checked=_flag(el, "checked"),
            selected=_flag(el, "selected"),
            password=_flag(el, "password"),
            visible=el.get("visible-to-user", "true") != "false",
            parent=parent,
        )
        if el.tag == "node":
            self.nodes.append(node)
        node.children = [self._convert(child, node) for child in el]
        return node

    @property
    def screen(self) -> Bounds:
        """The union of all node bounds: the screen size in pixels."""
        visible = [n.bounds for n in self.nodes if not n.bounds.empty]
        if not visible:
            return Bounds(0, 0, 0, 0)
        return Bounds(
            min(b.left for b in visible),
            min(b.top for b in visible),
            max(b.right for b in visible),
            max(b.bottom for b in visible),
        )

    def find(self, selector: Selector) -> list[Node]:
        return [n for n in self.nodes if selector.matches(n) and not n.bounds.empty]

    def find_one(self, selector: Selector) -> Node | None:
        found = self.find(selector)
        if not found:
            return None
        index = selector.nth if selector.nth >= 0 else len(found) + selector.nth
        return found[index] if 0 <= index < len(found) else None

    def at(self, x: float, y: float) -> list[Node]:
        """Nodes whose bounds contain the pixel, innermost (deepest, latest) first."""
        hits = [n for n in self.nodes if not n.bounds.empty and n.bounds.contains(x, y)]
        return list(reversed(hits))

    def target_at(self, x: float, y: float) -> Node | None:
        """The node a tap at (x, y) activates: the innermost clickable node, or its clickable ancestor."""
        for node in self.at(x, y):
            if node.clickable or node.long_clickable:
                return node
            for anc in node.ancestors():
                if anc.clickable or anc.long_clickable:
                    return anc
        return None

    def focused(self) -> Node | None:
        return next((n for n in self.nodes if n.focused), None)


class Selector(BaseModel):
    """Finds nodes by their attributes; every given field must match.

    ``text`` matches exactly (the text or the content-desc), ``text_contains`` as a substring,
    ``text_regex`` as a regular expression (searched). Each also matches after letter-spaced runs
    are closed up on both sides (`fold_spacing`: a task naming `G7004` finds `G 7 0 0 4次列车…`),
    and nothing else is loosened. ``text_pattern`` is for long row strings: `*` stands for any run
    of characters, the rest is literal, whitespace is ignored on both sides and the whole text must
    match (`{train}次列车*从{from}出发*`). ``resource_id`` matches the full id or the part after
    ``:id/``. ``inside`` keeps only nodes with an ancestor it matches: ``{inside: {resource_id:
    grid_function}}`` alone is every node in that container, so ``nth: 0`` is its first child — the
    form public scripts reach a list's first item in (an XPath ``…/grid_function/*[1]``). ``nth``
    picks among several matches (negative counts from the end). ``evidence`` says what backs the
    selector (see `realbench.evidence`); it never takes part in matching.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str | None = None
    text_contains: str | None = None
    text_regex: str | None = None
    text_pattern: str | None = None
    resource_id: str | None = None
    content_desc: str | None = None
    class_name: str | None = None
    clickable: bool | None = None
    inside: Selector | None = None
    nth: int = 0
    evidence: Evidence | None = None

    @model_validator(mode="after")
    def _needs_a_criterion(self) -> Selector:
        if not any(
            v is not None
            for v in (
                self.text,
                self.text_contains,
                self.text_regex,
                self.text_pattern,
                self.resource_id,
                self.content_desc,
                self.class_name,
                self.inside,
            )
        ):
            raise ValueError(
                "a selector needs at least one of text, text_contains, text_regex, text_pattern, resource_id, content_desc, class_name"
            )
        if self.text_regex is not None:
            try:
                re.compile(self.text_regex)
            except re.error as exc:
                raise ValueError(f"text_regex is not a valid regular expression: {exc}") from None
        return self

    def matches(self, node: Node) -> bool:
        if self.text is not None and not (
            _same_text(self.text, node.text) or _same_text(self.text, node.content_desc)
        ):
            return False
        if self.text_contains is not None and not _contains(node.text, self.text_contains):
            return False
        if self.text_regex is not None and not (
            re.search(self.text_regex, node.text) or re.search(self.text_regex, fold_spacing(node.text))
        ):
            return False
        if self.text_pattern is not None and not _pattern(self.text_pattern).fullmatch(
            strip_spacing(node.text)
        ):
            return False
        if self.resource_id is not None and self.resource_id not in (node.resource_id, node.short_id):
            return False
        if self.content_desc is not None and node.content_desc != self.content_desc:
            return False
        if self.class_name is not None and node.class_name != self.class_name:
            return False
        if self.clickable is not None and node.clickable != self.clickable:
            return False
        return self.inside is None or any(self.inside.matches(a) for a in node.ancestors())

    def format(self, params: dict[str, object]) -> Selector:
        """Fill ``{name}`` placeholders in the string fields from task parameters."""
        from realbench.templating import render

        update: dict[str, object] = {
            k: render(v, params)
            for k, v in self.model_dump().items()
            if isinstance(v, str) and k != "text_regex"
        }
        if self.inside is not None:
            update["inside"] = self.inside.format(params)
        return self.model_copy(update=update)

    def __str__(self) -> str:
        parts = [
            f"{k}={v!r}" for k, v in self.model_dump(exclude_defaults=True, exclude={"evidence"}).items()
        ]
        return "Selector(" + ", ".join(parts) + ")"


def _same_text(wanted: str, text: str) -> bool:
    # fold_spacing is cached: a screen's strings are folded once, not once per selector
    return text == wanted or (bool(text) and fold_spacing(text) == fold_spacing(wanted))


def _contains(text: str, part: str) -> bool:
    return part in text or fold_spacing(part) in fold_spacing(text)


@functools.lru_cache(maxsize=1024)
def _pattern(pattern: str) -> re.Pattern[str]:
    return compile_pattern(pattern)
