"""The train clone's home service grid in the browser: page two is clipped by its horizontal
scroller until a swipe across the grid brings it in (the Python hierarchy shows every page)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from clones.base import get_clone
from realbench.hierarchy import Hierarchy, Selector
from realbench.taskpack import CloneSetup

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser() -> Iterator[tuple[str, object]]:
    from clones.server import CloneServer
    from devices.clone_browser import BrowserPool

    with CloneServer() as server, BrowserPool() as pool:
        yield server.url, pool


def test_a_swipe_across_the_service_grid_shows_its_second_page(browser: tuple[str, object]) -> None:
    import httpx

    from devices.clone_browser import Emulation
    from devices.clone_device import CloneDevice
    from realbench.actions import Swipe

    url, pool = browser
    clone = get_clone("train_ticketing")
    state = clone.build_state(CloneSetup(), {})
    device = CloneDevice(pool, url, clone, emulation=Emulation(width=412, height=915, scale=1.0))  # type: ignore[arg-type]
    try:
        with httpx.Client(base_url=url, timeout=30) as api:
            sid = api.post("/api/sessions", json={"clone": clone.name, "state": state}).json()["session"]
        device.open(sid)
        device.settle()
        before = Hierarchy(device.observe().hierarchy or "")
        assert before.find(Selector(resource_id="entry_waitlist"))
        assert not before.find(Selector(resource_id="entry_lost_found"))
        grid = before.find(Selector(resource_id="service_grid"))[0].bounds
        y = (grid.top + grid.bottom) // 2
        device.act(Swipe(x=grid.right - 20, y=y, x2=grid.left + 20, y2=y, duration_ms=400))
        device.settle()
        after = Hierarchy(device.observe().hierarchy or "")
        assert after.find(Selector(resource_id="entry_lost_found"))
        assert not after.find(Selector(resource_id="entry_waitlist"))
    finally:
        device.close()
