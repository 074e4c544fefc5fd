"""Headless clone environments: a Playwright page of Debian's Chromium showing a clone-server session.

- `BrowserPool` — one Chromium per process, driven from a private event-loop thread so any thread
  (runner workers, RL environments) may use it; one page with its own BrowserContext per environment.
- `CloneDevice` — the `realbench.device.Device` of one page: observe (screenshot + hierarchy dumped
  from the DOM), act (touch events through CDP, so taps, long presses and swipes behave as touches).
- `CloneTarget` — the `realbench.device.Target` of a task pack's clone: per-task setup by restoring
  server state (no browser restart, no page reload) and verification with the clone's verifiers.

After an action the device waits until the page has applied every event it posted (and, after a
swipe, until scrolling stopped) — never a fixed sleep.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import itertools
import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Coroutine, Iterator
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict, Field

from clones.base import Clone, State, get_clone
from clones.drift import Drift
from realbench.actions import (
    Action,
    Answer,
    Click,
    DoubleClick,
    Key,
    KeyPress,
    LongPress,
    OpenApp,
    Swipe,
    Terminate,
    Type,
    Wait,
)
from realbench.device import DeviceKind, TargetKind
from realbench.errors import BrowserMissingError, DeviceError, DeviceLost
from realbench.observation import ImageFormat, Observation, Screenshot
from realbench.outcome import Verdict
from realbench.taskpack import TaskInstance, TaskPack

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_CHROMIUM = os.environ.get("REALBENCH_CHROMIUM", "/usr/bin/chromium")
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
DOUBLE_TAP_GAP_S = 0.08
TOUCH_MOVE_INTERVAL_S = 0.016
CACHE_SIZE = 256


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


# --- the browser ------------------------------------------------------------------------------


def _playwright_error_types() -> tuple[type[BaseException], ...]:
    from playwright.async_api import Error as PlaywrightError

    return (PlaywrightError,)


def _device_error(exc: BaseException, what: str) -> DeviceError:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    lost_markers = ("crash", "closed", "disconnected", "Target page", "Browser has been", "Connection closed")
    if any(m.lower() in text.lower() for m in lost_markers):
        return DeviceLost(
            f"{what}: the page or browser is gone ({text})", hint="the environment must be recreated"
        )
    return DeviceError(f"{what}: {text}", hint="see the log for the browser's message")


class Isolation(StrEnum):
    """How environments share Chromium's renderer processes.

    SHARED: environments with the same emulation are spread over a few shared BrowserContexts, and
    same-site pages of a context share one renderer process (about 11 MiB per extra environment;
    a renderer crash takes down the environments of its context, which then recover on setup).
    CONTEXT: every environment has its own BrowserContext and renderer (about 65 MiB each).
    """

    SHARED = "shared"
    CONTEXT = "context"


class BrowserPool:
    """One headless Chromium for this process, on its own event-loop thread.

    Every page operation is a coroutine run on that loop (`call`), so pages can be driven from any
    thread. Use as a context manager, or `BrowserPool.shared()` for a process-wide one.
    `renderers` bounds the renderer processes per emulation in SHARED isolation (they run pages in
    parallel; default: the number of CPU cores, at most 4).
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
    ) -> None:
        self.executable = Path(executable)
        self.isolation = Isolation(isolation)
        self.renderers = max(1, renderers or min(4, os.cpu_count() or 1))
        shared_args = ("--process-per-site",) if self.isolation is Isolation.SHARED else ()
        self.args = (*CHROMIUM_ARGS, *shared_args, *extra_args)
        self._contexts: dict[Emulation, list[Any]] = {}
        self._next_context = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pw: Any = None
        self._browser: Any = None
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
        return self._browser is not None and self._lost is None

    def start(self) -> BrowserPool:
        """Launch Chromium; relaunch it if it died (pages of the old one are then `lost`)."""
        with self._lock:
            if self._browser is not None and self._lost is None:
                return self
            if not self.executable.exists():
                raise BrowserMissingError(
                    f"Chromium is not installed at {self.executable}",
                    hint="install it with `apt-get install chromium` (or run `make setup`), or set REALBENCH_CHROMIUM",
                )
            if self._browser is not None:
                log.warning("relaunching the clone browser (%s)", self._lost)
                try:
                    self.call(self._shutdown(), timeout=20)
                except Exception as exc:  # the old browser is gone already; only its driver remains
                    log.debug("shutting down the lost browser: %s", exc)
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="clone-browser", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            try:
                self.call(self._launch(), timeout=60)
            except BaseException:
                self._stop_loop()
                raise
            self.generation += 1
            return self

    async def _launch(self) -> None:
        from playwright.async_api import async_playwright

        self._pw = await async_playwright().start()
        try:
            self._browser = await self._pw.chromium.launch(
                executable_path=str(self.executable), headless=True, args=list(self.args)
            )
        except Exception as exc:
            await self._pw.stop()
            self._pw = None
            raise DeviceError(
                f"Chromium at {self.executable} did not start: {exc}", hint="run it by hand to see why"
            ) from None
        self.version = self._browser.version
        self._lost = None
        browser = self._browser
        browser.on("disconnected", lambda _b: self._mark_lost("the browser disconnected", browser))
        log.info("Chromium %s started", self.version)

    def _mark_lost(self, why: str, browser: Any) -> None:
        if self._lost is None and browser is self._browser:
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

    async def _new_context(self, emulation: Emulation) -> Any:
        if self._lost is not None or self._browser is None:
            raise DeviceLost(f"the clone browser is gone ({self._lost or 'not started'})")
        return await self._browser.new_context(
            viewport={"width": emulation.width, "height": emulation.height},
            screen={"width": emulation.width, "height": emulation.height},
            device_scale_factor=emulation.scale,
            is_mobile=True,
            has_touch=True,
            locale="zh-CN",
            timezone_id="Asia/Shanghai",
        )

    async def new_page(self, emulation: Emulation) -> tuple[Any, Any, bool]:
        """A page emulating a touch phone: (context, page, whether the caller owns the context)."""
        if self.isolation is Isolation.CONTEXT:
            context = await self._new_context(emulation)
            return context, await context.new_page(), True
        shards = self._contexts.setdefault(emulation, [])
        if len(shards) < self.renderers:
            shards.append(await self._new_context(emulation))
            context = shards[-1]
        else:
            context = shards[next(self._next_context) % len(shards)]
        return context, await context.new_page(), False

    def close(self) -> None:
        with self._lock:
            if self._loop is None:
                return
            if self._browser is not None:
                try:
                    self.call(self._shutdown(), timeout=20)
                except Exception as exc:  # closing must not mask the caller's own error
                    log.warning("closing the clone browser: %s", exc)
            self._stop_loop()

    async def _shutdown(self) -> None:
        browser, pw = self._browser, self._pw
        self._browser = self._pw = None
        self._contexts.clear()
        self._lost = "closed"
        try:
            if browser is not None:
                await browser.close()
        finally:
            if pw is not None:
                await pw.stop()

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


