"""Matching stop labels the way a person reads them, not the way the XML spells them.

An app (or an agent that learnt one) can show "确认付款" as "确认付款 " (trailing space), "确认\u00a0付款"
(NBSP), "确\u200b认付款" (zero-width space), "确认\u3000付款" (ideographic space), "确认付款 ¥100.00"
(a price after it), "\u200f确认付款" (a direction mark), "确认付款\u0301" (a combining mark), in
traditional characters ("確認付款"), in full-width Latin, or split over several views inside one
button, dumped in any order. The interlock compares labels after `normalise` (NFKC for widths,
OpenCC's traditional-to-simplified conversion, case folding, invisible characters dropped) and
`match_form` (a few synonyms folded onto one word: 确定 → 确认, 付款 → 支付, 完成转账 → 确认转账
…, amounts dropped), as substrings:

- over a node's own text and content-desc;
- for the node a tap activates, over its subtree read as a person reads it: texts in reading order
  (top to bottom, then left to right, by position), then content-descs in reading order; the
  document order and the interleaved order are tried too, so a label split around an icon's
  description (确认 | shield | 付款) or dumped out of order (付款, 确认) still reads "确认付款";
- a caption (a text that is not itself clickable and has no clickable ancestor) labels the
  text-less clickables of its own small container (`captioned`): a "确认付款" caption beside a
  fingerprint pay button names the button.

Over-matching is the safe direction here: a label that contains a stop label is treated as one.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable

import opencc

from realbench.hierarchy import Node, Selector

# Unicode categories that change nothing a reader sees in a label: format characters (zero-width
# spaces and joiners, direction marks and overrides, BOM, soft hyphen), combining marks, control
# characters, and every kind of space.
_INVISIBLE_CATEGORIES = frozenset({"Cf", "Mn", "Me", "Cc", "Zs", "Zl", "Zp"})
# Punctuation (P*) and symbols (S*: currency signs, arrows) carry no part of a stop label's meaning.
_PUNCTUATION_OR_SYMBOL = frozenset("PS")

# Words that name the same act on a commit button, folded onto one spelling (after `normalise`):
# a stop label and a control's label are compared in this form, so "确定付款" names "确认支付".
SYNONYMS: tuple[tuple[str, str], ...] = (
    ("确定", "确认"),
    ("付款", "支付"),
    ("付钱", "支付"),
    ("缴费", "支付"),
    ("转帐", "转账"),
    ("汇款", "转账"),
    ("下单", "提交订单"),
    ("placeorder", "submitorder"),
)

# A caption labels text-less clickables in its container only when that container is small: a
# whole screen's root holds every icon of the screen.
CAPTION_LEVELS = 2  # how far up from the caption its container may be
CAPTION_MAX_SCREEN_SHARE = 0.4  # the container's share of the screen area at most


# Verbs that, before a money word, commit as 确认 does ("完成转账", "同意并支付"). Not 去 / 立即:
# "去支付" opens the cashier and "立即转账" picks a transfer mode in the packs' golden plans.
COMMIT_VERBS = re.compile(r"(?:完成|同意并|同意)(?=支付|转账|还款|购买|提交)")
# An amount inside a label ("Confirm CNY 25.00 refund", "确认¥25.00付款"): a reader skips it, and no
# stop label holds a digit.
AMOUNT = re.compile(r"(?:cny|rmb|usd|hkd|¥|\$)?[0-9][0-9.,]*(?:元|cny|rmb)?")


# The money words of every money-moving app, in every locale the packs' apps ship, whatever the
# pack's own stop list says (all in `match_form`: widths, traditional characters, synonyms, amounts
# and punctuation already folded). A reading names a money act when it holds a commit phrase (a
# verb before a money noun: 确认支付, 去支付, 完成转账 → 确认转账, 立即购票, confirm transfer, pay now),
# or when it is made of nothing but commit words (确认, 确定 → 确认, 提交, Pay, Confirm, OK …): a
# bare "Pay" or "确定" on a sheet says nothing about what it does, so only the catalogue can vouch.
MONEY_PHRASE = re.compile(
    r"(?:确认|立即|马上|去|继续|完成|一键|快速|同意|允许|授权)(?:并且|并|和)?"
    r"(?:支付|转账|还款|购买|购票|退票|改签|提交订单|提交候补)"
    r"|提交订单|提交候补"
    r"|(?:confirm|submit|complete|place|authori[sz]e|agree)(?:and)?"
    r"(?:pay|transfer|order|purchase|refund|repay|change|cancel)"
    r"|(?:pay|buy|order|transfer|send|purchase)now"
    r"|submitorder|placeorder"
)
MONEY_WORDS = re.compile(
    r"(?:确认|提交|支付|购买|转账|还款|购票|同意|立即|"
    r"confirm|pay|payment|submit|ok|buy|purchase|transfer|send|agree|done|continue|yes)+"
)


def money_reading(readings: Iterable[str]) -> str | None:
    """The first reading (in `match_form`) that names a money act by the guard's own vocabulary."""
    for r in readings:
        if r and (MONEY_PHRASE.search(r) or MONEY_WORDS.fullmatch(r)):
            return r
    return None


