"""What a judge needs to see of each touch: where it landed on its screenshot, and which element
it hit (named from the hierarchy stored with that step)."""

from __future__ import annotations

import io
from typing import Any

from realbench.actions import COORD_MAX
from realbench.errors import RealbenchError
from realbench.hierarchy import Hierarchy, Node

TOUCH_TYPES = ("click", "double_click", "long_press", "swipe")
MARK = (255, 32, 32)


def touch_point(action: dict[str, Any] | None) -> tuple[int, int] | None:
    """The normalised point a touch starts at (None for other actions)."""
    if not action or action.get("type") not in TOUCH_TYPES:
        return None
    try:
        return (int(action["x"]), int(action["y"]))
    except (KeyError, TypeError, ValueError):
        return None


def element_name(node: Node) -> str:
    """How a person would name the element: its text, else its description, else its id."""
    label = node.text.strip() or node.content_desc.strip()
    if not label:
        inner = " ".join(node.all_text().split())
        label = inner[:60]
    kind = node.class_name.rsplit(".", 1)[-1] or "element"
    if label:
        return f'"{label}" ({kind})'
    if node.short_id:
        return f"#{node.short_id} ({kind})"
    return kind


def tapped_element(hierarchy_xml: str | None, action: dict[str, Any] | None) -> str | None:
    """The element a touch hit, named; None without a hierarchy or for non-touch actions."""
    point = touch_point(action)
    if point is None or not hierarchy_xml:
        return None
    try:
        tree = Hierarchy(hierarchy_xml)
    except RealbenchError:
        return None
    screen = tree.screen
    if screen.empty:
        return None
    px = screen.left + point[0] * (screen.width - 1) / COORD_MAX
    py = screen.top + point[1] * (screen.height - 1) / COORD_MAX
    node = tree.target_at(px, py)
    if node is None:
        hits = tree.at(px, py)
        node = hits[0] if hits else None
    return element_name(node) if node is not None else "nothing (empty area)"


def draw_touch(png: bytes, action: dict[str, Any] | None) -> bytes:
    """The screenshot with the touch drawn on it: a ring at the point, a line to a swipe's end."""
    point = touch_point(action)
    if point is None or action is None:
        return png
    from PIL import Image, ImageDraw

    with Image.open(io.BytesIO(png)) as img:
        canvas = img.convert("RGB")
    draw = ImageDraw.Draw(canvas)
    w, h = canvas.size
    radius = max(6, round(min(w, h) * 0.03))
    width = max(2, radius // 3)

    def px(x: int, y: int) -> tuple[float, float]:
        return (x * (w - 1) / COORD_MAX, y * (h - 1) / COORD_MAX)

    cx, cy = px(*point)
    draw.ellipse((cx - radius, cy - radius, cx + radius, cy + radius), outline=MARK, width=width)
    if action.get("type") == "swipe" and "x2" in action and "y2" in action:
        ex, ey = px(int(action["x2"]), int(action["y2"]))
        draw.line((cx, cy, ex, ey), fill=MARK, width=width)
        draw.ellipse((ex - width * 2, ey - width * 2, ex + width * 2, ey + width * 2), fill=MARK)
    buf = io.BytesIO()
    canvas.save(buf, format="PNG")
    return buf.getvalue()
