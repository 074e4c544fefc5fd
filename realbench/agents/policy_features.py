"""What the element policy sees and can do: node views, candidate actions and their features.

The policy sees only what a phone shows (the hierarchy's nodes) and the instruction, plus its own
past actions in this episode. Everything here is plain Python and numpy so that a checkpoint runs
where torch is not installed; training (devices/rl/policy_train.py) builds the same features.

Text is hashed into buckets of character n-grams (1–3), salted by the kind of field it came from (the
visible text of nodes, the instruction and typed values share one salt, so that equal strings meet), so the model needs no vocabulary and handles Chinese and Latin text alike.
"""

from __future__ import annotations

import functools
import re
import zlib
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from realbench.hierarchy import Bounds, Node, strip_spacing

MAX_GRAM_CHARS = 48  # n-grams are taken from this many leading characters of a text
MAX_SPANS = 24
MAX_QUERY_TOKENS = 16
MAX_CONTEXT_UP = 3  # how far up a control's label is looked for (a settings row, a passenger's block)

_EDIT_CLASSES = ("EditText",)
_CHECK_CLASSES = ("CheckBox", "RadioButton", "Switch")


class Kind(IntEnum):
    """The four kinds of candidate action."""

    CLICK = 0
    TYPE = 1
    BACK = 2
    TERMINATE = 3


@dataclass(frozen=True)
class NodeView:
    """One node as the policy sees it. `bounds` is None on the browser-free path (no layout);
    `ref` is the index of the node in the source's list, used to carry a choice out there."""

    text: str
    desc: str
    class_name: str
    resource_id: str
    clickable: bool
    focused: bool
    enabled: bool = True
    checked: bool = False
    selected: bool = False
    bounds: Bounds | None = None
    ref: int = -1
    # the words that label this control from beside it (`RowLabels`); "" unless the policy reads them
    context: str = ""

    @property
    def editable(self) -> bool:
        return self.class_name.endswith(_EDIT_CLASSES)

    @property
    def key(self) -> str:
        """What identifies "the same control" across steps (for the policy's memory)."""
        key = f"{self.resource_id}|{self.class_name}|{self.text[:32]}|{self.desc[:32]}"
        # a repeated control (one 退票 per passenger) is told apart by its row
        return f"{key}|{self.context[:32]}" if self.context else key

    @classmethod
    def of(cls, node: Node, ref: int, *, with_bounds: bool, labels: RowLabels | None = None) -> NodeView:
        # a clickable container without its own text (a list row) is read by the text inside it
        text = node.text or (node.all_text()[:MAX_GRAM_CHARS] if node.clickable else "")
        return cls(
            text=text,
            desc=node.content_desc,
            class_name=node.class_name,
            resource_id=node.short_id,
            clickable=node.clickable,
            focused=node.focused,
            enabled=node.enabled,
            checked=node.checked,
            selected=node.selected,
            bounds=node.bounds if with_bounds else None,
            ref=ref,
            context=labels.of(node) if labels is not None and actionable_node(node) else "",
        )


def actionable_node(node: Node) -> bool:
    """`actionable` for a hierarchy node, before it has a view."""
    return node.clickable or node.class_name.endswith(_EDIT_CLASSES)


class RowLabels:
    """What labels a control from beside it, on one screen.

    A settings switch reads "开" or "关" and its row's other text says what it switches; the two 退票
    buttons of a two-passenger order read the same and only their blocks name the passenger. A
    control's context is the text, outside any control, of its nearest ancestor (at most
    MAX_CONTEXT_UP levels up) that holds such text. Built from the hierarchy's parent links, so the
    browser's dump and the browser-free parse give the same words.
    """

    def __init__(self) -> None:
        self._memo: dict[int, str] = {}

    def of(self, node: Node) -> str:
        for level, ancestor in enumerate(node.ancestors()):
            if level >= MAX_CONTEXT_UP:
                break
            text = self._free_text(ancestor)
            if text:
                return text
        return ""

    def _free_text(self, node: Node) -> str:
        """The text of `node` and its descendants, leaving out controls and everything inside them."""
        key = id(node)
        if key not in self._memo:
            parts = [] if actionable_node(node) or not node.text else [node.text]
            parts += [self._free_text(c) for c in node.children if not actionable_node(c)]
            # without spacing: the browser's dump and the browser-free parse space inline runs differently
            self._memo[key] = strip_spacing("".join(parts))[:MAX_GRAM_CHARS]
        return self._memo[key]


