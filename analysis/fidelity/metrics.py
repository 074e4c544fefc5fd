"""The measurements behind a fidelity score: visible text, interactive elements and appearance.

Each works on one pair — the capture of a real screen and the clone's rendering of the same screen
at the same resolution — and returns numbers in [0, 1] (1 = the same) plus what did not match.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum

import cv2
import numpy as np

from realbench.errors import ConfigError
from realbench.hierarchy import Bounds, Hierarchy, Node

# A node counts as on screen when at least this share of its area lies inside the screen.
VISIBLE_SHARE = 0.5
# Two unmatched texts or elements in the same place (bounds IoU at least this) are one control
# under two labels: a relabel.
RELABEL_IOU = 0.5
# SSIM at this width (height keeps the capture's aspect), Gaussian window as in Wang et al. 2004.
SSIM_WIDTH = 360
SSIM_WINDOW = 11
SSIM_SIGMA = 1.5
# Colour layout: mean CIELAB colour of each cell of a coarse grid (columns x rows).
COLOUR_GRID = (8, 16)
# A mean ΔE (CIE76) of this much or more counts as entirely different colours.
COLOUR_DELTA_E_MAX = 50.0

_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Compatibility forms folded (full-width digits, ideographic spaces), whitespace removed."""
    return _SPACE.sub("", unicodedata.normalize("NFKC", text))


def _area(b: Bounds) -> int:
    return max(0, b.width) * max(0, b.height)


def iou(a: Bounds, b: Bounds) -> float:
    inter = Bounds(max(a.left, b.left), max(a.top, b.top), min(a.right, b.right), min(a.bottom, b.bottom))
    overlap = _area(inter) if inter.right > inter.left and inter.bottom > inter.top else 0
    union = _area(a) + _area(b) - overlap
    return overlap / union if union else 0.0


def on_screen(node: Node, width: int, height: int) -> bool:
    b = node.bounds
    if b.empty or _area(b) == 0:
        return False
    inside = Bounds(max(b.left, 0), max(b.top, 0), min(b.right, width), min(b.bottom, height))
    if inside.right <= inside.left or inside.bottom <= inside.top:
        return False
    return _area(inside) >= VISIBLE_SHARE * _area(b)


# --- visible text ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScreenText:
    text: str
    bounds: Bounds


def of_app(node: Node, package: str | None) -> bool:
    """True unless the node belongs to another package (the system status bar, a launcher)."""
    return not package or not node.package or node.package == package


def visible_texts(tree: Hierarchy, width: int, height: int, package: str | None = None) -> list[ScreenText]:
    """Every text and content description a person sees on the screen (normalised, non-empty),
    of the app's own package when `package` is given."""
    out: list[ScreenText] = []
    for node in tree.nodes:
        if not on_screen(node, width, height) or not of_app(node, package):
            continue
        for raw in (node.text, node.content_desc):
            text = normalise(raw)
            if text:
                out.append(ScreenText(text, node.bounds))
    return out


@dataclass(frozen=True)
class Relabel:
    """The same place shows `real` on the capture and `clone` on the clone."""

    real: str
    clone: str


@dataclass
class TextMatch:
    recall: float
    precision: float
    missing: list[str] = field(default_factory=list)  # on the capture, not on the clone
    extra: list[str] = field(default_factory=list)  # on the clone, not on the capture
    relabels: list[Relabel] = field(default_factory=list)

    @property
    def f1(self) -> float:
        total = self.recall + self.precision
        return 2 * self.recall * self.precision / total if total else 0.0


def _pair_by_place(real: list[ScreenText], clone: list[ScreenText]) -> list[Relabel]:
    pairs: list[Relabel] = []
    used: set[int] = set()
    for r in real:
        best, best_iou = None, RELABEL_IOU
        for i, c in enumerate(clone):
            if i in used:
                continue
            overlap = iou(r.bounds, c.bounds)
            if overlap >= best_iou:
                best, best_iou = i, overlap
        if best is not None:
            used.add(best)
            pairs.append(Relabel(r.text, clone[best].text))
    return pairs


def match_texts(real: list[ScreenText], clone: list[ScreenText]) -> TextMatch:
    """Recall and precision of the capture's strings on the clone screen, as multisets."""
    real_count = Counter(t.text for t in real)
    clone_count = Counter(t.text for t in clone)
    common = sum((real_count & clone_count).values())
    recall = common / sum(real_count.values()) if real_count else 1.0
    precision = common / sum(clone_count.values()) if clone_count else (1.0 if not real_count else 0.0)
    missing_count = real_count - clone_count
    extra_count = clone_count - real_count

    def leftovers(items: list[ScreenText], left: Counter[str]) -> list[ScreenText]:
        out, budget = [], Counter(left)
        for t in items:
            if budget[t.text] > 0:
                budget[t.text] -= 1
                out.append(t)
        return out

    missing, extra = leftovers(real, missing_count), leftovers(clone, extra_count)
    return TextMatch(
        recall=recall,
        precision=precision,
        missing=[t.text for t in missing],
        extra=[t.text for t in extra],
        relabels=_pair_by_place(missing, extra),
    )


