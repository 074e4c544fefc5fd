"""The fidelity report: each capture beside the clone's screen, unmatched texts and controls marked.

One self-contained HTML file (images as data URIs). On the capture, controls the clone lacks are
boxed red; on the clone, controls the capture lacks are boxed orange and matched ones green.
"""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from PIL import Image, ImageDraw

from analysis.fidelity.score import ElementNote, FidelityResult, ScreenScore

THUMB_WIDTH = 360
MISSING = (220, 38, 38)
EXTRA = (234, 138, 0)
MATCHED = (22, 163, 74)


@dataclass(frozen=True)
class ScreenPair:
    """A scored pair with both screenshots (encoded PNG or JPEG)."""

    score: ScreenScore
    capture_image: bytes
    clone_image: bytes


def _marked(image: bytes, boxes: list[tuple[ElementNote, tuple[int, int, int]]]) -> str:
    img = Image.open(io.BytesIO(image)).convert("RGB")
    draw = ImageDraw.Draw(img)
    line = max(3, img.width // 200)
    for note, colour in boxes:
        left, top, right, bottom = note.bounds
        draw.rectangle([left, top, right, bottom], outline=colour, width=line)
    scale = THUMB_WIDTH / img.width
    img = img.resize((THUMB_WIDTH, max(1, round(img.height * scale))), Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=82)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()


def render_report(result: FidelityResult, pairs: list[ScreenPair]) -> str:
    env = Environment(
        loader=FileSystemLoader(str(Path(__file__).parent)), autoescape=select_autoescape(["html", "j2"])
    )
    views = []
    for pair in pairs:
        s = pair.score
        views.append(
            {
                "s": s,
                "capture_img": _marked(pair.capture_image, [(e, MISSING) for e in s.missing_elements]),
                "clone_img": _marked(
                    pair.clone_image,
                    [(e, MATCHED) for e in s.matched_elements] + [(e, EXTRA) for e in s.extra_elements],
                ),
            }
        )
    return env.get_template("report.html.j2").render(result=result, views=views)


def write_report(path: Path, result: FidelityResult, pairs: list[ScreenPair]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(render_report(result, pairs), encoding="utf-8")
    tmp.replace(path)
    return path