def actionable(view: NodeView) -> bool:
    """A node the policy may click: clickable, or a text field (which a tap focuses)."""
    return view.clickable or view.editable


def grams(text: str, salt: str, buckets: int) -> list[int]:
    """Hashed character 1-, 2- and 3-grams of `text` (lower-cased), salted by the field name."""
    return list(_grams(text, salt, buckets))


@functools.lru_cache(maxsize=65536)
def _grams(text: str, salt: str, buckets: int) -> tuple[int, ...]:
    # screens repeat the same labels step after step: hashing them once is a fifth of a training's time
    text = text.lower()[:MAX_GRAM_CHARS]
    out: list[int] = []
    for n in (1, 2, 3):
        for i in range(len(text) - n + 1):
            g = text[i : i + n]
            if g.isspace():
                continue
            out.append(zlib.crc32(f"{salt}\x1f{g}".encode()) % buckets)
    return tuple(out)


def shape(text: str) -> str:
    """A coarse shape of a typed value: digits/letters/CJK and a length class (a hint for which field)."""
    if text.isdigit():
        kind = "d"
    elif re.fullmatch(r"[A-Za-z0-9._@-]+", text):
        kind = "a"
    else:
        kind = "c"
    size = "s" if len(text) <= 4 else "m" if len(text) <= 10 else "l"
    return f"<{kind}{size}>"


def node_grams(view: NodeView, buckets: int) -> list[int]:
    cls_short = view.class_name.rsplit(".", 1)[-1]
    if cls_short.endswith(("Layout", "ScrollView")):
        # containers: the browser names them by their CSS layout, the browser-free path cannot
        cls_short = "Layout"
    return (
        grams(view.text, "t", buckets)
        + grams(view.desc, "t", buckets)
        + grams(view.resource_id.replace("_", " "), "r", buckets)
        + grams(cls_short, "c", buckets)
    )


_QUOTED = re.compile(r"[“\"「『]([^”\"」』]{1,40})[”\"」』]")
_LATIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]*")
_CHUNK = re.compile(r"[^\s，。、；：！？,.;:!?（）()“”\"「」『』]+")


def spans(instruction: str) -> list[str]:
    """Values the policy may type: quoted text, runs of digits/Latin letters, and short chunks of
    the instruction between punctuation (names, banks, stations)."""
    found: list[str] = []
    for m in _QUOTED.finditer(instruction):
        found.append(m.group(1))
    found += _LATIN.findall(instruction)
    for chunk in _CHUNK.findall(instruction):
        if 2 <= len(chunk) <= 6:
            found.append(chunk)
    out: list[str] = []
    for s in found:
        if s not in out:
            out.append(s)
    return out[:MAX_SPANS]


def query_tokens(instruction: str) -> list[str]:
    """Pieces of the instruction the nodes attend over: its punctuation-separated chunks, long ones
    cut into 4-character windows."""
    out: list[str] = []
    for chunk in _CHUNK.findall(instruction):
        out += [chunk[i : i + 4] for i in range(0, len(chunk), 4)]
    return out[:MAX_QUERY_TOKENS] or [instruction[:4] or " "]


@functools.lru_cache(maxsize=65536)
def _bigrams(text: str) -> frozenset[str]:
    # labels and the instruction repeat step after step, like the n-grams above
    text = re.sub(r"\s+", "", text.lower())
    return frozenset({text[i : i + 2] for i in range(len(text) - 1)} or ({text} if text else set()))


def overlap(text: str, instruction: str) -> float:
    """Share of `text`'s character bigrams that occur in the instruction."""
    mine = _bigrams(text)
    if not mine:
        return 0.0
    return len(mine & _bigrams(instruction)) / len(mine)


