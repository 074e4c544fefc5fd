"""Headless Chromium for clone environments, driven from a private event-loop thread.

`BrowserPool` — one Chromium per process, so any thread (runner workers, RL environments) may use
it; one page with its own BrowserContext per environment. `Emulation` is the phone screen a page
emulates.
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import logging
import math
import os
import threading
from collections import deque
from collections.abc import Coroutine, Iterator
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from devices import chromium_launch
from devices.chromium_features import CLONE_DISABLED_FEATURES, DISABLE, launch_args
from devices.driver_cache import use_node_compile_cache
from realbench.errors import BrowserMissingError, ConfigError, DeviceError, DeviceLost
from realbench.loop_thread import start_loop_thread
from realbench.procfs import PARENT, stat_fields

log = logging.getLogger(__name__)

T = TypeVar("T")

# Extra HTTP headers of a context's every request, as sorted pairs (contexts are shared by key).
Headers = tuple[tuple[str, str], ...]

HEADLESS_SHELL = Path("/usr/bin/chromium-headless-shell")
FULL_CHROMIUM = Path("/usr/bin/chromium")


def default_chromium() -> str:
    """REALBENCH_CHROMIUM, else Debian's headless shell, else Debian's full Chromium.

    The headless shell is the same Blink without the browser's UI layer: on two cores it brought 100
    environments up in 23 s against 40 s with the full browser (its process spent 7 CPU-s instead of
    20), with ~2 MiB less per environment (docs/benchmarks.md).
    """
    chosen = os.environ.get("REALBENCH_CHROMIUM")
    if chosen:
        return chosen
    return str(HEADLESS_SHELL if HEADLESS_SHELL.exists() else FULL_CHROMIUM)


DEFAULT_CHROMIUM = default_chromium()
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--mute-audio",
    "--hide-scrollbars",
)
CALL_TIMEOUT_S = 30.0
# the phone a clone page emulates speaks Chinese in China's time zone (RL pages opened over the
# direct DevTools connection get the same, devices/rl/direct_page.py)
PAGE_LOCALE = "zh-CN"
PAGE_TIMEZONE = "Asia/Shanghai"
# Chromium's start, per attempt. Under heavy load a start can outlast Playwright's default 30 s;
# the second attempt waits longer rather than failing whatever needed the browser.
LAUNCH_TIMEOUTS_S = (30.0, 90.0)


class Emulation(BaseModel):
    """The emulated phone screen: CSS viewport and device scale factor (pixels per CSS px)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    width: int = Field(default=412, ge=100, le=2000)
    height: int = Field(default=915, ge=100, le=4000)
    scale: float = Field(default=2.625, gt=0.2, le=5.0)

    @classmethod
    def for_short_side(cls, pixels: int, width: int = 412, height: int = 915) -> Emulation:
        """Screenshots whose short side is `pixels` (a model's own resolution, e.g. 448)."""
        return cls(width=width, height=height, scale=pixels / min(width, height))

    @property
    def pixel_size(self) -> tuple[int, int]:
        """Screenshot size in pixels (how Chromium rounds the scaled viewport)."""
        return (round(self.width * self.scale + 0.4999), round(self.height * self.scale + 0.4999))


def playwright_error_types() -> tuple[type[BaseException], ...]:
    from playwright.async_api import Error as PlaywrightError

    return (PlaywrightError,)


def device_error(exc: BaseException, what: str) -> DeviceError:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    lost_markers = ("crash", "closed", "disconnected", "Target page", "Browser has been", "Connection closed")
    if any(m.lower() in text.lower() for m in lost_markers):
        return DeviceLost(
            f"{what}: the page or browser is gone ({text})", hint="the environment must be recreated"
        )
    return DeviceError(f"{what}: {text}", hint="see the log for the browser's message")


class Launcher(StrEnum):
    """Who starts a pool's Chromium.

    PLAYWRIGHT: Playwright's driver starts it and drives every page.
    DIRECT: this process starts it with the same command line (`devices.chromium_launch`), for
    pools whose pages go over the browser's own DevTools websocket (RL hosts): no driver process,
    no Playwright import. Playwright is connected to the running browser only once a page needs it
    (a context with extra headers). Falls back to PLAYWRIGHT where the platform cannot (not Linux).
    """

    PLAYWRIGHT = "playwright"
    DIRECT = "direct"


class Isolation(StrEnum):
    """How environments share Chromium's renderer processes.

    SHARED: environments with the same emulation are spread over a few shared BrowserContexts, and
    same-site pages of a context share one renderer process (about 11 MiB per extra environment;
    a renderer crash takes down the environments of its context, which then recover on setup).
    CONTEXT: every environment has its own BrowserContext and renderer (about 65 MiB each).
    """

    SHARED = "shared"
    CONTEXT = "context"


