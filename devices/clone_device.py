"""`CloneDevice` — the `realbench.device.Device` of one headless clone page.

Observe (screenshot + hierarchy dumped from the DOM), act (touch events through CDP, so taps, long
presses and swipes behave as touches). After an action the device waits until the page has applied
every event it posted (and, after a swipe, until scrolling stopped) — never a fixed sleep.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from clones.base import Clone
from devices.clone_browser import (
    CALL_TIMEOUT_S,
    BrowserPool,
    Emulation,
    device_error,
    goto_page,
    playwright_error_types,
)
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
from realbench.device import DeviceKind
from realbench.errors import DeviceError, DeviceLost
from realbench.http_guard import auth_headers
from realbench.observation import ImageFormat, Observation, Screenshot

log = logging.getLogger(__name__)

T = TypeVar("T")

DOUBLE_TAP_GAP_S = 0.08
TOUCH_MOVE_INTERVAL_S = 0.016
# what a tap waits for in the page (`_tap_applied`): its click applied, or the touch acknowledged
AFTER_TAP_JS = "([n]) => window.__rb.afterTap(n)"
# keys a clone's page hands to its server as events, as its own back and home buttons do
POSTED_KEYS = {Key.BACK: "__back__", Key.HOME: "__home__"}

_serials = itertools.count(1)


class CloneDevice:
    """One environment's page. Implements `realbench.device.Device`."""

    page_query = ""  # added to the page's URL (RLCloneDevice opens its pages without a screen)

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
        token: str | None = None,
    ) -> None:
        self.pool = pool
        # a token-guarded server: every request of the page (its load, its event posts) carries it
        self._headers = auth_headers(token)
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
        # touch sequences ended on the current page load (the runtime counts the same ones)
        self._touch_ends = 0

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
        return self._observation(self._run(self._observe(), "observe"))

    def _observation(self, captured: tuple[bytes, str]) -> Observation:
        shot, xml = captured
        return Observation(screenshot=Screenshot.from_bytes(shot), hierarchy=xml, app=self.clone.package)

    def screenshot(self) -> Screenshot:
        """The screen's pixels alone (a phone's screencap), once pending events are applied."""
        return Screenshot.from_bytes(self._run(self._settled_then(self._capture), "screenshot"))

    def hierarchy(self) -> str:
        """The UI hierarchy alone (a phone's dump), once pending events are applied: the cheap
        probe for waiting until a screen settles, with no screenshot taken and thrown away."""
        return self._run(self._settled_then(self._dump), "hierarchy")

    def act(self, action: Action) -> None:
        if isinstance(action, Answer | Terminate):
            return
        self._run(self._act(action), f"act {action.type}", timeout=CALL_TIMEOUT_S + action_seconds(action))

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
        except playwright_error_types() as exc:
            raise device_error(exc, f"{self._serial} {what}") from None

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
        url = f"{self.server_url}/s/{session}{self.page_query}"
        if self._page is None:
            self._cdp = None
            opened = await self.pool.open_page(self.emulation, url, tuple(sorted(self._headers.items())))
            self._context, self._page, self._owns_context = opened.context, opened.page, opened.owns_context
            self._generation = self.pool.generation
            self._page.on("crash", self._on_crash)
            status = opened.status
        elif session != self._session:
            status = await goto_page(self._require_page(), url)
        else:
            return
        if status != 200:
            raise DeviceError(
                f"{self._serial}: the clone page for session {session} answered {status or 'nothing'}"
            )
        # The runtime is inline at the end of the body, so it has run by DOMContentLoaded; one
        # evaluation checks it (wait_for_function would first inject Playwright's own helper
        # script into every page, a measurable part of bringing an environment up).
        if not await self._require_page().evaluate("() => !!window.__rb"):
            raise DeviceError(f"{self._serial}: the clone page for session {session} has no runtime")
        self._session = session
        self._touch_ends = 0

    async def _session_cdp(self) -> Any:
        """The page's CDP session, attached on first use: an environment that is brought up but not
        yet stepped costs the browser one attachment less."""
        if self._cdp is None:
            # a future, so that calls racing for the first session share one
            self._cdp = asyncio.ensure_future(self._context.new_cdp_session(self._require_page()))
        try:
            return await asyncio.shield(self._cdp)
        except BaseException:
            if self._cdp.done() and (self._cdp.cancelled() or self._cdp.exception() is not None):
                self._cdp = None  # attach again next time
            raise

    async def _page_eval(self, script: str, arg: Any = None) -> Any:
        page = self._require_page()
        return await page.evaluate(script, arg)

    async def _show(self, screen: dict[str, Any]) -> None:
        await self._page_eval("(d) => window.__rb.apply(d, true)", screen)

    async def _settled(self, wait_scroll: bool) -> dict[str, Any]:
        result = await self._page_eval("(s) => window.__rb.settled(s)", wait_scroll)
        return self._check_settled(result)

    def _check_settled(self, result: dict[str, Any] | None) -> dict[str, Any]:
        if result and result.get("error"):
            raise DeviceLost(f"{self._serial}: the page could not reach the clone server ({result['error']})")
        return dict(result or {})

    async def _post(self, event: str) -> None:
        await self._page_eval("(e) => { window.__rb.post(e); }", event)
        await self._settled(False)

    async def _observe(self) -> tuple[bytes, str]:
        return await self._settled_then(self._capture_and_dump)

    async def _capture_and_dump(self) -> tuple[bytes, str]:
        shot, xml = await asyncio.gather(self._capture(), self._dump())
        return shot, xml

    async def _capture(self) -> bytes:
        params: dict[str, Any] = {
            "format": self.image_format.value,
            "captureBeyondViewport": False,
            "optimizeForSpeed": True,
        }
        if self.image_format is ImageFormat.JPEG:
            params["quality"] = self.jpeg_quality
        if self.emulation.scale != 1 and not self.pool.captures_as_drawn(self.emulation):
            params["clip"] = {
                "x": 0,
                "y": 0,
                "width": self.emulation.width,
                "height": self.emulation.height,
                "scale": self.emulation.scale,
            }
        shot = await (await self._session_cdp()).send("Page.captureScreenshot", params)
        return base64.b64decode(shot["data"])

    async def _dump(self) -> str:
        return str(await self._page_eval("(s) => window.__rb.dumpHierarchy(s)", self.emulation.scale))

    async def _settled_then(self, part: Callable[[], Awaitable[T]]) -> T:
        await self._settled(False)
        self._require_page()
        return await part()

    def _css(self, x: int, y: int) -> tuple[float, float]:
        """Normalised 0–1000 to CSS px, through the same pixel rule as `Screenshot.to_pixels`."""
        w, h = self.size()
        px, py = round(x * (w - 1) / 1000), round(y * (h - 1) / 1000)
        s = self.emulation.scale
        return (
            min((px + 0.5) / s, self.emulation.width - 0.5),
            min((py + 0.5) / s, self.emulation.height - 0.5),
        )

    async def _touch(
        self, kind: str, x: float | None = None, y: float | None = None, *, timestamp: float | None = None
    ) -> None:
        points = (
            []
            if x is None or y is None
            else [{"x": x, "y": y, "id": 0, "radiusX": 1, "radiusY": 1, "force": 1}]
        )
        self._require_page()
        if kind in ("touchEnd", "touchCancel"):
            self._touch_ends += 1
        params: dict[str, Any] = {"type": kind, "touchPoints": points}
        if timestamp is not None:
            params["timestamp"] = timestamp
        await (await self._session_cdp()).send("Input.dispatchTouchEvent", params)

    async def _tap(self, x: float, y: float) -> None:
        # Both events are sent at once: CDP delivers a session's commands in order, and waiting for
        # the first one's acknowledgement cost a round trip per tap (a phone's tap has no gap either).
        await self._session_cdp()  # attached before the two sends, so they leave in order
        await asyncio.gather(self._touch("touchStart", x, y), self._touch("touchEnd"))

    async def _tap_applied(self, x: float, y: float, wait: str = AFTER_TAP_JS, arg: Any = None) -> Any:
        """A tap, returning what `wait` (a page function of ``[n, arg]``, `n` the tap's number)
        resolves to once the page applied what the tap posted. The wait is asked for together with
        the touches (not after their acknowledgement): the page knows when the tap's click ran,
        which saves a round trip and a timer per step. A touch that ends without a click is released
        by the acknowledgement instead."""
        self._require_page()
        n = self._touch_ends + 1
        applied = asyncio.ensure_future(self._page_eval(wait, [n, arg]))
        try:
            await self._tap(x, y)
            acknowledged = self._page_eval("(n) => window.__rb.tapAcknowledged(n)", n)
            result, _ = await asyncio.gather(applied, acknowledged)
        except BaseException:
            applied.cancel()
            raise
        return result

    async def _act(self, action: Action) -> None:
        wait_scroll = False
        if isinstance(action, Click):
            self._check_settled(await self._tap_applied(*self._css(action.x, action.y)))
            return
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
            if action.key in POSTED_KEYS:
                await self._page_eval("(e) => { window.__rb.post(e); }", POSTED_KEYS[action.key])
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
        return await (await self._session_cdp()).send(method, params)

    async def _swipe(self, action: Swipe) -> None:
        x1, y1 = self._css(action.x, action.y)
        x2, y2 = self._css(action.x2, action.y2)
        steps = max(4, round(action.duration_ms / 1000 / TOUCH_MOVE_INTERVAL_S))
        interval = action.duration_ms / 1000 / steps
        # Each event carries the time it was meant for, not the time it was sent: Chromium takes a
        # fling's velocity from the events' timestamps, so a loaded machine's late sends no longer
        # change where a swipe's fling comes to rest.
        start = time.time()
        await self._touch("touchStart", x1, y1, timestamp=start)
        for i in range(1, steps + 1):
            f = i / steps
            await asyncio.sleep(max(0.0, start + i * interval - time.time()))
            await self._touch(
                "touchMove", x1 + (x2 - x1) * f, y1 + (y2 - y1) * f, timestamp=start + i * interval
            )
        await self._touch("touchEnd", timestamp=start + steps * interval)


def action_seconds(action: Action) -> float:
    if isinstance(action, Wait):
        return action.seconds
    if isinstance(action, LongPress | Swipe):
        return action.duration_ms / 1000
    return 0.0
