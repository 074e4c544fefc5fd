"""A loop thread is handed out only once its loop runs. Before, the clone browser's pool checked
`loop.is_running()` right after starting the thread and, when the thread had not yet been given
the CPU (a loaded machine), took the new loop for a stopped one and failed to launch Chromium at
both attempts. Reproduced here with a loop whose thread starts late."""

from __future__ import annotations

import asyncio
import time

import pytest

from realbench import loop_thread
from realbench.loop_thread import start_loop_thread

LATE_S = 0.3


class _LateLoop(asyncio.SelectorEventLoop):
    """A loop whose thread gets going late, as on a machine with every core busy."""

    def run_forever(self) -> None:
        time.sleep(LATE_S)
        super().run_forever()


@pytest.fixture
def late_loops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loop_thread.asyncio, "new_event_loop", _LateLoop)


def _stop(loop: asyncio.AbstractEventLoop, thread) -> None:  # type: ignore[no-untyped-def]
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def test_the_loop_runs_when_it_is_handed_out(late_loops: None) -> None:
    loop, thread = start_loop_thread("late")
    try:
        assert loop.is_running()
        assert asyncio.run_coroutine_threadsafe(asyncio.sleep(0, "ran"), loop).result(5) == "ran"
    finally:
        _stop(loop, thread)


@pytest.mark.browser
def test_the_clone_browser_starts_when_its_loop_thread_starts_late(late_loops: None) -> None:
    from devices.clone_browser import BrowserPool

    with BrowserPool() as pool:
        assert pool.running and pool.version
