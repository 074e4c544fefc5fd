"""Bringing many clone environments up at once: they share the pool's bounded contexts (one
renderer each), each still shows its own server session, and one environment's teardown leaves the
others' connections to the server working."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import date

import pytest

from devices.clone_browser import BrowserPool
from devices.clone_target import CloneTarget
from realbench.taskpack import TaskPack


@pytest.mark.browser
def test_environments_set_up_at_once_share_the_bounded_contexts(clone_server, toy_pack: TaskPack):
    instance = toy_pack.tasks[0].instantiate(seed=0, today=date(2026, 3, 2))
    with BrowserPool(renderers=2) as pool:
        targets = [CloneTarget(toy_pack, clone_server.url, browser=pool, scale=1.0) for _ in range(6)]
        try:
            with ThreadPoolExecutor(6) as ex:
                list(ex.map(lambda t: t.setup(instance), targets))
            # Chromium's own list of contexts: the bound holds however many set up together
            assert len(pool._browser.contexts) == 2
            sessions = [t.session for t in targets]
            assert len(set(sessions)) == 6
            for target, session in zip(targets, sessions, strict=True):
                assert target.device._page.url.endswith(f"/s/{session}")
            targets[0].teardown()
            # the others still reach the server (the HTTP client is shared, not closed with one)
            targets[1].setup(instance)
            assert targets[1].state()["ui"]["route"]
        finally:
            for target in targets[1:]:
                target.teardown()