@dataclass
class Memory:
    """The policy's memory of its own episode (never the app's state)."""

    steps: int = 0
    clicks: dict[str, int] = field(default_factory=dict)
    last_kind: Kind | None = None
    last_key: str = ""
    typed: dict[str, int] = field(default_factory=dict)
    # how well the last clicked control's row labels and own label matched the instruction: having
    # just switched the row the instruction names is a reason to stop (features 18–19 of terminate)
    last_context_match: float = 0.0
    last_label_match: float = 0.0

    def record(self, kind: Kind, key: str = "", text: str = "") -> None:
        self.steps += 1
        self.last_kind = kind
        self.last_key = key
        self.last_context_match = self.last_label_match = 0.0
        if kind is Kind.CLICK:
            self.clicks[key] = self.clicks.get(key, 0) + 1
        elif kind is Kind.TYPE:
            self.typed[text] = self.typed.get(text, 0) + 1

    def record_click(self, view: NodeView, instruction: str) -> None:
        self.record(Kind.CLICK, view.key)
        self.last_label_match = overlap(view.text or view.desc, instruction)
        self.last_context_match = overlap(view.context, instruction)


N_FEATURES = 20


@dataclass
class Candidate:
    """One possible action with its model inputs: two bags of hashed grams (`a`, `b`) and dense
    features `f` (N_FEATURES)."""

    kind: Kind
    a: list[int]
    b: list[int]
    f: np.ndarray
    node: NodeView | None = None
    text: str = ""


@dataclass
class Step:
    """The candidates of one decision and the instruction's query bags."""

    candidates: list[Candidate]
    query: list[list[int]]


def _base_features(kind: Kind, memory: Memory, max_steps: int) -> np.ndarray:
    f = np.zeros(N_FEATURES, dtype=np.float32)
    f[int(kind)] = 1.0
    f[4] = min(memory.steps, max_steps) / max(1, max_steps)
    f[5] = 1.0 if memory.last_kind is Kind.CLICK else 0.0
    f[6] = 1.0 if memory.last_kind is Kind.TYPE else 0.0
    f[7] = min(len(memory.clicks), 8) / 8
    return f


def build_step(
    instruction: str,
    views: list[NodeView],
    memory: Memory,
    buckets: int,
    max_steps: int = 20,
    *,
    context: bool = False,
) -> Step:
    """All candidate actions for one screen, in a fixed order: clicks (document order), typed spans
    (only with a focused text field), back, terminate. `context` (a policy shape's): terminate also
    sees how well the last click matched the instruction (the views carry their row labels)."""
    cands: list[Candidate] = []
    for view in views:
        if not actionable(view):
            continue
        f = _base_features(Kind.CLICK, memory, max_steps)
        label = view.text or view.desc
        f[8] = overlap(label, instruction)
        f[9] = 1.0 if len(label) >= 2 and label in instruction else 0.0
        f[10] = 1.0 if view.editable else 0.0
        f[11] = 1.0 if view.focused else 0.0
        f[12] = 1.0 if view.checked or view.selected else 0.0
        f[13] = 1.0 if view.enabled else 0.0
        f[14] = min(memory.clicks.get(view.key, 0), 3) / 3
        f[15] = 1.0 if memory.last_key == view.key else 0.0
        f[16] = 1.0 if view.class_name.endswith(_CHECK_CLASSES) else 0.0
        f[17] = 1.0 if not label else 0.0
        a = node_grams(view, buckets)
        if view.context:
            f[18] = overlap(view.context, instruction)
            f[19] = 1.0
            a = a + grams(view.context, "t", buckets)
        cands.append(Candidate(Kind.CLICK, a, [], f, node=view))
    focus = next((v for v in views if v.focused and v.editable), None)
    if focus is not None:
        field_grams = node_grams(focus, buckets)
        for span in spans(instruction):
            f = _base_features(Kind.TYPE, memory, max_steps)
            f[8] = 1.0 if focus.text and span in focus.text else 0.0
            f[9] = min(memory.typed.get(span, 0), 2) / 2
            f[10] = 1.0 if span.isdigit() else 0.0
            f[11] = min(len(span), 20) / 20
            f[12] = min(len(memory.typed), 4) / 4
            a = grams(span, "t", buckets) + grams(shape(span), "h", buckets)
            cands.append(Candidate(Kind.TYPE, a, field_grams, f, node=focus, text=span))
    cands.append(Candidate(Kind.BACK, [], [], _base_features(Kind.BACK, memory, max_steps)))
    stop = _base_features(Kind.TERMINATE, memory, max_steps)
    if context:
        stop[18] = memory.last_context_match
        stop[19] = memory.last_label_match
    cands.append(Candidate(Kind.TERMINATE, [], [], stop))
    query = [grams(tok, "t", buckets) for tok in query_tokens(instruction)]
    return Step(cands, query)
