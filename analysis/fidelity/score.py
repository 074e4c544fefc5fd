"""One fidelity score per screen and per app, from the pair measurements in `metrics`.

    score = 0.30 · text F1 + 0.30 · element match + 0.25 · SSIM + 0.15 · (1 − colour distance)

Text and controls weigh most because they are what an agent reads and taps; SSIM catches layout and
imagery that the hierarchy does not show (an ad's picture, a WebView); the colour layout catches a
different theme or a banner of another colour. An app's score is the mean of its screens' scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from analysis.fidelity.captures import Capture, ScreenLabel
from analysis.fidelity.metrics import (
    Element,
    colour_layout_distance,
    decode_image,
    interactive_elements,
    match_elements,
    match_texts,
    ssim,
    visible_texts,
)
from realbench.hierarchy import Hierarchy


class Weights(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    text: float = 0.30
    elements: float = 0.30
    ssim: float = 0.25
    colour: float = 0.15

    def combine(
        self, text_f1: float, element_match: float, ssim_value: float, colour_distance: float
    ) -> float:
        total = self.text + self.elements + self.ssim + self.colour
        value = (
            self.text * text_f1
            + self.elements * element_match
            + self.ssim * ssim_value
            + self.colour * (1.0 - colour_distance)
        )
        return value / total


WEIGHTS = Weights()


class RenderedScreen(Protocol):
    """The clone's screen for a label, at the capture's resolution."""

    @property
    def screenshot(self) -> bytes: ...

    @property
    def hierarchy(self) -> str: ...

    @property
    def route(self) -> str: ...


class ScreenRenderer(Protocol):
    def render(self, label: ScreenLabel, width: int, height: int) -> RenderedScreen: ...


class ElementNote(BaseModel):
    role: str
    label: str
    bounds: list[int]


class ScreenScore(BaseModel):
    """The JSON of one scored pair (the report draws the pair from `capture` and the rendering)."""

    label: str
    capture: str
    package: str | None = None
    route: str
    width: int
    height: int
    text_recall: float
    text_precision: float
    element_match: float
    element_iou: float
    ssim: float
    colour_distance: float
    score: float
    # The capture came from a virtual phone (a drifted clone standing in for the app), not a phone.
    virtual: bool = False
    missing_texts: list[str] = Field(default_factory=list)
    extra_texts: list[str] = Field(default_factory=list)
    relabelled: list[dict[str, str]] = Field(default_factory=list)
    missing_elements: list[ElementNote] = Field(default_factory=list)
    extra_elements: list[ElementNote] = Field(default_factory=list)
    matched_elements: list[ElementNote] = Field(default_factory=list)


class AppScore(BaseModel):
    app: str
    screens: int
    score: float


class UnscoredCapture(BaseModel):
    """A capture the run could not score, and why (the others are scored all the same)."""

    capture: str
    reason: str


class FidelityResult(BaseModel):
    pack: str
    clone: str
    weights: Weights = WEIGHTS
    screens: list[ScreenScore]
    apps: list[AppScore]
    score: float
    unscored: list[UnscoredCapture] = Field(default_factory=list)


def _note(e: Element) -> ElementNote:
    b = e.bounds
    return ElementNote(role=str(e.role), label=e.label, bounds=[b.left, b.top, b.right, b.bottom])


def score_pair(capture: Capture, clone: RenderedScreen, weights: Weights = WEIGHTS) -> ScreenScore:
    real_img = decode_image(capture.screenshot)
    clone_img = decode_image(clone.screenshot)
    height, width = real_img.shape[:2]
    real_tree, clone_tree = Hierarchy(capture.hierarchy), Hierarchy(clone.hierarchy)
    # on the capture only the app's own nodes count: the system status bar is no part of the clone
    app = capture.package
    texts = match_texts(
        visible_texts(real_tree, width, height, app), visible_texts(clone_tree, width, height)
    )
    elements = match_elements(
        interactive_elements(real_tree, width, height, app), interactive_elements(clone_tree, width, height)
    )
    s = ssim(real_img, clone_img)
    colour = colour_layout_distance(real_img, clone_img)
    result = ScreenScore(
        label=str(capture.label),
        capture=capture.name,
        package=capture.package,
        virtual=capture.virtual,
        route=clone.route,
        width=width,
        height=height,
        text_recall=round(texts.recall, 4),
        text_precision=round(texts.precision, 4),
        element_match=round(elements.score, 4),
        element_iou=round(elements.mean_iou, 4),
        ssim=round(s, 4),
        colour_distance=round(colour, 4),
        score=round(weights.combine(texts.f1, elements.score, s, colour), 4),
        missing_texts=texts.missing,
        extra_texts=texts.extra,
        relabelled=[{"real": r.real, "clone": r.clone} for r in texts.relabels],
        missing_elements=[_note(e) for e in elements.missing],
        extra_elements=[_note(e) for e in elements.extra],
        matched_elements=[_note(p.clone) for p in elements.pairs],
    )
    return result


def app_scores(screens: Sequence[ScreenScore], default_app: str) -> list[AppScore]:
    by_app: dict[str, list[float]] = {}
    for s in screens:
        by_app.setdefault(s.package or default_app, []).append(s.score)
    return [
        AppScore(app=app, screens=len(v), score=round(sum(v) / len(v), 4))
        for app, v in sorted(by_app.items())
    ]
