"""An asyncio event loop of its own, running in a daemon thread (the browser pool, the model client
and the virtual-phone host each drive their coroutines from one)."""

from __future__ import annotations

import asyncio
import threading

from realbench.errors import RealbenchError

LOOP_START_TIMEOUT_S = 60.0


def start_loop_thread(name: str) -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    """A new loop running in a new daemon thread, returned once it runs.

    Returning before the thread got to `run_forever` let a caller that checks `loop.is_running()`
    (to tell a stopped loop from a live one) take a fresh loop for a dead one; on a loaded machine
    a new thread can wait that long for the CPU."""
    loop = asyncio.new_event_loop()
    running = threading.Event()
    loop.call_soon(running.set)
    thread = threading.Thread(target=loop.run_forever, name=name, daemon=True)
    thread.start()
    if not running.wait(LOOP_START_TIMEOUT_S):
        loop.call_soon_threadsafe(loop.stop)
        raise RealbenchError(
            f"the {name} event loop did not start within {LOOP_START_TIMEOUT_S:.0f} s",
            hint="the machine may be overloaded",
        )
    return loop, thread
