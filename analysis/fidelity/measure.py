"""`realbench fidelity`: score every labelled capture against the clone's rendering of its screen.

The renderer is passed in (the CLI wires the headless clone browser), so this module knows no
clone and no device.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from analysis.fidelity.captures import Capture
from analysis.fidelity.metrics import decode_image
from analysis.fidelity.report import ScreenPair, write_report
from analysis.fidelity.score import WEIGHTS, FidelityResult, ScreenRenderer, Weights, app_scores, score_pair
from realbench.errors import ConfigError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Measured:
    """The scores, and each pair's images for the report."""

    result: FidelityResult
    pairs: list[ScreenPair]


def measure(
    captures: list[Capture],
    renderer: ScreenRenderer,
    *,
    pack: str,
    clone: str,
    weights: Weights = WEIGHTS,
) -> Measured:
    pairs: list[ScreenPair] = []
    for cap in captures:
        if cap.label.clone is not None and cap.label.clone != clone:
            raise ConfigError(
                f"capture {cap.name} is labelled for clone {cap.label.clone!r}, but pack {pack} is {clone!r}",
                hint="score it with that clone's pack",
            )
        height, width = decode_image(cap.screenshot).shape[:2]
        rendered = renderer.render(cap.label, width, height)
        score = score_pair(cap, rendered, weights)
        log.info("%s: %.3f", score.label, score.score)
        pairs.append(ScreenPair(score, cap.screenshot, rendered.screenshot))
    screens = [p.score for p in pairs]
    overall = round(sum(s.score for s in screens) / len(screens), 4) if screens else 0.0
    result = FidelityResult(
        pack=pack,
        clone=clone,
        weights=weights,
        screens=screens,
        apps=app_scores(screens, clone),
        score=overall,
    )
    return Measured(result, pairs)


def fidelity_run(
    captures: list[Capture], renderer: ScreenRenderer, *, pack: str, clone: str, out: Path | None
) -> FidelityResult:
    measured = measure(captures, renderer, pack=pack, clone=clone)
    if out is not None:
        write_report(out, measured.result, measured.pairs)
    return measured.result


def result_json(result: FidelityResult) -> str:
    return json.dumps(result.model_dump(mode="json"), ensure_ascii=False, indent=1)