# --- interactive elements ---------------------------------------------------------------------


class Role(StrEnum):
    EDIT = "edit"
    CONTROL = "control"


@dataclass(frozen=True)
class Element:
    """A control a person can use: its role, its label (own or descendants' text) and its place."""

    role: Role
    label: str
    bounds: Bounds


def interactive_elements(
    tree: Hierarchy, width: int, height: int, package: str | None = None
) -> list[Element]:
    out: list[Element] = []
    for node in tree.nodes:
        editable = node.class_name.endswith("EditText")
        if not (node.clickable or node.long_clickable or editable) or not on_screen(node, width, height):
            continue
        if not of_app(node, package):
            continue
        label = normalise(node.all_text()) or normalise(node.resource_id.rpartition("/")[2])
        out.append(Element(Role.EDIT if editable else Role.CONTROL, label, node.bounds))
    return out


@dataclass(frozen=True)
class ElementPair:
    real: Element
    clone: Element
    iou: float


@dataclass
class ElementMatch:
    """Elements matched by role and label; `score` is the Dice coefficient weighted by bounds IoU
    (2·ΣIoU / (n_real + n_clone)), so a missing, an extra and a moved control all cost."""

    score: float
    pairs: list[ElementPair] = field(default_factory=list)
    missing: list[Element] = field(default_factory=list)
    extra: list[Element] = field(default_factory=list)

    @property
    def mean_iou(self) -> float:
        return sum(p.iou for p in self.pairs) / len(self.pairs) if self.pairs else 0.0


def match_elements(real: list[Element], clone: list[Element]) -> ElementMatch:
    pairs: list[ElementPair] = []
    used: set[int] = set()
    missing: list[Element] = []
    for r in real:
        best, best_iou = None, -1.0
        for i, c in enumerate(clone):
            if i in used or c.role is not r.role or c.label != r.label:
                continue
            overlap = iou(r.bounds, c.bounds)
            if overlap > best_iou:
                best, best_iou = i, overlap
        if best is None:
            missing.append(r)
        else:
            used.add(best)
            pairs.append(ElementPair(r, clone[best], best_iou))
    extra = [c for i, c in enumerate(clone) if i not in used]
    total = len(real) + len(clone)
    score = 2 * sum(p.iou for p in pairs) / total if total else 1.0
    return ElementMatch(score=score, pairs=pairs, missing=missing, extra=extra)


# --- appearance --------------------------------------------------------------------------------


def decode_image(data: bytes) -> np.ndarray:
    """BGR pixels of a PNG or JPEG."""
    img = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_COLOR)
    if img is None:
        raise ConfigError("a screenshot could not be decoded (not a PNG or JPEG)")
    return img


def common_size(real: np.ndarray, width: int = SSIM_WIDTH) -> tuple[int, int]:
    h, w = real.shape[:2]
    return width, max(1, round(h * width / w))


def ssim(real: np.ndarray, clone: np.ndarray) -> float:
    """Mean structural similarity of the two screens' luminance at a common size."""
    size = common_size(real)
    a = cv2.cvtColor(cv2.resize(real, size, interpolation=cv2.INTER_AREA), cv2.COLOR_BGR2GRAY)
    b = cv2.cvtColor(cv2.resize(clone, size, interpolation=cv2.INTER_AREA), cv2.COLOR_BGR2GRAY)
    x, y = a.astype(np.float64), b.astype(np.float64)
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2

    def blur(img: np.ndarray) -> np.ndarray:
        return cv2.GaussianBlur(img, (SSIM_WINDOW, SSIM_WINDOW), SSIM_SIGMA)

    mx, my = blur(x), blur(y)
    vx, vy, cxy = blur(x * x) - mx * mx, blur(y * y) - my * my, blur(x * y) - mx * my
    s = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
    return float(np.clip(s.mean(), 0.0, 1.0))


def colour_layout_distance(real: np.ndarray, clone: np.ndarray) -> float:
    """Mean CIELAB ΔE between the two screens' coarse colour grids, scaled to [0, 1]."""

    def grid(img: np.ndarray) -> np.ndarray:
        small = cv2.resize(img, COLOUR_GRID, interpolation=cv2.INTER_AREA)
        return cv2.cvtColor(small.astype(np.float32) / 255.0, cv2.COLOR_BGR2LAB)

    delta = np.linalg.norm(grid(real) - grid(clone), axis=2)
    return float(min(1.0, delta.mean() / COLOUR_DELTA_E_MAX))
