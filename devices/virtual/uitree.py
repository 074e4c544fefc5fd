"""Building Android-style hierarchy XML (uiautomator's `dumpWindowHierarchy` shape) and PIL text."""

from __future__ import annotations

import functools
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from PIL import ImageFont

XML_HEADER = "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>\r\n"
FONT_PATHS = (
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/truetype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
)


@functools.cache
def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    for path in FONT_PATHS:
        try:
            return ImageFont.truetype(path, size)
        except OSError:
            continue
    return ImageFont.load_default()


@dataclass
class UiNode:
    """One node of the dump; bounds are pixels (left, top, right, bottom)."""

    bounds: tuple[int, int, int, int]
    cls: str = "android.view.View"
    text: str = ""
    resource_id: str = ""
    content_desc: str = ""
    package: str = ""
    clickable: bool = False
    long_clickable: bool = False
    focusable: bool = False
    focused: bool = False
    scrollable: bool = False
    password: bool = False
    checkable: bool = False
    checked: bool = False
    selected: bool = False
    children: list[UiNode] = field(default_factory=list)

    def contains(self, x: int, y: int) -> bool:
        left, top, right, bottom = self.bounds
        return left <= x <= right and top <= y <= bottom

    def to_element(self, index: int = 0, package: str = "") -> ET.Element:
        pkg = self.package or package
        left, top, right, bottom = self.bounds
        el = ET.Element(
            "node",
            {
                "index": str(index),
                "text": self.text,
                "resource-id": self.resource_id,
                "class": self.cls,
                "package": pkg,
                "content-desc": self.content_desc,
                "checkable": _b(self.checkable),
                "checked": _b(self.checked),
                "clickable": _b(self.clickable),
                "enabled": "true",
                "focusable": _b(self.focusable),
                "focused": _b(self.focused),
                "scrollable": _b(self.scrollable),
                "long-clickable": _b(self.long_clickable),
                "password": _b(self.password),
                "selected": _b(self.selected),
                "visible-to-user": "true",
                "bounds": f"[{left},{top}][{right},{bottom}]",
            },
        )
        for i, child in enumerate(self.children):
            el.append(child.to_element(i, pkg))
        return el


def _b(value: bool) -> str:
    return "true" if value else "false"


def hierarchy_xml(windows: list[ET.Element], rotation: int = 0) -> str:
    """Wrap window root nodes in `<hierarchy>`; later windows are on top (hit-tested first)."""
    root = ET.Element("hierarchy", {"rotation": str(rotation)})
    for i, win in enumerate(windows):
        win.set("index", str(i))
        root.append(win)
    out: list[str] = []
    if not _write_plain(root, out):
        return XML_HEADER + ET.tostring(root, encoding="unicode")
    return XML_HEADER + "".join(out)


# What ElementTree escapes in an attribute value, and how (the same entities, in the same order).
_ATTR_SPECIAL = re.compile('[&<>"\r\n\t]')
_ATTR_ENTITIES = (
    ("&", "&amp;"),
    ("<", "&lt;"),
    (">", "&gt;"),
    ('"', "&quot;"),
    ("\r", "&#13;"),
    ("\n", "&#10;"),
    ("\t", "&#09;"),
)
_CDATA_SPECIAL = re.compile("[&<>]")


def _attr(value: str) -> str:
    if _ATTR_SPECIAL.search(value) is None:
        return value
    for char, entity in _ATTR_ENTITIES:
        value = value.replace(char, entity)
    return value


def _cdata(text: str) -> str:
    if _CDATA_SPECIAL.search(text) is None:
        return text
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _write_plain(el: ET.Element, out: list[str]) -> bool:
    """Serialise a tree byte for byte as `ET.tostring(el, encoding="unicode")` does, for the
    trees dumps are made of (plain tags and string attributes, no namespaces): a dump is written on
    every settle poll and every guard read, and ElementTree's general writer first walks the whole
    tree for namespaces. False (with `out` partly written) for any other tree: the caller then
    uses ElementTree itself."""
    tag = el.tag
    if not isinstance(tag, str) or "{" in tag:
        return False
    parts = ["<", tag]
    for key, value in el.items():
        if not isinstance(key, str) or not isinstance(value, str) or "{" in key:
            return False
        parts.append(f' {key}="{_attr(value)}"')
    out.append("".join(parts))
    text = el.text
    if text or len(el):
        out.append(">")
        if text:
            if not isinstance(text, str):
                return False
            out.append(_cdata(text))
        for child in el:
            if not _write_plain(child, out):
                return False
        out.append(f"</{tag}>")
    else:
        out.append(" />")
    tail = el.tail
    if tail:
        if not isinstance(tail, str):
            return False
        out.append(_cdata(tail))
    return True


def window_elements(xml: str) -> list[ET.Element]:
    """The top-level nodes of a `<hierarchy>` document (to re-compose it with overlays)."""
    root = ET.fromstring(xml)
    return list(root) if root.tag == "hierarchy" else [root]
