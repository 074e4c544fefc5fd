"""The browser-free plan runner and the page runtime see the same screen.

clones/static/runtime.js dumps the hierarchy in the browser; clones/dom_plan.py derives it from the
markup for fast tests and for check-pack's safety-by-effect rule. On every crawl seed state of both
clones, every node the browser dumps — its text, resource-id, content-desc, clickable and
long-clickable — must be one the Python side derives too. The browser's dump is a subset (it also
applies layout: clipping, ``display: none``, only the front dialog), never a different reading.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from clones.base import get_clone
from clones.dom_plan import parse, screen_page
from realbench.hierarchy import Hierarchy, Node

pytestmark = pytest.mark.browser

CLONES = ("train_ticketing", "bank")
Key = tuple[str, str, str, bool, bool]


def _key(node: Node) -> Key:
    return (node.text, node.resource_id, node.content_desc, node.clickable, node.long_clickable)


def _meaningful(node: Node) -> bool:
    return bool(node.text or node.resource_id or node.content_desc or node.clickable or node.long_clickable)


@pytest.fixture(scope="module")
def browser() -> Iterator[tuple[str, object]]:
    from clones.server import CloneServer
    from devices.clone_browser import BrowserPool

    with CloneServer() as server, BrowserPool() as pool:
        yield server.url, pool


@pytest.mark.parametrize("name", CLONES)
def test_runtime_js_and_python_read_the_same_hierarchy(browser: tuple[str, object], name: str) -> None:
    import httpx

    from devices.clone_browser import Emulation
    from devices.clone_device import CloneDevice

    url, pool = browser
    clone = get_clone(name)
    states = clone.stats_states()
    assert states, name
    # a tall viewport keeps long screens out of the viewport clip; scroll containers still clip
    device = CloneDevice(pool, url, clone, emulation=Emulation(width=412, height=4000, scale=1.0))  # type: ignore[arg-type]
    mismatches: list[str] = []
    try:
        with httpx.Client(base_url=url, timeout=30) as api:
            for i, state in enumerate(states):
                sid = api.post("/api/sessions", json={"clone": name, "state": state}).json()["session"]
                device.open(sid)
                device.settle()
                browser_nodes = [n for n in Hierarchy(device.observe().hierarchy).nodes if _meaningful(n)]
                python_nodes = Counter(_key(d.node) for d in parse(screen_page(clone, state), clone.package))
                missing = Counter(_key(n) for n in browser_nodes) - python_nodes
                if missing:
                    route = state["ui"]["route"]
                    mismatches.append(f"state {i} ({route}): browser-only nodes {sorted(missing)[:5]}")
                api.delete(f"/api/sessions/{sid}")
    finally:
        device.close()
    assert not mismatches, "\n".join(mismatches)
