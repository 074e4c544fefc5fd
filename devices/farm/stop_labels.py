"""Matching stop labels the way a reader sees them, not the way the XML spells them.

An app (or an agent that learnt one) can show "确认付款" as "确认付款 " (trailing space), "确认\u00a0付款"
(NBSP), "确\u200b认付款" (zero-width space), "确认\u3000付款" (ideographic space), "确认付款 ¥100.00"
(a price after it), "\u200f确认付款" (a direction mark), "确认付款\u0301" (a combining mark) or split over
two text views inside one button. The interlock compares labels after `normalise` and as
substrings, over a node's own text and content-desc and — for the node a tap activates — over the
text of its whole subtree joined, so every one of those spellings still names the stop control.

Over-matching is the safe direction here: a label that contains a stop label is treated as one.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from realbench.hierarchy import Node, Selector

# Unicode categories that change nothing a reader sees in a label: format characters (zero-width
# spaces and joiners, direction marks and overrides, BOM, soft hyphen), combining marks, control
# characters, and every kind of space.
_INVISIBLE_CATEGORIES = frozenset({"Cf", "Mn", "Me", "Cc", "Zs", "Zl", "Zp"})


@functools.lru_cache(maxsize=16384)
def normalise(text: str) -> str:
    """NFKC, case-folded, with whitespace, zero-width, direction and combining characters removed."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "".join(
        ch for ch in folded if not ch.isspace() and unicodedata.category(ch) not in _INVISIBLE_CATEGORIES
    )


def own_texts(node: Node) -> tuple[str, str]:
    return normalise(node.text), normalise(node.content_desc)


def subtree_text(node: Node) -> str:
    """The node's own and its descendants' text and content-desc, normalised and joined, so a label
    split over several views reads as one."""
    parts = [node.text, node.content_desc]
    for child in node.descendants():
        parts += [child.text, child.content_desc]
    return normalise("".join(p for p in parts if p))


class LabelTexts:
    """The normalised texts of one hierarchy's nodes, each computed once. The interlock tests every
    stop selector against every node of each dump; normalising a node's whole subtree again for
    each selector was most of a phone step's CPU. Keyed by node identity; it holds the nodes it
    has seen, so their ids stay unique while it lives."""

    def __init__(self) -> None:
        self._own: dict[int, tuple[Node, tuple[str, str]]] = {}
        self._subtree: dict[int, tuple[Node, str]] = {}

    def own(self, node: Node) -> tuple[str, str]:
        hit = self._own.get(id(node))
        if hit is None:
            hit = self._own[id(node)] = (node, own_texts(node))
        return hit[1]

    def subtree(self, node: Node) -> str:
        hit = self._subtree.get(id(node))
        if hit is None:
            hit = self._subtree[id(node)] = (node, subtree_text(node))
        return hit[1]


def stop_labels(selector: Selector) -> tuple[str, ...]:
    """The labels a selector names (text, text_contains, content_desc), normalised."""
    raw = (selector.text, selector.text_contains, selector.content_desc)
    return tuple(n for n in (normalise(r) for r in raw if r) if n)


def _other_criteria_match(selector: Selector, node: Node) -> bool:
    """The selector's non-label criteria (resource id, class, clickable) on this node."""
    if selector.resource_id is not None and selector.resource_id not in (node.resource_id, node.short_id):
        return False
    if selector.class_name is not None and node.class_name != selector.class_name:
        return False
    return not (selector.clickable is not None and node.clickable != selector.clickable)


def names_stop(selector: Selector, node: Node, *, subtree: bool, texts: LabelTexts | None = None) -> bool:
    """Whether `node` is the control `selector` names, after normalisation and as a substring:
    over its own text and content-desc, and with `subtree` also over its descendants' text.
    `texts` shares the normalised texts between calls on one hierarchy."""
    if not _other_criteria_match(selector, node):
        return False
    labels = stop_labels(selector)
    if selector.text_regex is not None:
        pattern = re.compile(selector.text_regex)
        candidates = [node.text, node.content_desc]
        if subtree:
            candidates.append(" ".join(n.text for n in (node, *node.descendants()) if n.text))
        if not any(pattern.search(c) for c in candidates if c):
            return False
    if not labels:
        return True  # an id / class / regex selector: the attributes above decided
    texts = texts or LabelTexts()
    text, desc = texts.own(node)
    joined = texts.subtree(node) if subtree else ""
    return all(label in text or label in desc or (subtree and label in joined) for label in labels)
