"""Observations of screens a reset or restore swaps in, taken once per host and checked again now and then.

RL environments reset to a handful of start screens (the train-ticketing pack's 78 tasks start on
3 distinct screens, the bank's 91 on 5), and a GRPO group restores many environments into one
snapshot's screen. A page that shows a given screen payload on a fresh swap draws the same pixels
whichever environment's page it is (held by tests/test_rl_vector.py and tests/test_rl_env.py with
this cache off), so the capture of such a screen is taken once and reused, with the hierarchy dumped
beside it: a reset then costs the swap, not the capture and the dump (docs/benchmarks.md).

Only screens the page reports as still are cached: nothing counting down, animating, loading, focused
(a caret blinks) or scrolled. The first reuse of every screen captures and dumps again and compares
the image's bytes and the hierarchy's text, and so does every `verify_every`-th reuse after it; a
screen whose observations disagree is never cached again (logged, and counted in `stats`).

A step whose action left a still page as it was (a tap on nothing: the same screen version from the
server, the same hierarchy, still before and after) keeps the page's last observation instead of a
capture (`RLCloneDevice`), under the same rule: the first such step on a page and every
`verify_every`-th after it capture again and compare the bytes, and a page whose capture differs
always captures from then on. What an action changes is captured.

Misses of one screen that come together (a batched reset of every environment onto the same start
screen) are coalesced: the first takes the capture, the others swap the screen in meanwhile and wait
for its bytes (then the usual rule applies: the first reuse captures again and compares). Without
this, a first reset of 50 environments in one browser took 50 captures of the same screen.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import threading
from collections import OrderedDict
from concurrent.futures import Future, InvalidStateError
from dataclasses import asdict, dataclass, field
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_ENTRIES = 64
DEFAULT_MAX_BYTES = 32 << 20
DEFAULT_VERIFY_EVERY = 16
MAX_UNCACHEABLE = 4096


@dataclass
class ScreenCacheStats:
    hits: int = 0  # observations served without a capture or a dump
    stored: int = 0  # observations of still screens kept
    verified: int = 0  # reuses that observed again and found the same image and hierarchy
    mismatches: int = 0  # reuses that observed again and found others (the screen is dropped)
    not_still: int = 0  # screens the page reported as changing by themselves (never cached)
    waited: int = 0  # misses that waited for another environment's capture of the same screen
    # steps that left a still page as it was (`RLCloneDevice`): served the page's last observation,
    # observed again to compare and found the same, or found another (the page then always captures)
    unchanged: int = 0
    unchanged_verified: int = 0
    unchanged_mismatches: int = 0


@dataclass
class _Entry:
    image: bytes
    hierarchy: str
    reuses: int = 0

    @property
    def size(self) -> int:
        return len(self.image) + len(self.hierarchy)


@dataclass(frozen=True)
class CacheKey:
    digest: str


@dataclass
class Lookup:
    """What to do with a screen: serve `image` and `hierarchy`; or wait for `pending` (another
    caller's capture of it, None if that caller gave up) and look up again; or capture and dump and
    hand both to `ScreenCache.store`. A caller that `lead`s must `store` or `give_up`: others wait
    on it."""

    key: CacheKey
    image: bytes | None = None
    hierarchy: str | None = None
    lead: bool = False
    pending: Future[bytes | None] | None = None


@dataclass(eq=False)
class ScreenCache:
    """Thread-safe, bounded by entries and bytes (least recently used out first)."""

    entries: int = DEFAULT_ENTRIES
    max_bytes: int = DEFAULT_MAX_BYTES
    verify_every: int = DEFAULT_VERIFY_EVERY
    coalesce: bool = True
    stats: ScreenCacheStats = field(default_factory=ScreenCacheStats)
    _images: OrderedDict[CacheKey, _Entry] = field(default_factory=OrderedDict)
    _uncacheable: OrderedDict[CacheKey, None] = field(default_factory=OrderedDict)
    _inflight: dict[CacheKey, Future[bytes | None]] = field(default_factory=dict)
    _bytes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @staticmethod
    def key(clone: str, screen: dict[str, Any], look: dict[str, Any]) -> CacheKey:
        """`look`: everything besides the payload that changes the pixels (emulation, encoding)."""
        text = json.dumps([clone, screen.get("route"), screen.get("html"), look], sort_keys=True)
        return CacheKey(hashlib.sha256(text.encode("utf-8")).hexdigest())

    def lookup(self, key: CacheKey, *, coalesce: bool = True) -> Lookup:
        """`coalesce=False`: never wait and never lead (a caller looking up again after a wait)."""
        with self._lock:
            entry = self._images.get(key)
            if entry is None:
                if not (self.coalesce and coalesce) or key in self._uncacheable:
                    return Lookup(key)
                pending = self._inflight.get(key)
                if pending is not None:
                    self.stats.waited += 1
                    return Lookup(key, pending=pending)
                self._inflight[key] = Future()
                return Lookup(key, lead=True)
            self._images.move_to_end(key)
            entry.reuses += 1
            if entry.reuses == 1 or entry.reuses % self.verify_every == 0:
                return Lookup(key)  # capture again; `store` compares
            return Lookup(key, entry.image, entry.hierarchy)

    def store(self, key: CacheKey, image: bytes, hierarchy: str) -> None:
        """What a capture and a dump of `key`'s screen gave (after a `lookup` that served nothing)."""
        stored = self._store(key, image, hierarchy)
        self._release(key, image if stored else None)

    def give_up(self, key: CacheKey) -> None:
        """A leading caller took no capture to store (its page was not still, or it failed): the
        callers waiting on it capture for themselves. A no-op once `store` released them."""
        self._release(key, None)

    def _release(self, key: CacheKey, image: bytes | None) -> None:
        with self._lock:
            pending = self._inflight.pop(key, None)
        if pending is not None:
            # cancelled by a waiter: nobody else needs the bytes
            with contextlib.suppress(InvalidStateError):
                pending.set_result(image)

    def _store(self, key: CacheKey, image: bytes, hierarchy: str) -> bool:
        with self._lock:
            if key in self._uncacheable:
                return False
            entry = self._images.get(key)
            if entry is not None:
                if entry.image == image and entry.hierarchy == hierarchy:
                    self.stats.verified += 1
                    return True
                self.stats.mismatches += 1
                self._forget(key)
                self._uncacheable[key] = None
                while len(self._uncacheable) > MAX_UNCACHEABLE:
                    self._uncacheable.popitem(last=False)
                log.warning(
                    "a screen gave another observation when observed again (image %d and %d bytes, "
                    "hierarchy %s); it is no longer cached",
                    len(entry.image),
                    len(image),
                    "the same" if entry.hierarchy == hierarchy else "different",
                )
                return False
            fresh = _Entry(image, hierarchy)
            if fresh.size > self.max_bytes:
                return False
            self._images[key] = fresh
            self._bytes += fresh.size
            self.stats.stored += 1
            while len(self._images) > self.entries or self._bytes > self.max_bytes:
                self._forget(next(iter(self._images)))
            return key in self._images

    def served(self) -> None:
        """A looked-up image was used as the observation (the page reported its screen still)."""
        with self._lock:
            self.stats.hits += 1

    def not_still(self) -> None:
        with self._lock:
            self.stats.not_still += 1

    def unchanged_served(self) -> None:
        with self._lock:
            self.stats.unchanged += 1

    def unchanged_checked(self, same: bool) -> None:
        with self._lock:
            if same:
                self.stats.unchanged_verified += 1
            else:
                self.stats.unchanged_mismatches += 1

    def summary(self) -> dict[str, int]:
        with self._lock:
            return {**asdict(self.stats), "images": len(self._images), "bytes": self._bytes}

    def _forget(self, key: CacheKey) -> None:
        entry = self._images.pop(key)
        self._bytes -= entry.size