@functools.cache
def _t2s() -> opencc.OpenCC:
    return opencc.OpenCC("t2s")


@functools.lru_cache(maxsize=16384)
def normalise(text: str) -> str:
    """NFKC (full/half width), traditional → simplified Chinese (OpenCC), case-folded, with
    whitespace, zero-width, direction and combining characters removed."""
    if not text:
        return ""
    folded = unicodedata.normalize("NFKC", text)
    folded = _t2s().convert(folded).casefold()
    return "".join(
        ch for ch in folded if not ch.isspace() and unicodedata.category(ch) not in _INVISIBLE_CATEGORIES
    )


@functools.lru_cache(maxsize=16384)
def match_form(text: str) -> str:
    """`normalise`, then synonyms folded onto one spelling, amounts and then punctuation and symbols
    dropped (a reader skips "(¥88)" inside "提交候 (¥88) 补订单"): the form stop labels are compared in."""
    out = normalise(text)
    for word, canonical in SYNONYMS:
        out = out.replace(word, canonical)
    out = COMMIT_VERBS.sub("确认", AMOUNT.sub("", out))
    return "".join(ch for ch in out if unicodedata.category(ch)[0] not in _PUNCTUATION_OR_SYMBOL)


def own_texts(node: Node) -> tuple[str, str]:
    return match_form(node.text), match_form(node.content_desc)


def reading_order(nodes: Iterable[Node]) -> list[Node]:
    """Nodes as a reader meets them: by line (views whose vertical extents overlap by half share a
    line), then left to right. Views without bounds keep their document order at the end."""
    placed = [n for n in nodes if not n.bounds.empty]
    unplaced = [n for n in nodes if n.bounds.empty]
    placed.sort(key=lambda n: (n.bounds.top + n.bounds.bottom, n.bounds.left))
    lines: list[list[Node]] = []
    for n in placed:
        line = lines[-1] if lines else None
        if line is not None:
            ref = line[0].bounds
            overlap = min(ref.bottom, n.bounds.bottom) - max(ref.top, n.bounds.top)
            if overlap * 2 >= min(ref.height, n.bounds.height):
                line.append(n)
                continue
        lines.append([n])
    ordered = [n for line in lines for n in sorted(line, key=lambda n: n.bounds.left)]
    return ordered + unplaced


def subtree_readings(node: Node) -> tuple[str, ...]:
    """The ways a person may read the node's subtree as one label, each in `match_form`: texts in
    reading order then descriptions; texts and descriptions interleaved in reading order; and the
    same two in document order (a dump's order is the app's choice, the reader's is not)."""
    members = [node, *node.descendants()]
    readings: list[str] = []
    for order in (reading_order(members), members):
        texts = "".join(n.text for n in order if n.text)
        descs = "".join(n.content_desc for n in order if n.content_desc)
        mixed = "".join(n.text + n.content_desc for n in order)
        # the texts alone too: an icon's description between two halves is not read aloud
        readings += [texts + descs, mixed, descs, texts]
    return tuple(dict.fromkeys(match_form(r) for r in readings if r))


def subtree_text(node: Node) -> str:
    """The node's subtree read as one label (texts in reading order, then descriptions)."""
    readings = subtree_readings(node)
    return readings[0] if readings else ""


def _screen_area(node: Node) -> int:
    root = node
    while root.parent is not None:
        root = root.parent
    areas = [root.bounds.width * root.bounds.height] + [
        c.bounds.width * c.bounds.height for c in root.children
    ]
    return max(1, *areas)