def default_renderers() -> int:
    """Renderer processes a browser runs its pages in when told nothing: one per core, at most 4."""
    return min(4, os.cpu_count() or 1)


class BrowserPool:
    """One headless Chromium for this process, on its own event-loop thread.

    Every page operation is a coroutine run on that loop (`call`), so pages can be driven from any
    thread. Use as a context manager, or `BrowserPool.shared()` for a process-wide one.
    `renderers` bounds the renderer processes per emulation in SHARED isolation (they run pages in
    parallel; default: the number of CPU cores, at most 4).

    `render_scale` makes that Chromium's display scale: its pages are then drawn at their
    emulation's scale all the time and captured as drawn, instead of idling at one pixel per CSS
    px and being re-rendered at their scale for each capture. Captures take about two thirds of
    the time and idle pages a little more memory (the square of the scale): worth it where
    captures are many and the scale small, as in RL at a model's resolution (docs/benchmarks.md).
    Such a pool serves emulations at that scale only.
    """

    _shared: BrowserPool | None = None
    _shared_lock = threading.Lock()

    def __init__(
        self,
        executable: str | Path = DEFAULT_CHROMIUM,
        *,
        extra_args: tuple[str, ...] = (),
        isolation: Isolation | str = Isolation.SHARED,
        renderers: int | None = None,
        render_scale: float | None = None,
        launcher: Launcher | str = Launcher.PLAYWRIGHT,
    ) -> None:
        self.executable = Path(executable)
        self.launcher = Launcher(launcher)
        if self.launcher is Launcher.DIRECT and not chromium_launch.available():
            log.info("this platform cannot start Chromium itself; Playwright starts it")
            self.launcher = Launcher.PLAYWRIGHT
        self.isolation = Isolation(isolation)
        self.renderers = max(1, renderers or default_renderers())
        self.render_scale = render_scale
        shared_args = ("--process-per-site",) if self.isolation is Isolation.SHARED else ()
        # repr: all of the float's digits, so Chromium's surface is the emulation's pixel size
        scale_args = () if render_scale is None else (f"--force-device-scale-factor={render_scale!r}",)
        features = (DISABLE + ",".join(CLONE_DISABLED_FEATURES),)
        self.args = (*CHROMIUM_ARGS, *shared_args, *scale_args, *features, *extra_args)
        self._contexts: dict[tuple[Emulation, Headers], list[_Shard]] = {}
        self._cdp: asyncio.Future[Any] | None = None  # the browser-level CDP session
        # Held while a shared context is being created: without it, environments set up at once
        # all saw too few contexts and each made its own (8 renderers instead of `renderers`).
        self._context_lock: asyncio.Lock | None = None
        self._next_context = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pw: Any = None
        self._browser: Any = None  # Playwright's Browser (a DIRECT pool's: once a page needs it)
        self._process: chromium_launch.ChromiumProcess | None = None  # a DIRECT pool's browser
        self._connecting: asyncio.Future[Any] | None = None  # Playwright, connecting to it
        self._lock = threading.Lock()
        self._lost: str | None = None
        self.generation = 0  # bumped at every launch, so pages know when their browser was replaced
        self.version = ""

    @classmethod
    def shared(cls) -> BrowserPool:
        with cls._shared_lock:
            if cls._shared is None or not cls._shared.running:
                cls._shared = cls().start()
                atexit.register(cls._shared.close)
            return cls._shared

    @property
    def running(self) -> bool:
        return self._launched and self._lost is None

    @property
    def _launched(self) -> bool:
        return self._browser is not None or self._process is not None

    def start(self) -> BrowserPool:
        """Launch Chromium; relaunch it if it died (pages of the old one are then `lost`)."""
        with self._lock:
            if self._launched and self._lost is None:
                return self
            if not self.executable.exists():
                raise BrowserMissingError(
                    f"Chromium is not installed at {self.executable}",
                    hint="install it with `apt-get install chromium-headless-shell` (or run `make setup`), or set REALBENCH_CHROMIUM",
                )
            if self._launched:
                log.warning("relaunching the clone browser (%s)", self._lost)
                try:
                    self.call(self._shutdown(), timeout=20)
                except Exception as exc:  # the old browser is gone already; only its driver remains
                    log.debug("shutting down the lost browser: %s", exc)
            if self._loop is None:
                self._loop, self._thread = start_loop_thread("clone-browser")
            try:
                self._launch_with_retry()
            except BaseException:
                self._stop_loop()
                raise
            self.generation += 1
            return self

    def _launch_with_retry(self) -> None:
        for attempt, timeout in enumerate(LAUNCH_TIMEOUTS_S, 1):
            try:
                self.call(self._launch(timeout), timeout=timeout + 30)
                return
            except DeviceError as exc:
                if attempt == len(LAUNCH_TIMEOUTS_S):
                    raise
                log.warning("Chromium did not start (%s); trying once more, waiting longer", exc)

    async def _launch(self, timeout_s: float) -> None:
        if self.launcher is Launcher.DIRECT:
            await self._launch_direct(timeout_s)
            return
        from playwright.async_api import async_playwright

        use_node_compile_cache()
        self._pw = await async_playwright().start()
        try:
            self._browser = await self._pw.chromium.launch(
                executable_path=str(self.executable),
                headless=True,
                args=launch_args(self.args),
                timeout=timeout_s * 1000,
            )
        except asyncio.CancelledError:  # the caller gave up waiting: leave no driver behind
            pw, self._pw = self._pw, None
            await pw.stop()
            raise
        except Exception as exc:
            await self._pw.stop()
            self._pw = None
            raise DeviceError(
                f"Chromium at {self.executable} did not start: {exc}", hint="run it by hand to see why"
            ) from None
        self.version = self._browser.version
        self._context_lock = asyncio.Lock()
        self._lost = None
        browser = self._browser
        browser.on("disconnected", lambda _b: self._mark_lost("the browser disconnected", browser))
        log.info("Chromium %s started", self.version)

    async def _launch_direct(self, timeout_s: float) -> None:
        process = await chromium_launch.ChromiumProcess.start(
            self.executable, launch_args(self.args), timeout_s
        )
        self._process, self.version = process, process.version
        self._context_lock = asyncio.Lock()
        self._lost = None
        process.exited.add_done_callback(lambda f: self._process_exited(process, f.result()))
        log.info("Chromium %s started (pid %d)", self.version, process.pid)

    def _process_exited(self, process: chromium_launch.ChromiumProcess, code: int) -> None:
        if process is self._process and self._lost is None:  # not closed by the pool: say why
            log.warning("Chromium %d exited with %d%s", process.pid, code, process.log_tail())
        self._mark_lost(f"the browser exited ({code})", process)

    async def devtools_url(self) -> str | None:
        """The DevTools websocket of a browser this pool started itself (None for Playwright's)."""
        process = self._process
        return None if process is None else await process.devtools_url()

    async def _playwright_browser(self) -> Any:
        """Playwright's Browser: the one it launched, or (DIRECT) one connected to this pool's
        browser on first use, shared by the callers that race for it."""
        if self._lost is not None or not self._launched:
            raise DeviceLost(f"the clone browser is gone ({self._lost or 'not started'})")
        if self._browser is not None:
            return self._browser
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._connect_playwright())
        connecting = self._connecting
        try:
            return await asyncio.shield(connecting)
        except BaseException:
            if self._connecting is connecting and connecting.done():
                self._connecting = None
            raise

    async def _connect_playwright(self) -> Any:
        from playwright.async_api import async_playwright

        process = self._process
        assert process is not None
        url = await process.devtools_url()
        use_node_compile_cache()
        pw = await async_playwright().start()
        try:
            browser = await pw.chromium.connect_over_cdp(url)
        except BaseException:
            await pw.stop()
            raise
        if process is not self._process:  # closed or replaced meanwhile
            await browser.close()
            await pw.stop()
            raise DeviceLost("the clone browser was closed")
        self._pw, self._browser = pw, browser
        browser.on("disconnected", lambda _b: self._mark_lost("the browser disconnected", browser))
        log.info("Playwright connected to Chromium %d", process.pid)
        return browser

    def _mark_lost(self, why: str, browser: Any) -> None:
        """`browser` (Playwright's Browser or this pool's process) is gone: the pool is lost if it
        is still the pool's own."""
        if self._lost is None and browser is not None and browser in (self._browser, self._process):
            self._lost = why
            log.warning("clone browser lost: %s", why)

    def call(self, coro: Coroutine[Any, Any, T], timeout: float = CALL_TIMEOUT_S) -> T:
        """Run a coroutine on the browser's loop and wait for its result (from any thread)."""
        loop = self._loop
        if loop is None or not loop.is_running():
            if asyncio.iscoroutine(coro):
                coro.close()
            raise DeviceLost("the clone browser is not running", hint="start the BrowserPool first")
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(timeout)
        except FutureTimeout:
            future.cancel()
            raise DeviceError(
                f"the clone browser did not answer within {timeout:.0f} s",
                hint="the machine may be overloaded",
            ) from None

    def captures_as_drawn(self, emulation: Emulation) -> bool:
        """Pages of `emulation` are drawn at its scale, so a capture needs no scaled clip."""
        if self.render_scale is None:
            return False
        if not math.isclose(emulation.scale, self.render_scale, rel_tol=1e-9):
            raise ConfigError(
                f"this clone browser draws at scale {self.render_scale:g}, the emulation asks for "
                f"{emulation.scale:g}",
                hint="use a BrowserPool per scale (its render_scale), or none",
            )
        return True

    def page_scale(self, emulation: Emulation) -> float:
        """The device scale factor a page of `emulation` lives at in this browser.

        Without a render scale, pages live at one pixel per CSS px and a capture renders them at
        the emulation's scale (a scaled clip). Chromium drops a page back to scale 1 after such a
        capture anyway, so pages born at the emulation's scale changed scale once, and a screen
        first drawn before that change came out a pixel row apart from the same screen drawn
        after it (environments restored into one snapshot disagreed). Idle pages at scale 1
        also keep memory low. With a render scale, pages are born at it and never leave it."""
        return emulation.scale if self.captures_as_drawn(emulation) else 1

    async def _new_context(self, emulation: Emulation, headers: Headers = ()) -> Any:
        browser = await self._playwright_browser()
        scale = self.page_scale(emulation)
        return await browser.new_context(
            viewport={"width": emulation.width, "height": emulation.height},
            screen={"width": emulation.width, "height": emulation.height},
            device_scale_factor=scale,
            is_mobile=True,
            has_touch=True,
            locale=PAGE_LOCALE,
            timezone_id=PAGE_TIMEZONE,
            extra_http_headers=dict(headers) or None,
            # No media-feature overrides: Playwright's defaults (a light colour scheme, no reduced
            # motion, ...) are what Chromium shows anyway, but an override sent for a new page is
            # applied to every page of its renderer, which then restyles and repaints them all:
            # each page opened cost time in proportion to the pages already open.
            color_scheme="null",
            reduced_motion="null",
            forced_colors="null",
            contrast="null",
        )

    async def open_page(self, emulation: Emulation, url: str, headers: Headers = ()) -> OpenedPage:
        """A page emulating a touch phone, loaded from `url` up to DOMContentLoaded; `headers` go
        with every request of its context (the page's load, its event posts and socket)."""
        if self.isolation is Isolation.CONTEXT:
            context = await self._new_context(emulation, headers)
            page = await context.new_page()
            return OpenedPage(context, page, True, await goto_page(page, url))
        shard = await self._shard(emulation, headers)
        page = await self._open_in(shard, url)
        await page.wait_for_load_state("domcontentloaded")
        status = await page.evaluate(
            "() => (performance.getEntriesByType('navigation')[0] || {}).responseStatus || 0"
        )
        return OpenedPage(shard.context, page, False, int(status))

    async def _shard(self, emulation: Emulation, headers: Headers) -> _Shard:
        lock = self._context_lock
        if lock is None:
            raise DeviceLost("the clone browser is not running", hint="start the BrowserPool first")
        async with lock:
            shards = self._contexts.setdefault((emulation, headers), [])
            if len(shards) < self.renderers:
                context = await self._new_context(emulation, headers)
                shard = _Shard(context, await self._context_id(context))
                context.on("page", shard.claim)
                shards.append(shard)
                return shard
            return shards[next(self._next_context) % len(shards)]

    async def _context_id(self, context: Any) -> str:
        """Chromium's id of a context, read from a first blank page's target (then closed)."""
        probe = await context.new_page()
        try:
            cdp = await context.new_cdp_session(probe)
            info = await cdp.send("Target.getTargetInfo")
            await cdp.detach()
        finally:
            await probe.close()
        return str(info["targetInfo"]["browserContextId"])

    async def _open_in(self, shard: _Shard, url: str) -> Any:
        """Open a page at `url` in a shared context. Chromium creates the target at the URL itself,
        so the page starts in its site's renderer: a Playwright `new_page` starts at about:blank,
        which costs a renderer process of its own per page before the navigation leaves it.

        Such a page exists before the context's emulation reaches it. That was harmless only once
        pages lived at one pixel per CSS px (`_new_context`): while pages were born at the
        emulated scale, these alternated from capture to capture between two rasterisations of
        some text (tests/test_clone_bringup.py and the RL snapshot tests hold both properties)."""
        assert self._loop is not None
        waiter: asyncio.Future[Any] = self._loop.create_future()
        shard.waiting.setdefault(url, deque()).append(waiter)
        target_id = None
        try:
            created = await (await self._browser_cdp()).send(
                "Target.createTarget", {"url": url, "browserContextId": shard.context_id}
            )
            target_id = created["targetId"]
            return await asyncio.wait_for(waiter, CALL_TIMEOUT_S)
        except BaseException:
            shard.forget(url, waiter)
            if target_id is not None:  # a page that shows up after this gave up would be nobody's
                with suppress(Exception):
                    await (await self._browser_cdp()).send("Target.closeTarget", {"targetId": target_id})
            raise

    async def _browser_cdp(self) -> Any:
        if self._cdp is None:
            browser = await self._playwright_browser()
            if self._cdp is None:
                # a future, so that pages opened at once share one browser session
                self._cdp = asyncio.ensure_future(browser.new_browser_cdp_session())
        try:
            return await asyncio.shield(self._cdp)
        except BaseException:
            if (
                self._cdp is not None
                and self._cdp.done()
                and not self._cdp.cancelled()
                and self._cdp.exception()
            ):
                self._cdp = None
            raise

    def close(self) -> None:
        with self._lock:
            if self._loop is None:
                return
            if self._launched:
                try:
                    self.call(self._shutdown(), timeout=20)
                except Exception as exc:  # closing must not mask the caller's own error
                    log.warning("closing the clone browser: %s", exc)
            self._stop_loop()

    async def _shutdown(self) -> None:
        browser, pw, process = self._browser, self._pw, self._process
        self._browser = self._pw = self._process = self._connecting = None
        self._contexts.clear()
        self._cdp = None
        self._lost = "closed"
        try:
            if browser is not None:
                # Playwright's own browser closes; one connected to ours only lets go of it
                await browser.close()
        finally:
            try:
                if pw is not None:
                    await pw.stop()
            finally:
                if process is not None:
                    await process.close()

    def _stop_loop(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(10)
        if loop is not None and not loop.is_running():
            loop.close()

    def __enter__(self) -> BrowserPool:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class OpenedPage:
    """A page `BrowserPool.open_page` loaded: its context (owned when the caller must close it) and
    the HTTP status its document answered with."""

    context: Any
    page: Any
    owns_context: bool
    status: int


@dataclass
class _Shard:
    """A shared context, its Chromium id, and the pages it is waiting for (by URL, in order: two
    pages opened at the same URL are interchangeable)."""

    context: Any
    context_id: str
    waiting: dict[str, deque[asyncio.Future[Any]]] = field(default_factory=dict)

    def claim(self, page: Any) -> None:
        if not self._hand_over(page):
            # opened before its first navigation committed: claim it once it has
            def on_navigated(frame: Any) -> None:
                if frame is page.main_frame and self._hand_over(page):
                    page.remove_listener("framenavigated", on_navigated)

            page.on("framenavigated", on_navigated)

    def _hand_over(self, page: Any) -> bool:
        url = page.url
        queue = self.waiting.get(url)
        handed = False
        while queue and not handed:
            waiter = queue.popleft()
            if not waiter.done():
                waiter.set_result(page)
                handed = True
        if queue is not None and not queue:
            del self.waiting[url]  # one key per environment's URL would otherwise stay for good
        return handed

    def forget(self, url: str, waiter: asyncio.Future[Any]) -> None:
        queue = self.waiting.get(url)
        if queue and waiter in queue:
            queue.remove(waiter)
        if not queue:
            self.waiting.pop(url, None)


async def goto_page(page: Any, url: str) -> int:
    resp = await page.goto(url, wait_until="domcontentloaded")
    return int(resp.status) if resp is not None else 0


@contextmanager
def launch_browser(
    executable: str | Path = DEFAULT_CHROMIUM,
    *,
    extra_args: tuple[str, ...] = (),
    isolation: Isolation | str = Isolation.SHARED,
    renderers: int | None = None,
) -> Iterator[BrowserPool]:
    """A started BrowserPool, closed on exit."""
    pool = BrowserPool(executable, extra_args=extra_args, isolation=isolation, renderers=renderers).start()
    try:
        yield pool
    finally:
        pool.close()


def descendants(root: int) -> dict[int, int]:
    """Every process below `root`, pid -> parent pid, parents before their children."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = stat_fields(entry.name)
        if fields is None:
            continue
        children.setdefault(int(fields[PARENT]), []).append(int(entry.name))
    out: dict[int, int] = {}
    stack = [root]
    while stack:
        parent = stack.pop()
        for child in children.get(parent, []):
            out[child] = parent
            stack.append(child)
    return out


def descendant_pids(root: int) -> list[int]:
    """Every process below `root` (for measuring the browser's memory)."""
    return list(descendants(root))
