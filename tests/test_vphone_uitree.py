"""The virtual phone's dump writer: the same text ElementTree writes, for every tree it is given."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from devices.virtual.uitree import XML_HEADER, UiNode, hierarchy_xml, window_elements
from realbench.hierarchy import Hierarchy

# Characters an app's labels can hold that XML must escape, plus plain and CJK text.
PIECES = ["", "a", "确定", "&", "<", ">", '"', "'", "\r", "\n", "\t", " ", "&amp;", "]]>", "支付 ¥1"]


def _reference(windows: list[ET.Element], rotation: int = 0) -> str:
    root = ET.Element("hierarchy", {"rotation": str(rotation)})
    for i, win in enumerate(windows):
        win.set("index", str(i))
        root.append(win)
    return XML_HEADER + ET.tostring(root, encoding="unicode")


def _random_tree(rng: np.random.Generator, depth: int = 0) -> UiNode:
    def text() -> str:
        return "".join(rng.choice(PIECES) for _ in range(int(rng.integers(0, 4))))

    children = [] if depth >= 3 else [_random_tree(rng, depth + 1) for _ in range(int(rng.integers(0, 4)))]
    return UiNode(
        bounds=(int(rng.integers(0, 500)), int(rng.integers(0, 500)), 1080, 2400),
        text=text(),
        content_desc=text(),
        resource_id=text(),
        clickable=bool(rng.integers(0, 2)),
        children=children,
    )


@pytest.mark.parametrize("seed", range(20))
def test_dump_text_is_what_elementtree_writes(seed: int) -> None:
    rng = np.random.default_rng(seed)
    trees = [_random_tree(rng) for _ in range(int(rng.integers(1, 3)))]
    ours = hierarchy_xml([t.to_element(package="com.example") for t in trees])
    theirs = _reference([t.to_element(package="com.example") for t in trees])
    assert ours == theirs
    # and it is a dump the rest of the harness reads back to the same labels
    labels = [n.text for n in Hierarchy(ours).nodes]
    assert labels == [n.text for n in Hierarchy(theirs).nodes]


def test_parsed_windows_with_text_and_tails_round_trip() -> None:
    """Windows parsed from another dump (a clone page's) may carry whitespace text and tails."""
    source = (
        "<hierarchy rotation='0'>\n  <node index='0' text='a&amp;b' bounds='[0,0][10,10]'>\n"
        "    <node index='0' text='x&lt;y' bounds='[0,0][5,5]' />\n  </node>\n</hierarchy>"
    )
    assert hierarchy_xml(window_elements(source)) == _reference(window_elements(source))


def test_namespaced_trees_fall_back_to_elementtree() -> None:
    el = ET.Element("{urn:x}node", {"text": "a"})
    assert hierarchy_xml([el]) == _reference([ET.Element("{urn:x}node", {"text": "a"})])
