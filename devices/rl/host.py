"""An environment host: one clone server and one browser per screen scale in this process, many
environments.

Every environment is a clone session on the in-process server and a page of the browser that
draws at its scale (`BrowserPool.render_scale`: captured as drawn, never re-rendered for a capture).
Batch operations (create, reset, step, snapshot, restore) run the environments concurrently: the
browser's event loop overlaps their screenshots and page work, which is where the throughput
comes from. A host is what a worker process, a Ray actor and a single Gymnasium environment run.

When the browser dies the host starts a new one; the environments that lived in the old browser
report their episode as aborted on their next step (never silently reset) and get a new page on
their next reset.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from clones.base import Clone, State, get_clone
from clones.server import CloneServer, CreateSession, Session, SessionStore
from devices.clone_browser import BrowserPool, Emulation, Isolation, Launcher
from devices.rl.browser import chromium_processes, pss_mib
from devices.rl.cdp import devtools_args
from devices.rl.config import EnvConfig
from devices.rl.core import VERDICT_FIELDS, EnvCore
from devices.rl.errors import EnvNotFound, ErrorInfo
from devices.rl.heap_collection import HeapCollections, configured_every_s
from devices.rl.screen_cache import ScreenCache
from devices.rl.transitions import EnvSnapshot, Transition
from realbench.errors import ConfigError, DeviceError, DeviceLost, RealbenchError, ServerError
from realbench.taskpack import Task, TaskInstance, TaskPack, load_pack

log = logging.getLogger(__name__)

T = TypeVar("T")
START_CACHE = 512
# The GPU thread in the browser process saves a ~70 MiB process per browser (software compositing
# either way: --disable-gpu); local clone pages need no site isolation, and a renderer limit keeps
# fresh tabs from each spawning a renderer before they join their site's (one measurement at 30
# environments per browser: 23.6 -> 21.2 MiB PSS per environment, bring-up 6.0 -> 5.4 s). The
# 60 Hz frame limit stays: without it the display compositor ticks as fast as it can while any
# page wants frames, as 50 loading pages do, and that took a core's share from the pages (100
# environments up in 12-14 s with the limit against 16-18 s without; step and reset latency the
# same within the noise now that every capture brings its own damage; docs/benchmarks.md).
#
# A page opened over DevTools (`direct_page`) keeps the window it was born with, Chromium's 800x600
# unless told otherwise, and every window's display compositor holds a frame buffer of its size and
# composites its page into it on every frame, though nobody looks: the page emulates its phone and
# is captured from its own surface. A 16 px window: 1.7 MiB less per environment and ~7 % more
# steps/s, the same observations (docs/benchmarks.md, "A window nobody looks at"). Pages Playwright
# sets up have their window sized to the viewport, whatever the switch says.
WINDOW_SIZE_ARG = "--window-size=16,16"
# Each step swaps a screen in, and the DOM and JavaScript garbage of the one before lies in the
# renderer's collected heaps until the next full collection, which V8 starts when the heaps have
# grown by a factor it picks from the collector's speed: up to 4x what survived the last. Grown
# by at most 2x: 1.5 MiB less per environment for no measurable CPU at 100 environments; at 1.2x
# the collections cost 8 % of the steps/s (docs/benchmarks.md, "The heaps' growth").
HEAP_GROWTH_FLAG = "--heap-growing-percent=100"
# V8's trade of speed for size elsewhere (smaller young generation and caches), with the growth
# above still its own: 0.4-0.6 MiB less per environment and the same steps/s in three pairs of a
# quiet hour (alone, with V8's own slower growth, it cost 7 % of the steps: docs/benchmarks.md,
# "Chromium's own books").
SIZE_FLAG = "--optimize-for-size"
# One --js-flags: Chromium keeps the last, so a second one would drop the flags of the first.
JS_FLAGS_ARG = f"--js-flags={HEAP_GROWTH_FLAG} {SIZE_FLAG}"
# PartitionAlloc's use-after-free defences: a reference count on every pointer it guards
# (BackupRefPtr), freed memory held to the end of the task (the scheduler-loop quarantine) and
# freed memory zeroed. They harden a browser against hostile pages; an RL browser shows only the
# clone server's own pages on this host (and runs without the sandbox). Off: 3-14 % more steps/s
# in six of six alternating pairs, either one first, 0-2.8 ms less CPU per step, the same memory
# (docs/benchmarks.md, "Chromium's own books"). `chromium_features.launch_args` folds this switch
# into Playwright's own --disable-features.
ALLOCATOR_CHECKS_OFF_ARG = (
    "--disable-features=PartitionAllocBackupRefPtr,PartitionAllocSchedulerLoopQuarantine,"
    "PartitionAllocEventuallyZeroFreedMemory"
)
RL_BROWSER_ARGS = (
    "--in-process-gpu",
    "--disable-site-isolation-trials",
    "--renderer-process-limit=2",
    WINDOW_SIZE_ARG,
    JS_FLAGS_ARG,
    ALLOCATOR_CHECKS_OFF_ARG,
)
MAX_THREADS = 128


@dataclass(frozen=True)
class ResetRequest:
    env_id: int
    seed: int | None = None
    options: dict[str, Any] | None = None


@dataclass(frozen=True)
class StepRequest:
    env_id: int
    action: Any


@dataclass(frozen=True)
class RestoreRequest:
    env_id: int
    snapshot: EnvSnapshot


class _HostStore(SessionStore):
    """A session store that is truthy even when empty: `create_app(store)` falls back to a new
    store on a falsy one, and the host must share its store with the server it starts."""

    def __bool__(self) -> bool:
        return True


@dataclass(eq=False)
class HostBrowser:
    """The host's Chromium for one screen scale. `generation` counts its replacements, so a page
    knows when the browser it lived in is gone; `users` counts the environments that hold it."""

    scale: float
    pool: BrowserPool
    generation: int = 0
    users: int = 0
    pages_opened: int = 0
    first_pages: threading.Lock = field(default_factory=threading.Lock)


class EnvHost:
    """Clone server + browsers + environments of this process. Thread-safe.

    A browser starts with the first environment at its scale and closes with the last, so a host
    (a worker process, a Ray actor, the rollout service) runs no browser for a resolution none of
    its environments use."""

    def __init__(
        self,
        *,
        browser_args: tuple[str, ...] = (),
        renderers: int | None = None,
        collect_every_s: float | None | str = "configured",
    ) -> None:
        self.browser_args = browser_args
        self.renderers = renderers
        # a full collection of the pages' heaps every `collect_every_s` of stepping (None: V8's own
        # only; "configured": `heap_collection.configured_every_s()`, 3 s unless the environment
        # says otherwise)
        every = configured_every_s() if collect_every_s == "configured" else collect_every_s
        if isinstance(every, str):
            raise ConfigError(f"collect_every_s={every!r}", hint='seconds, None, or "configured"')
        self.collections = HeapCollections(every_s=every)
        self.server = CloneServer(store=_HostStore())
        self._browsers: dict[float, HostBrowser] = {}
        self.replacements = 0
        self._envs: dict[int, EnvCore] = {}
        self._next_id = 0
        self._lock = threading.Lock()
        self._browser_lock = threading.Lock()
        self._packs: dict[Path, TaskPack] = {}
        self._starts: OrderedDict[str, State] = OrderedDict()
        self._starts_lock = threading.Lock()
        self._threads = ThreadPoolExecutor(max_workers=MAX_THREADS, thread_name_prefix="rl-env")
        self._started = False
        self.screen_cache = ScreenCache()

    # --- lifecycle ---

    def _new_pool(self, scale: float) -> BrowserPool:
        # Same-site pages share renderers: ~11 MiB per environment instead of ~65 MiB with a
        # context each; a renderer crash aborts the episodes of its context, which recover on reset.
        # Its pages go over the browser's own DevTools websocket, so the pool starts the browser
        # itself: no Playwright driver per worker (docs/benchmarks.md)
        direct = devtools_args()
        return BrowserPool(
            extra_args=(*RL_BROWSER_ARGS, *direct, *self.browser_args),
            isolation=Isolation.SHARED,
            renderers=self.renderers,
            render_scale=scale,
            launcher=Launcher.DIRECT if direct else Launcher.PLAYWRIGHT,
        )

    def start(self) -> EnvHost:
        if not self._started:
            self.server.start()
            self._started = True
        return self

    def close(self) -> None:
        if not self._started:
            return
        self._started = False
        for env in list(self._envs.values()):
            try:
                env.close()
            except RealbenchError as exc:
                log.debug("closing environment %d: %s", env.env_id, exc)
        self._envs.clear()
        with self._browser_lock:
            browsers, self._browsers = list(self._browsers.values()), {}
        for browser in browsers:
            browser.pool.close()
        self.server.stop()
        self._threads.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> EnvHost:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def server_url(self) -> str:
        return self.server.url

    # --- what EnvCore uses ---

    def pack(self, config: EnvConfig) -> TaskPack:
        path = config.pack_path()
        with self._lock:
            pack = self._packs.get(path)
            if pack is None:
                pack = self._packs[path] = load_pack(path)
            return pack

    def start_state(self, clone: Clone, task: Task, instance: TaskInstance) -> State:
        """The task instance's start state, built once per (clone, setup, params) and shared read-only."""
        setup = task.clone.setup
        key = json.dumps(
            [clone.name, setup.model_dump(mode="json"), instance.params], sort_keys=True, default=str
        )
        with self._starts_lock:
            state = self._starts.get(key)
            if state is not None:
                self._starts.move_to_end(key)
                return state
        state = self.server.store.build(clone, setup, instance.params, None)
        with self._starts_lock:
            self._starts[key] = state
            while len(self._starts) > START_CACHE:
                self._starts.popitem(last=False)
        return state

    def new_session(self, clone: Clone, state: State, drift: Any) -> Session:
        return self.server.store.create(CreateSession(clone=clone.name, state=state, drift=drift))

    def browser(self, emulation: Emulation) -> HostBrowser | None:
        """The browser that draws at `emulation`'s scale, if one runs."""
        return self._browsers.get(emulation.scale)

    def acquire_browser(self, emulation: Emulation) -> HostBrowser:
        """The browser that draws at `emulation`'s scale (started if none does), held until
        `release_browser`."""
        with self._browser_lock:
            browser = self._browsers.get(emulation.scale)
            if browser is None:
                if not self._started:
                    raise DeviceLost("the environment host is closed", hint="start a new host")
                browser = HostBrowser(emulation.scale, self._new_pool(emulation.scale).start())
                self._browsers[emulation.scale] = browser
            browser.users += 1
            return browser

    def release_browser(self, browser: HostBrowser) -> None:
        """An environment let go of `browser`; the last one out closes it (~300 MiB of Chromium)."""
        with self._browser_lock:
            browser.users -= 1
            if browser.users > 0 or self._browsers.get(browser.scale) is not browser:
                return
            del self._browsers[browser.scale]
        try:
            browser.pool.close()
        except Exception as exc:  # closing is best effort; the browser may already be dead
            log.debug("closing the browser at scale %g: %s", browser.scale, exc)

    @property
    def generation(self) -> int:
        """Browser replacements so far, all scales together."""
        return self.replacements

    @contextmanager
    def opening_page(self, browser: HostBrowser) -> Iterator[None]:
        """Serialises the first page opens of a browser. Chromium puts same-site pages of a context
        in one renderer only once that site's renderer exists; pages that race to open first get a
        renderer each (measured: 34 renderers for 15 pages, ~58 MiB per environment, against 5
        renderers and ~26 MiB when the first pages open one at a time)."""
        if browser.pages_opened >= browser.pool.renderers:
            yield
            return
        with browser.first_pages:
            yield
            browser.pages_opened += 1

    def drop_session(self, session_id: str) -> None:
        try:
            self.server.store.delete(session_id)
        except Exception:  # the session may already be gone; nothing to clean up then
            log.debug("session %s already gone", session_id)

    def device_failed(self, browser: HostBrowser, generation: int, exc: DeviceError) -> None:
        """A device operation failed: if its browser itself is gone, start a new one (once)."""
        if browser.pool.running:
            return
        with self._browser_lock:
            if generation != browser.generation or browser.pool.running or not self._started:
                return  # another environment already replaced it, or the host is closing
            log.warning("clone browser lost (%s); starting a new one", exc.message)
            old = browser.pool
            try:
                old.close()
            except Exception as close_exc:  # the old browser is dead; closing is best effort
                log.debug("closing the dead browser: %s", close_exc)
            browser.pool = self._new_pool(browser.scale).start()
            browser.pages_opened = 0
            browser.generation += 1
            self.replacements += 1

    # --- batch API (what workers, actors and the service call) ---

    def create(self, configs: list[EnvConfig]) -> list[int | ErrorInfo]:
        """Create environments (concurrently) and return their ids, or an error per failed one."""
        self.start()

        def one(config: EnvConfig) -> int:
            pack = self.pack(config)
            clone = get_clone(pack.clone)
            with self._lock:
                env_id = self._next_id
                self._next_id += 1
            env = EnvCore(self, env_id, config, pack, clone)
            try:
                env.open()
            except BaseException:
                env.close()  # lets go of its session and browser
                raise
            with self._lock:
                self._envs[env_id] = env
            return env_id

        return self._map(one, configs)

    def reset(self, requests: list[ResetRequest]) -> list[Transition | ErrorInfo]:
        return self._map(lambda r: self.env(r.env_id).reset(r.seed, r.options), requests)

    def step(self, requests: list[StepRequest]) -> list[Transition | ErrorInfo]:
        results = self._map(lambda r: self.env(r.env_id).step(r.action), requests)
        if self.collections.due():
            self._collect_garbage()
        return results

    def snapshot(self, env_ids: list[int]) -> list[EnvSnapshot | ErrorInfo]:
        return self._map(lambda i: self.env(i).snapshot(), env_ids)

    def restore(self, requests: list[RestoreRequest]) -> list[Transition | ErrorInfo]:
        return self._map(lambda r: self.env(r.env_id).restore(r.snapshot), requests)

    def verdict(self, env_ids: list[int]) -> list[dict[str, Any] | ErrorInfo]:
        return self._map(
            lambda i: self.env(i).verdict().model_dump(mode="json", include=VERDICT_FIELDS), env_ids
        )

    def close_envs(self, env_ids: list[int]) -> list[int | ErrorInfo]:
        def one(env_id: int) -> int:
            env = self.env(env_id)
            with self._lock:
                self._envs.pop(env_id, None)
            env.close()
            return env_id

        return self._map(one, env_ids)

    def stats(self) -> dict[str, Any]:
        procs = chromium_processes(os.getpid())
        return {
            "pid": os.getpid(),
            "envs": len(self._envs),
            "generation": self.generation,
            "browser_replacements": self.replacements,
            "browser_running": all(b.pool.running for b in list(self._browsers.values())),
            "chromium_pids": sorted(procs),
            "renderer_processes": sum(kind == "renderer" for kind in procs.values()),
            "chromium_pss_mib": pss_mib(list(procs)),
            "sessions": len(self.server.store),
            "screen_cache": self.screen_cache.summary(),
            "heap_collections": self.collections.summary(),
        }

    def kill_browser(self) -> list[int]:
        """Kill this host's Chromium processes (fault injection for tests and drills)."""
        import signal

        procs = [pid for pid, kind in chromium_processes(os.getpid()).items() if kind == "browser"]
        for pid in procs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return procs

    # --- helpers ---

    def _collect_garbage(self) -> None:
        """A full collection of each browser's renderer heaps, over one of its pages (in turn),
        within the step that found it due: its time counts in the step, as the heaps' own would."""
        by_browser: dict[int, list[EnvCore]] = {}
        for env in list(self._envs.values()):
            browser = env.page_browser
            if browser is not None:
                by_browser.setdefault(id(browser), []).append(env)
        pages = [envs[self.collections.next_turn(len(envs))] for envs in by_browser.values()]

        def one(env: EnvCore) -> tuple[float, bool]:
            started = time.perf_counter()
            try:
                env.collect_garbage()
            except Exception as exc:  # a page gone or closing: its next step says so
                log.debug("heap collection on %s: %s", env.env_id, exc)
                return time.perf_counter() - started, False
            return time.perf_counter() - started, True

        for seconds, ok in self._threads.map(one, pages):
            self.collections.record(seconds, ok)

    def env(self, env_id: int) -> EnvCore:
        env = self._envs.get(env_id)
        if env is None or env.closed:
            raise EnvNotFound(
                f"no environment {env_id} on this host (unknown or closed)",
                hint="create one first; closed environments cannot be used again",
            )
        return env

    def _map(self, fn: Callable[[Any], T], items: list[Any]) -> list[T | ErrorInfo]:
        def guarded(item: Any) -> T | ErrorInfo:
            try:
                return fn(item)
            except RealbenchError as exc:
                return ErrorInfo.of(exc)
            except Exception as exc:  # a bug must not take the other environments down
                log.exception("environment operation failed")
                return ErrorInfo.of(ServerError(f"internal error: {type(exc).__name__}: {exc}"))

        if len(items) == 1:
            return [guarded(items[0])]
        return list(self._threads.map(guarded, items))


_shared: EnvHost | None = None
_shared_users = 0
_shared_lock = threading.Lock()


def acquire_shared_host() -> EnvHost:
    """The process-wide host single Gymnasium environments share (one browser per process)."""
    global _shared, _shared_users
    with _shared_lock:
        if _shared is None:
            _shared = EnvHost().start()
        _shared_users += 1
        return _shared


def release_shared_host(host: EnvHost) -> None:
    global _shared, _shared_users
    with _shared_lock:
        if host is not _shared:
            return
        _shared_users -= 1
        if _shared_users <= 0:
            _shared.close()
            _shared, _shared_users = None, 0
