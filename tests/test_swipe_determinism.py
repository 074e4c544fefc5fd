"""A swipe on a headless clone is the same gesture however busy the machine is: each touch carries
the time it was meant for (the page sees touch moves exactly one move interval apart, the whole
gesture exactly its duration), and Chromium takes a fling's velocity from those times, so late sends
no longer change where the fling comes to rest. Evidence: the touch events' own timestamps, read in
the page, while other processes keep the CPU busy."""

from __future__ import annotations

import multiprocessing
from datetime import date
from pathlib import Path

import pytest

from devices.clone_device import TOUCH_MOVE_INTERVAL_S
from realbench.actions import Click, Swipe
from realbench.golden import to_normalised
from realbench.hierarchy import Hierarchy, Selector
from realbench.taskpack import load_pack

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
RECORD_TOUCHES = """() => {
  window.__touches = [];
  for (const kind of ["touchstart", "touchmove", "touchend"])
    window.addEventListener(kind, (e) => window.__touches.push([kind, e.timeStamp]), true);
}"""
SWIPE_MS = 300
TOLERANCE_MS = 0.5  # Chromium rounds event times to 0.1 ms; a late send is off by whole milliseconds


def _spin() -> None:
    while True:
        pass


def _swipe_timelines(busy_processes: int, repeats: int) -> list[list[tuple[str, float]]]:
    from clones.server import CloneServer
    from devices.clone_browser import BrowserPool
    from devices.clone_target import CloneTarget

    pack = load_pack(ROOT / "taskpacks" / "train_ticketing")
    instance = pack.tasks[0].instantiate(seed=0, today=date(2026, 3, 2))
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(busy_processes)]
    for p in spinners:
        p.start()
    try:
        with CloneServer() as server, BrowserPool() as pool:
            target = CloneTarget(pack, server.url, browser=pool)
            try:
                timelines = []
                for _ in range(repeats):
                    target.setup(instance)
                    device = target.device
                    query = Hierarchy(device.hierarchy()).find_one(
                        Selector(resource_id="ticket_home_btn_search")
                    )
                    assert query is not None
                    x, y = to_normalised(*query.bounds.center, *device.size())
                    device.act(Click(x=x, y=y))
                    device._run(device._page_eval(RECORD_TOUCHES), "record touches")
                    device.act(Swipe(x=500, y=700, x2=500, y2=550, duration_ms=SWIPE_MS))
                    touches = device._run(device._page_eval("() => window.__touches"), "read touches")
                    timelines.append([(str(kind), float(t)) for kind, t in touches])
                return timelines
            finally:
                target.teardown()
    finally:
        for p in spinners:
            p.terminate()
            p.join(5)


def test_a_swipe_keeps_its_timing_on_a_busy_machine() -> None:
    interval_ms = SWIPE_MS / max(4, round(SWIPE_MS / 1000 / TOUCH_MOVE_INTERVAL_S))
    for timeline in _swipe_timelines(busy_processes=3, repeats=3):
        kinds = [kind for kind, _ in timeline]
        assert kinds[0] == "touchstart" and kinds[-1] == "touchend" and "touchmove" in kinds, kinds
        start, end = timeline[0][1], timeline[-1][1]
        assert abs(end - start - SWIPE_MS) <= TOLERANCE_MS, f"gesture lasted {end - start:.1f} ms: {timeline}"
        for (_, a), (_, b) in zip(timeline, timeline[1:], strict=False):
            steps = (b - a) / interval_ms  # touch moves may be coalesced: a whole number of intervals
            assert abs(steps - round(steps)) * interval_ms <= TOLERANCE_MS, (
                f"{b - a:.2f} ms apart: {timeline}"
            )