# --- the device -------------------------------------------------------------------------------

_serials = itertools.count(1)


class CloneDevice:
    """One environment's page. Implements `realbench.device.Device`."""

    def __init__(
        self,
        pool: BrowserPool,
        server_url: str,
        clone: Clone,
        *,
        emulation: Emulation | None = None,
        image_format: ImageFormat = ImageFormat.JPEG,
        jpeg_quality: int = 80,
        serial: str | None = None,
    ) -> None:
        self.pool = pool
        self.server_url = server_url.rstrip("/")
        self.clone = clone
        self.emulation = emulation or Emulation()
        self.image_format = ImageFormat(image_format)
        self.jpeg_quality = jpeg_quality
        self._serial = serial or f"clone-{clone.name}-{next(_serials)}"
        self._context: Any = None
        self._owns_context = False
        self._page: Any = None
        self._cdp: Any = None
        self._session: str | None = None
        self._crashed = False
        self._generation = 0

    # --- Device protocol ---

    @property
    def kind(self) -> DeviceKind:
        return DeviceKind.HEADLESS_CLONE

    @property
    def serial(self) -> str:
        return self._serial

    @property
    def session(self) -> str | None:
        return self._session

    def size(self) -> tuple[int, int]:
        return self.emulation.pixel_size

    def observe(self) -> Observation:
        shot, xml = self._run(self._observe(), "observe")
        return Observation(screenshot=Screenshot.from_bytes(shot), hierarchy=xml, app=self.clone.package)

    def act(self, action: Action) -> None:
        if isinstance(action, Answer | Terminate):
            return
        self._run(self._act(action), f"act {action.type}", timeout=CALL_TIMEOUT_S + _action_seconds(action))

    def start_app(self, app: str) -> None:
        self.act(OpenApp(app=app))

    def stop_app(self, app: str) -> None:
        """A stopped app reopens on its home screen; the clone has no process to kill."""
        if self._page is not None and app in (self.clone.package, self.clone.name):
            self._run(self._post("__home__"), "stop_app")

    def close(self) -> None:
        context, page, owned = self._context, self._page, self._owns_context
        self._context = self._page = self._cdp = None
        self._session = None
        self._crashed = False
        if page is not None and self.pool.running and self._generation == self.pool.generation:
            try:
                self.pool.call(context.close() if owned else page.close(), timeout=10)
            except Exception as exc:  # closing must not mask the caller's own error
                log.debug("closing page of %s: %s", self._serial, exc)

    @property
    def lost(self) -> bool:
        """True when the page crashed or was closed under us (the device must be reopened)."""
        if self._page is None:
            return False
        return (
            self._crashed
            or self._generation != self.pool.generation
            or not self.pool.running
            or self._page.is_closed()
        )

    # --- session plumbing used by CloneTarget ---

    def open(self, session: str) -> None:
        """Show a server session (navigates only when the session changes)."""
        self._run(self._open(session), "open")

    def show(self, screen: dict[str, Any]) -> None:
        """Swap in a screen payload ({version, route, html}) from the server, e.g. after a restore,
        without reloading the page; scroll positions and focus start afresh."""
        self._run(self._show(screen), "show")

    def refresh(self) -> None:
        self._run(self._page_eval("() => window.__rb.refresh(true)"), "refresh")

    def settle(self) -> dict[str, Any]:
        return self._run(self._settled(False), "settle")

    def version(self) -> int:
        return int(self._run(self._page_eval("() => window.__rb.version"), "version"))

    # --- internals (run on the browser loop) ---

    def _run(self, coro: Coroutine[Any, Any, T], what: str, timeout: float = CALL_TIMEOUT_S) -> T:
        try:
            return self.pool.call(coro, timeout=timeout)
        except DeviceError:
            raise
        except _playwright_error_types() as exc:
            raise _device_error(exc, f"{self._serial} {what}") from None

    def _require_page(self) -> Any:
        if self._crashed:
            raise DeviceLost(f"{self._serial}: the page crashed", hint="the environment must be recreated")
        if self._page is None:
            raise DeviceError(f"{self._serial} shows no session yet", hint="call CloneTarget.setup first")
        return self._page

    def _on_crash(self, _page: Any) -> None:
        self._crashed = True
        log.warning("page of %s crashed", self._serial)

    async def _open(self, session: str) -> None:
        if self._page is None:
            self._context, self._page, self._owns_context = await self.pool.new_page(self.emulation)
            self._generation = self.pool.generation
            self._page.on("crash", self._on_crash)
            self._cdp = await self._context.new_cdp_session(self._page)
        page = self._require_page()
        if session != self._session:
            resp = await page.goto(f"{self.server_url}/s/{session}", wait_until="domcontentloaded")
            if resp is None or resp.status != 200:
                status = resp.status if resp is not None else "no response"
                raise DeviceError(f"{self._serial}: the clone page for session {session} answered {status}")
            await page.wait_for_function("() => !!window.__rb")
            self._session = session

    async def _page_eval(self, script: str, arg: Any = None) -> Any:
        page = self._require_page()
        return await page.evaluate(script, arg)

    async def _show(self, screen: dict[str, Any]) -> None:
        await self._page_eval("(d) => window.__rb.apply(d, true)", screen)

    async def _settled(self, wait_scroll: bool) -> dict[str, Any]:
        result = await self._page_eval("(s) => window.__rb.settled(s)", wait_scroll)
        if result and result.get("error"):
            raise DeviceLost(f"{self._serial}: the page could not reach the clone server ({result['error']})")
        return dict(result or {})

    async def _post(self, event: str) -> None:
        await self._page_eval("(e) => { window.__rb.post(e); }", event)
        await self._settled(False)

    async def _observe(self) -> tuple[bytes, str]:
        await self._settled(False)
        self._require_page()
        params: dict[str, Any] = {
            "format": self.image_format.value,
            "captureBeyondViewport": False,
            "optimizeForSpeed": True,
        }
        if self.image_format is ImageFormat.JPEG:
            params["quality"] = self.jpeg_quality
        if self.emulation.scale != 1:
            params["clip"] = {
                "x": 0,
                "y": 0,
                "width": self.emulation.width,
                "height": self.emulation.height,
                "scale": self.emulation.scale,
            }
        shot, xml = await asyncio.gather(
            self._cdp.send("Page.captureScreenshot", params),
            self._page_eval("(s) => window.__rb.dumpHierarchy(s)", self.emulation.scale),
        )
        return base64.b64decode(shot["data"]), str(xml)

    def _css(self, x: int, y: int) -> tuple[float, float]:
        """Normalised 0–1000 to CSS px, through the same pixel rule as `Screenshot.to_pixels`."""
        w, h = self.size()
        px, py = round(x * (w - 1) / 1000), round(y * (h - 1) / 1000)
        s = self.emulation.scale
        return (
            min((px + 0.5) / s, self.emulation.width - 0.5),
            min((py + 0.5) / s, self.emulation.height - 0.5),
        )

    async def _touch(self, kind: str, x: float | None = None, y: float | None = None) -> None:
        points = (
            []
            if x is None or y is None
            else [{"x": x, "y": y, "id": 0, "radiusX": 1, "radiusY": 1, "force": 1}]
        )
        self._require_page()
        await self._cdp.send("Input.dispatchTouchEvent", {"type": kind, "touchPoints": points})

    async def _tap(self, x: float, y: float) -> None:
        await self._touch("touchStart", x, y)
        await self._touch("touchEnd")

    async def _act(self, action: Action) -> None:
        wait_scroll = False
        if isinstance(action, Click):
            await self._tap(*self._css(action.x, action.y))
        elif isinstance(action, DoubleClick):
            point = self._css(action.x, action.y)
            await self._tap(*point)
            await asyncio.sleep(DOUBLE_TAP_GAP_S)
            await self._tap(*point)
        elif isinstance(action, LongPress):
            x, y = self._css(action.x, action.y)
            await self._touch("touchStart", x, y)
            await asyncio.sleep(action.duration_ms / 1000)
            await self._touch("touchEnd")
        elif isinstance(action, Swipe):
            await self._swipe(action)
            wait_scroll = True
        elif isinstance(action, Type):
            await self._require_page_cdp("Input.insertText", {"text": action.text})
            await self._page_eval("() => { window.__rb.post('__sync__'); }")
        elif isinstance(action, KeyPress):
            if action.key is Key.BACK:
                await self._page_eval("() => { window.__rb.post('__back__'); }")
            elif action.key is Key.HOME:
                await self._page_eval("() => { window.__rb.post('__home__'); }")
            elif action.key is Key.ENTER:
                await self._page_eval("() => { window.__rb.enter(); }")
            # RECENT opens the task switcher on a phone; a single-app clone has nothing to show.
        elif isinstance(action, OpenApp):
            if action.app in (self.clone.package, self.clone.name):
                await self._page_eval("() => { window.__rb.post('__home__'); }")
            else:
                log.info(
                    "%s: open_app(%s) ignored: only %s runs here",
                    self._serial,
                    action.app,
                    self.clone.package,
                )
        elif isinstance(action, Wait):
            await asyncio.sleep(action.seconds)
        await self._settled(wait_scroll)

    async def _require_page_cdp(self, method: str, params: dict[str, Any]) -> Any:
        self._require_page()
        return await self._cdp.send(method, params)

    async def _swipe(self, action: Swipe) -> None:
        x1, y1 = self._css(action.x, action.y)
        x2, y2 = self._css(action.x2, action.y2)
        steps = max(4, round(action.duration_ms / 1000 / TOUCH_MOVE_INTERVAL_S))
        interval = action.duration_ms / 1000 / steps
        await self._touch("touchStart", x1, y1)
        for i in range(1, steps + 1):
            f = i / steps
            await asyncio.sleep(interval)
            await self._touch("touchMove", x1 + (x2 - x1) * f, y1 + (y2 - y1) * f)
        await self._touch("touchEnd")


