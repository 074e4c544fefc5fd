"""RL pages that Playwright never sees: opened, emulated, driven and closed over the direct DevTools
connection (`devices.rl.cdp`).

A page Playwright opens gets its instrumentation: about twenty commands at birth (lifecycle, network
and runtime events, an isolated utility world, frame-tree bookkeeping) and, from then on, an event to
its driver for every request and console message the page makes. An RL environment needs none of it:
its page is driven by evaluations, captures and touch events. Here a page is created in a browser
context of this connection's own (Playwright detaches from targets of contexts it did not make), given
the emulation Playwright would give a page of `BrowserPool`'s contexts (the same commands and values:
`tests/test_rl_direct_pages.py` compares what the two kinds of page report), and loaded. Unlike
Playwright, nothing sizes its window to the viewport: the page keeps the small window its browser
starts new pages in (`devices.rl.host.WINDOW_SIZE_ARG`).

Pages whose requests need headers (a token-guarded server) keep Playwright's path.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from devices.clone_browser import CALL_TIMEOUT_S, PAGE_LOCALE, PAGE_TIMEZONE, BrowserPool, Emulation
from devices.rl import cdp
from realbench.errors import DeviceError

log = logging.getLogger(__name__)

# Playwright's default font families for a headless Chromium on Linux (Page.setFontFamilies): a
# clone's CSS names its fonts, but generic families fall back to these on Playwright's pages too
FONT_FAMILIES = {
    "standard": "Times New Roman",
    "fixed": "Monospace",
    "serif": "Times New Roman",
    "sansSerif": "Arial",
    "cursive": "Comic Sans MS",
    "fantasy": "Impact",
}
LOAD_POLL_S = 0.005
CLOSE_WAIT_S = 5.0
# A locale or timezone override holds for a whole renderer: its second page is refused the same
# override with these words (Playwright ignores them too)
ALREADY_IN_EFFECT = ("Another locale override is already in effect", "Timezone override is already in effect")

# Resolves at DOMContentLoaded (the runtime is inline at the end of the body, so it has run by then)
# with what the page's opener checks. Before the navigation commits, the evaluation runs in the
# target's initial empty document, which the URL tells apart.
_LOADED_JS = """() => new Promise((resolve) => {
  const done = () => resolve({
    url: location.href,
    runtime: !!window.__rb,
    status: (performance.getEntriesByType('navigation')[0] || {}).responseStatus || 0,
  });
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', done, { once: true });
  else done();
})"""


@dataclass(eq=False)
class DirectPage:
    """What a `CloneDevice` uses of a Playwright page, for a page of the direct connection."""

    session: cdp.PageSession
    target_id: str
    url: str
    context_id: str  # pages of one context share a renderer

    def is_closed(self) -> bool:
        return self.session.gone is not None

    def on(self, event: str, callback: Callable[[Any], None]) -> None:
        """Only "crash" (a page whose target merely closed is `is_closed`, as Playwright's is)."""
        if event != "crash":
            raise ValueError(f"a direct page reports only crashes, not {event!r}")

        def ended(why: str) -> None:
            if why == "crashed":
                callback(self)

        self.session.connection.watch(self.session.session_id, ended)

    async def evaluate(self, function: str, arg: Any = None) -> Any:
        return await self.session.evaluate(function, arg)

    async def close(self) -> None:
        """Close the page and wait until Chromium has let go of it (its sessions detached), as
        Playwright's close does."""
        connection = self.session.connection
        if connection.closed is not None or self.is_closed():
            return
        gone: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        def ended(why: str) -> None:
            if not gone.done():
                gone.set_result(why)

        connection.watch(self.session.session_id, ended)
        await connection.send("Target.closeTarget", {"targetId": self.target_id})
        try:
            await asyncio.wait_for(gone, CLOSE_WAIT_S)
        except TimeoutError:
            log.debug("page %s still attached %.0f s after it was closed", self.target_id, CLOSE_WAIT_S)


def emulation_commands(emulation: Emulation, scale: float) -> list[tuple[str, dict[str, Any]]]:
    """The commands Playwright sends a new page of a context made by `BrowserPool._new_context`
    (a touch phone in portrait, zh-CN, Asia/Shanghai), with the device scale factor `scale`."""
    return [
        (
            "Emulation.setDeviceMetricsOverride",
            {
                "mobile": True,
                "width": emulation.width,
                "height": emulation.height,
                "screenWidth": emulation.width,
                "screenHeight": emulation.height,
                "deviceScaleFactor": scale,
                "screenOrientation": {"angle": 0, "type": "portraitPrimary"},
            },
        ),
        ("Emulation.setFocusEmulationEnabled", {"enabled": True}),
        ("Emulation.setTouchEmulationEnabled", {"enabled": True}),
        ("Emulation.setUserAgentOverride", {"userAgent": "", "acceptLanguage": PAGE_LOCALE}),
        ("Emulation.setLocaleOverride", {"locale": PAGE_LOCALE}),
        ("Emulation.setTimezoneOverride", {"timezoneId": PAGE_TIMEZONE}),
        ("Page.setFontFamilies", {"fontFamilies": FONT_FAMILIES}),
    ]


async def open_page(
    pool: BrowserPool, emulation: Emulation, url: str, *, headers: bool = False
) -> DirectPage | None:
    """A direct page of `pool`'s browser showing `url` (loaded, its runtime ready), or None where
    the direct path is off, the browser has no DevTools port, or the page needs `headers`."""
    if headers:
        return None
    connection = await cdp.connection_of(pool)
    if connection is None:
        return None
    context = await connection.page_context(pool.renderers)
    # Created at its URL, so the page starts in its site's renderer (about:blank first would cost a
    # renderer process of its own, see `BrowserPool._open_in`), in the browser's small window
    # (`devices.rl.host.WINDOW_SIZE_ARG`). The emulation reaches it while it loads: RL pages open
    # without a screen (`RLCloneDevice.page_query`), so nothing is laid out that a capture could see.
    created = await connection.send(
        "Target.createTarget",
        {"url": url, "browserContextId": context},
    )
    target = str(created["targetId"])
    try:
        # The emulation lives on a session of its own, kept attached (detaching would lift it): a
        # capture through the session that set a device-metrics override takes Chromium's
        # emulation-aware path, which sized a 449 px wide page's capture 997 px tall where a
        # Playwright page's, captured through another session as every RL page is, is 998.
        emulating, session = await asyncio.gather(
            connection.attach(target, pool), connection.attach(target, pool)
        )
        await asyncio.gather(
            *(
                _emulate(emulating, m, p)
                for m, p in emulation_commands(emulation, pool.page_scale(emulation))
            ),
            # crashes are reported to sessions that enabled the Inspector domain
            session.send("Inspector.enable"),
        )
        loaded = await _loaded(session, url)
    except BaseException:
        if connection.closed is None:
            try:
                await connection.send("Target.closeTarget", {"targetId": target})
            except Exception as exc:  # the page goes with its browser anyway
                log.debug("closing a page that failed to open: %s", exc)
        raise
    if loaded["status"] != 200:
        raise DeviceError(f"the clone page {url} answered {loaded['status'] or 'nothing'}")
    if not loaded["runtime"]:
        raise DeviceError(f"the clone page {url} has no runtime")
    return DirectPage(session, target, url, context)


async def _emulate(session: cdp.PageSession, method: str, params: dict[str, Any]) -> None:
    try:
        await session.send(method, params)
    except cdp.CDPError as exc:
        if not any(words in str(exc) for words in ALREADY_IN_EFFECT):
            raise


async def _loaded(session: cdp.PageSession, url: str) -> dict[str, Any]:
    deadline = asyncio.get_running_loop().time() + CALL_TIMEOUT_S
    while True:
        try:
            result = await session.evaluate(_LOADED_JS)
            if result["url"] == url:
                return dict(result)
        except DeviceError as exc:  # the navigation committed under the evaluation
            if session.gone is not None:
                raise
            log.debug("waiting for %s: %s", url, exc)
        if asyncio.get_running_loop().time() > deadline:
            raise DeviceError(f"the clone page {url} did not load within {CALL_TIMEOUT_S:.0f} s")
        await asyncio.sleep(LOAD_POLL_S)