def captioned(label: Node) -> list[Node]:
    """The text-less clickables a caption labels: `label` is neither clickable nor inside a
    clickable, and the clickables share a small container with it (up to CAPTION_LEVELS up, at
    most CAPTION_MAX_SCREEN_SHARE of the screen) and show no text of their own."""
    if label.clickable or label.long_clickable:
        return []
    if any(a.clickable or a.long_clickable for a in label.ancestors()):
        return []
    area = _screen_area(label)
    container = label.parent
    for _ in range(CAPTION_LEVELS):
        if container is None:
            return []
        b = container.bounds
        if not b.empty and b.width * b.height > CAPTION_MAX_SCREEN_SHARE * area:
            return []
        found = [
            n
            for n in container.descendants()
            if (n.clickable or n.long_clickable)
            and n is not label
            and not any(d.text.strip() for d in (n, *n.descendants()))
        ]
        if found:
            return found
        container = container.parent
    return []


class LabelTexts:
    """The match forms of one hierarchy's nodes, each computed once. The interlock tests every
    stop selector against every node of each dump; reading a node's whole subtree again for each
    selector was most of a phone step's CPU. Keyed by node identity; it holds the nodes it has
    seen, so their ids stay unique while it lives."""

    def __init__(self) -> None:
        self._own: dict[int, tuple[Node, tuple[str, str]]] = {}
        self._subtree: dict[int, tuple[Node, tuple[str, ...]]] = {}

    def own(self, node: Node) -> tuple[str, str]:
        hit = self._own.get(id(node))
        if hit is None:
            hit = self._own[id(node)] = (node, own_texts(node))
        return hit[1]

    def subtree(self, node: Node) -> tuple[str, ...]:
        hit = self._subtree.get(id(node))
        if hit is None:
            hit = self._subtree[id(node)] = (node, subtree_readings(node))
        return hit[1]


@functools.lru_cache(maxsize=4096)
def stop_labels(selector: Selector) -> tuple[str, ...]:
    """The labels a selector names (text, text_contains, content_desc), in `match_form`."""
    raw = (selector.text, selector.text_contains, selector.content_desc)
    return tuple(n for n in (match_form(r) for r in raw if r) if n)


def _other_criteria_match(selector: Selector, node: Node) -> bool:
    """The selector's non-label criteria (resource id, class, clickable) on this node."""
    if selector.resource_id is not None and selector.resource_id not in (node.resource_id, node.short_id):
        return False
    if selector.class_name is not None and node.class_name != selector.class_name:
        return False
    return not (selector.clickable is not None and node.clickable != selector.clickable)


def names_stop(selector: Selector, node: Node, *, subtree: bool, texts: LabelTexts | None = None) -> bool:
    """Whether `node` is the control `selector` names, in `match_form` and as a substring: over its
    own text and content-desc, and with `subtree` also over its subtree's readings. `texts` shares
    the computed forms between calls on one hierarchy."""
    if not _other_criteria_match(selector, node):
        return False
    labels = stop_labels(selector)
    if selector.text_regex is not None:
        pattern = re.compile(selector.text_regex)
        candidates = [node.text, node.content_desc]
        if subtree:
            candidates.append(" ".join(n.text for n in (node, *node.descendants()) if n.text))
            candidates.append(" ".join(n.text for n in reading_order([node, *node.descendants()]) if n.text))
        if not any(pattern.search(c) for c in candidates if c):
            return False
    if selector.text_pattern is not None and not _pattern_names(selector.text_pattern, node, subtree):
        return False
    if not labels:
        return True  # an id / class / regex selector: the attributes above decided
    texts = texts or LabelTexts()
    text, desc = texts.own(node)
    readings = texts.subtree(node) if subtree else ()
    return all(label in text or label in desc or any(label in r for r in readings) for label in labels)


def _pattern_names(text_pattern: str, node: Node, subtree: bool) -> bool:
    """A `text_pattern` stop, searched (not matched whole) over the match forms of the node's text,
    content-desc and, with `subtree`, its subtree's text: a longer label still names the stop."""
    from realbench.hierarchy import compile_pattern

    loose = compile_pattern("*".join(match_form(part) for part in text_pattern.split("*")).strip("*"))
    candidates = [node.text, node.content_desc]
    if subtree:
        candidates.append("".join(n.text for n in (node, *node.descendants()) if n.text))
    return any(loose.search(match_form(c)) for c in candidates if c)
