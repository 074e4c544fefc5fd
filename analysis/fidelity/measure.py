"""`realbench fidelity`: score every labelled capture against the clone's rendering of its screen.

The renderer is passed in (the CLI wires the headless clone browser), so this module knows no
clone and no device.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from analysis.fidelity.captures import BadCapture, Capture
from analysis.fidelity.metrics import decode_image
from analysis.fidelity.report import ScreenPair, write_report
from analysis.fidelity.score import (
    WEIGHTS,
    FidelityResult,
    ScreenRenderer,
    UnscoredCapture,
    Weights,
    app_scores,
    score_pair,
)
from realbench.errors import ConfigError, RealbenchError

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
    bad: Sequence[BadCapture] = (),
) -> Measured:
    """Score each capture; `bad` are captures that could not even be loaded (named in the result)."""
    pairs: list[ScreenPair] = []
    unscored = [UnscoredCapture(capture=b.name, reason=b.reason) for b in bad]
    for cap in captures:
        # One bad capture (a route the clone lacks, a broken image) is named and the rest scored.
        try:
            if cap.label.clone is not None and cap.label.clone != clone:
                raise ConfigError(
                    f"labelled for clone {cap.label.clone!r}, but pack {pack} is {clone!r}",
                    hint="score it with that clone's pack",
                )
            height, width = decode_image(cap.screenshot).shape[:2]
            rendered = renderer.render(cap.label, width, height)
            score = score_pair(cap, rendered, weights)
        except (RealbenchError, OSError, ValueError) as exc:
            reason = exc.message if isinstance(exc, RealbenchError) else f"{type(exc).__name__}: {exc}"
            log.warning("capture %s not scored: %s", cap.name, reason)
            unscored.append(UnscoredCapture(capture=cap.name, reason=f"{cap.label}: {reason}"))
            continue
        log.info("%s: %.3f", score.label, score.score)
        pairs.append(ScreenPair(score, cap.screenshot, rendered.screenshot))
    if not pairs and unscored:
        raise ConfigError(
            f"no capture could be scored: {'; '.join(f'{u.capture}: {u.reason}' for u in unscored)}",
            hint="fix the captures' labels (`<clone>/<route>[?task=…]`) or retake them",
        )
    screens = [p.score for p in pairs]
    overall = round(sum(s.score for s in screens) / len(screens), 4) if screens else 0.0
    result = FidelityResult(
        pack=pack,
        clone=clone,
        weights=weights,
        screens=screens,
        apps=app_scores(screens, clone),
        score=overall,
        unscored=unscored,
    )
    return Measured(result, pairs)


def fidelity_run(
    captures: list[Capture],
    renderer: ScreenRenderer,
    *,
    pack: str,
    clone: str,
    out: Path | None,
    bad: Sequence[BadCapture] = (),
) -> FidelityResult:
    measured = measure(captures, renderer, pack=pack, clone=clone, bad=bad)
    if out is not None:
        write_report(out, measured.result, measured.pairs)
    return measured.result


def result_json(result: FidelityResult) -> str:
    return json.dumps(result.model_dump(mode="json"), ensure_ascii=False, indent=1)
