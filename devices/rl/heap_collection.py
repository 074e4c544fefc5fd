"""A full collection of the RL pages' heaps every few seconds of stepping.

Each step swaps a screen in, and the one before lies in the renderer's collected heaps (V8's and
Blink's) until the next full collection, which V8 starts when the heaps have grown by a factor of
what survived the last one (bounded by `HEAP_GROWTH_FLAG` in devices/rl/host.py). A collection
every 1.5 s of stepping, over one page per browser in turn (a renderer's pages share its heaps): at
100 environments and every 3 s, 0.4-0.9 MiB less per environment, for 0.12-0.35 s of the renderer's
time per collection, 1.3-2 ms of Chromium's CPU per step (docs/benchmarks.md, "Collections on a
clock"); every 1.5 s since steps that change nothing are not captured: more steps a second leave
more garbage between collections. Tightening V8's own growth to 1.3x instead cost 3 ms per step
for about the same memory.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from realbench.errors import ConfigError

log = logging.getLogger(__name__)

COLLECT_EVERY_S = 1.5
# read by every host as it starts (worker processes inherit it; Ray actors see it where their
# node's Ray was started with it): seconds, or "off"
ENV_VAR = "REALBENCH_RL_COLLECT_EVERY_S"


def configured_every_s() -> float | None:
    """`COLLECT_EVERY_S`, or what `ENV_VAR` says: seconds between collections, "off" for none
    (V8's own collections only: the most steps/s for more memory)."""
    raw = os.environ.get(ENV_VAR)
    if raw is None:
        return COLLECT_EVERY_S
    if raw.strip().lower() in ("off", "none", "0", ""):
        return None
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ConfigError(f"{ENV_VAR}={raw!r} is not a number of seconds", hint='e.g. "3", or "off"')
    return seconds


@dataclass
class HeapCollections:
    """When the next collection is due, and what the collections took. `every_s` None: never."""

    every_s: float | None = COLLECT_EVERY_S
    clock: Callable[[], float] = time.monotonic
    count: int = 0
    seconds: float = 0.0
    failures: int = 0
    _last: float | None = field(default=None, repr=False)
    _turn: int = field(default=0, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def due(self) -> bool:
        """True at most once per `every_s`, whichever thread asks; the first call only starts the
        clock (a host that just brought its pages up has little garbage)."""
        if self.every_s is None:
            return False
        with self._lock:
            now = self.clock()
            if self._last is None:
                self._last = now
                return False
            if now - self._last < self.every_s:
                return False
            self._last = now
            return True

    def next_turn(self, candidates: int) -> int:
        """Which of `candidates` pages collects this time: each in turn, so that with several
        renderers per browser every renderer's heaps are collected over a few turns."""
        index = self._turn % candidates
        self._turn += 1
        return index

    def record(self, seconds: float, ok: bool) -> None:
        self.count += 1
        self.seconds += seconds
        if not ok:
            self.failures += 1

    def summary(self) -> dict[str, float | int | None]:
        return {
            "every_s": self.every_s,
            "collections": self.count,
            "seconds": round(self.seconds, 3),
            "failures": self.failures,
        }