def _action_seconds(action: Action) -> float:
    if isinstance(action, Wait):
        return action.seconds
    if isinstance(action, LongPress | Swipe):
        return action.duration_ms / 1000
    return 0.0


# --- the target -------------------------------------------------------------------------------


class CloneTarget:
    """A task pack's clone in a headless page. Implements `realbench.device.Target`.

    `setup` builds the task's start state on the clone server once per (setup, params), keeps a
    snapshot of it, and on later episodes restores that snapshot and swaps the screen in place.
    """

    def __init__(
        self,
        pack: TaskPack,
        server_url: str,
        *,
        browser: BrowserPool | None = None,
        scale: float = 2.625,
        image_format: ImageFormat = ImageFormat.JPEG,
        jpeg_quality: int = 80,
        drift: Drift | str | dict[str, Any] | None = None,
        emulation: Emulation | None = None,
    ) -> None:
        self.pack = pack
        self.clone = get_clone(pack.clone)
        self.server_url = server_url.rstrip("/")
        self.pool = (browser or BrowserPool.shared()).start()
        self.emulation = emulation or Emulation(scale=scale)
        self.drift = drift
        self._http = httpx.Client(base_url=self.server_url, timeout=CALL_TIMEOUT_S)
        self._device = CloneDevice(
            self.pool,
            self.server_url,
            self.clone,
            emulation=self.emulation,
            image_format=image_format,
            jpeg_quality=jpeg_quality,
        )
        self._session: str | None = None
        self._starts: OrderedDict[str, tuple[str, State]] = OrderedDict()
        self._before: State | None = None

    # --- Target protocol ---

    @property
    def kind(self) -> TargetKind:
        return TargetKind.CLONE

    @property
    def device(self) -> CloneDevice:
        return self._device

    @property
    def delivers_boundary(self) -> bool:
        return True

    @property
    def session(self) -> str | None:
        return self._session

    def describe(self) -> dict[str, Any]:
        drift = self.drift
        drift_name = (
            drift.name
            if isinstance(drift, Drift)
            else drift.get("profile", "custom")
            if isinstance(drift, dict)
            else drift
        )
        return {
            "kind": DeviceKind.HEADLESS_CLONE.value,
            "serial": self._device.serial,
            "virtual": False,
            "model": f"Chromium {self.pool.version} (headless, {self.emulation.width}x{self.emulation.height} CSS px)",
            "browser": self.pool.version,
            "scale": self.emulation.scale,
            "screen": list(self.emulation.pixel_size),
            "clone": self.clone.name,
            "package": self.clone.package,
            "drift": drift_name,
        }

    def setup(self, instance: TaskInstance) -> None:
        if not self.pool.running:
            self.pool.start()  # the browser died: relaunch it (once per pool, whoever comes first)
        if self._device.lost:
            # A crashed page (or one closed with its shared renderer or browser) is replaced; the
            # server session, and so every cached start state, survives.
            log.info("%s: page lost; opening a new one", self._device.serial)
            self._device.close()
        setup = instance.task.clone.setup.model_dump(mode="json")
        key = json.dumps([setup, instance.params], sort_keys=True, default=str, ensure_ascii=False)
        for attempt in range(2):
            try:
                self._setup(key, setup, instance.params)
                return
            except _SessionGone:
                if attempt:
                    raise DeviceLost(
                        f"{self._device.serial}: the clone server lost the session twice"
                    ) from None
                log.info("%s: session gone on the server; starting a new one", self._device.serial)
                self._session = None
                self._starts.clear()

    def verify(self, instance: TaskInstance, answer: str | None) -> Verdict:
        if self._before is None:
            raise DeviceError(f"{self._device.serial}: verify called before setup")
        return self.clone.verify_instance(instance, self._before, self.state(), answer)

    def teardown(self) -> None:
        sid, self._session = self._session, None
        if sid is not None:
            try:
                self._http.delete(f"/api/sessions/{sid}")
            except httpx.HTTPError as exc:
                log.debug("deleting session %s: %s", sid, exc)
        self._device.close()
        self._http.close()

    # --- state access (the server owns the state) ---

    def state(self) -> State:
        return dict(self._api("GET", f"/api/sessions/{self._require_session()}/state"))

    def before(self) -> State | None:
        """The state at the last setup (what `verify` compares against)."""
        return self._before

    # --- internals ---

    def _require_session(self) -> str:
        if self._session is None:
            raise DeviceError(f"{self._device.serial}: no session yet", hint="call setup first")
        return self._session

    def _api(self, method: str, path: str, body: Any = None) -> Any:
        try:
            resp = self._http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise DeviceLost(
                f"the clone server at {self.server_url} is unreachable: {exc}", hint="is it running?"
            ) from None
        if resp.status_code == 404 and "/api/sessions/" in path:
            raise _SessionGone(resp.text)
        if resp.status_code != 200:
            raise DeviceError(f"clone server {method} {path} answered {resp.status_code}: {resp.text[:300]}")
        return resp.json()

    def _remember(self, key: str, snapshot: str, before: State) -> None:
        self._starts[key] = (snapshot, before)
        while len(self._starts) > CACHE_SIZE:
            self._starts.popitem(last=False)

    def _setup(self, key: str, setup: dict[str, Any], params: dict[str, Any]) -> None:
        known = self._starts.get(key)
        if self._session is None:
            body: dict[str, Any] = {"clone": self.clone.name, "setup": setup, "params": params}
            if self.drift is not None:
                body["drift"] = self.drift.model_dump() if isinstance(self.drift, Drift) else self.drift
            created = self._api("POST", "/api/sessions", body)
            self._session = str(created["session"])
            snapshot = self._api("POST", f"/api/sessions/{self._session}/snapshot")["snapshot"]
            before = self.state()
            self._remember(key, snapshot, before)
            self._device.open(self._session)
        elif known is not None:
            snapshot, before = known
            self._starts.move_to_end(key)
            try:
                screen = self._api("POST", f"/api/sessions/{self._session}/restore", {"snapshot": snapshot})
            except _SessionGone:
                # The session lives but the server dropped the snapshot: rebuild from the setup.
                self._starts.pop(key, None)
                self._rebuild(key, setup, params)
                return
            self._present(screen)
        else:
            self._rebuild(key, setup, params)
            return
        self._before = before

    def _rebuild(self, key: str, setup: dict[str, Any], params: dict[str, Any]) -> None:
        sid = self._require_session()
        screen = self._api("POST", f"/api/sessions/{sid}/restore", {"setup": setup, "params": params})
        snapshot = self._api("POST", f"/api/sessions/{sid}/snapshot")["snapshot"]
        before = self.state()
        self._remember(key, snapshot, before)
        self._present(screen)
        self._before = before

    def _present(self, screen: dict[str, Any]) -> None:
        """Show the restored screen: swapped into the live page, or by opening the session."""
        sid = self._require_session()
        if self._device.session == sid:
            self._device.show(screen)
        else:
            self._device.open(sid)


class _SessionGone(DeviceError):
    """The server no longer knows the session (or snapshot); the target starts a new one."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"the clone server no longer has this session: {detail[:200]}")


def descendant_pids(root: int) -> list[int]:
    """Every process below `root` (for measuring the browser's memory)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out
