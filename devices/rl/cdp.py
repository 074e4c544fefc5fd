"""A direct DevTools connection to an RL host's Chromium, beside Playwright, for a page's hot calls.

Playwright drives every command through its driver process: Python -> the driver -> Chromium and
back, each message parsed and re-encoded twice. A trivial evaluation took 3-4 ms that way against
0.8 ms over the browser's own DevTools websocket, and every JPEG observation crossed the driver as
base64 (docs/benchmarks.md, RL environments). Here an RL page's evaluations, captures and input
events go over one websocket per browser (flat sessions, commands tagged with a page's session id),
and the pages themselves are opened and closed over it (`devices.rl.direct_page`). The pool starts
the browser itself (`Launcher.DIRECT`, no Playwright driver) and reports its death; Playwright is
connected to it only for a page that needs it.

The browser is started with ``--remote-debugging-port=0`` and a mark naming its pool
(`devtools_args`); Chromium then writes the port it chose into ``DevToolsActivePort`` in its
profile directory, found from the marked browser process's command line. The port listens on
127.0.0.1 only, and these browsers show clone pages of a local server, nothing of a real account.
Where no such port is found the page keeps Playwright's path.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devices.chromium_launch import PORT_FILE, devtools_endpoint
from devices.clone_browser import BrowserPool
from devices.rl.browser import chromium_command_lines, process_type
from realbench.errors import DeviceError, DeviceLost

log = logging.getLogger(__name__)

DEVTOOLS_ARGS = ("--remote-debugging-port=0",)
# Chromium ignores switches it does not know: this one names the pool a browser belongs to, so its
# DevTools port is found from the process list before any page exists (a host runs one browser per
# screen scale)
POOL_MARK = "--realbench-pool="
LOST_BROWSER_WAIT_S = 5.0
PORT_FILE_WAIT_S = 10.0
GONE_KEPT = 4096
# False: every page keeps Playwright's path and browsers started afterwards open no DevTools port
# (`use_playwright`, or REALBENCH_RL_DEVTOOLS=0 in the environment)
ENABLED = os.environ.get("REALBENCH_RL_DEVTOOLS", "1") != "0"


def devtools_args() -> tuple[str, ...]:
    """What an RL browser is launched with for the direct path (nothing when it is off); each call
    marks a new browser."""
    return (*DEVTOOLS_ARGS, f"{POOL_MARK}{uuid.uuid4().hex}") if ENABLED else ()


def pool_mark(pool: BrowserPool) -> str | None:
    """The mark `devtools_args` gave `pool`'s browser, if any."""
    return next((a for a in pool.args if a.startswith(POOL_MARK)), None)


def use_playwright() -> None:
    """Turn the direct path off in this process (e.g. ``rl_envs.py --worker-import
    devices.rl.cdp:use_playwright``)."""
    global ENABLED
    ENABLED = False


def devtools_browsers(root: int | None = None, mark: str | None = None) -> dict[int, list[str]]:
    """Browser processes below `root` (this process) launched with a DevTools port (only the one
    launched with `mark`, when given): pid -> command line."""
    return {
        pid: argv
        for pid, argv in chromium_command_lines(os.getpid() if root is None else root).items()
        if process_type(argv) == "browser"
        and any(a.startswith("--remote-debugging-port=") for a in argv)
        and (mark is None or mark in argv)
    }


def port_file(argv: list[str]) -> Path | None:
    """The file in which the browser started with `argv` names its DevTools port (once it listens)."""
    profile = _profile(argv)
    return None if profile is None else profile / PORT_FILE


def _profile(argv: list[str]) -> Path | None:
    found = next((a.split("=", 1)[1] for a in argv if a.startswith("--user-data-dir=")), None)
    return None if found is None else Path(found)


def _endpoint(argv: list[str]) -> str | None:
    profile = _profile(argv)
    return None if profile is None else devtools_endpoint(profile)


def devtools_endpoints(root: int | None = None, mark: str | None = None) -> list[str]:
    """Websocket URLs of the browsers below `root` (this process) that listen on a DevTools port
    (only the one launched with `mark`, when given)."""
    found = (_endpoint(argv) for argv in devtools_browsers(root, mark).values())
    return [e for e in found if e is not None]


class CDPError(DeviceError):
    """Chromium answered a command with an error, or the page threw."""


@dataclass(eq=False)
class DevToolsConnection:
    """One websocket to a browser's DevTools endpoint; commands of every attached page share it."""

    url: str
    _ws: Any = None
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _pending: dict[int, tuple[asyncio.Future[Any], str | None]] = field(default_factory=dict)
    # session id -> why it ended, the latest `GONE_KEPT` (a host that opens and closes pages for days
    # would otherwise keep every one; Chromium itself refuses a forgotten session's commands)
    _gone: OrderedDict[str, str] = field(default_factory=OrderedDict)
    _reader: asyncio.Task[None] | None = None
    _targets: dict[str, str] = field(default_factory=dict)  # page URL -> target id, from a listing
    _listing: asyncio.Future[None] | None = None
    _watchers: dict[str, list[Callable[[str], None]]] = field(default_factory=dict)  # session -> on end
    _contexts: list[str] = field(default_factory=list)  # browser contexts of direct pages
    _context_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _opened: itertools.count[int] = field(default_factory=itertools.count)
    closed: str | None = None

    async def connect(self) -> DevToolsConnection:
        from websockets.asyncio.client import connect

        # no compression (Chromium offers none), no size limit (captures), no pings: a loaded
        # machine's late pong must not close a healthy connection
        self._ws = await connect(self.url, max_size=None, compression=None, ping_interval=None)
        self._reader = asyncio.ensure_future(self._read())
        return self

    async def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> Any:
        if self.closed is not None:
            raise DeviceLost(f"the DevTools connection is closed ({self.closed})")
        if session is not None and session in self._gone:
            raise DeviceLost(
                f"the page is gone ({self._gone[session]})", hint="the environment must be recreated"
            )
        ident = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[ident] = (future, session)
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        try:
            try:
                await self._ws.send(json.dumps(message))
            except Exception as exc:  # the socket closed under the send: the browser is going
                self.closed = self.closed or f"{type(exc).__name__}: {exc}"
                raise DeviceLost(f"the DevTools connection closed ({self.closed})") from None
            return await future
        finally:
            self._pending.pop(ident, None)

    async def _read(self) -> None:
        why = "closed"
        try:
            async for raw in self._ws:
                self._dispatch(json.loads(raw))
        except Exception as exc:  # the reader must settle every waiter whatever ended it
            why = f"{type(exc).__name__}: {exc}"
        self.closed = why
        for future, _ in list(self._pending.values()):
            if not future.done():
                future.set_exception(DeviceLost(f"the DevTools connection closed ({why})"))

    def _dispatch(self, message: dict[str, Any]) -> None:
        ident = message.get("id")
        if ident is None:
            method = message.get("method")
            if method == "Target.detachedFromTarget":
                self._end(message["params"].get("sessionId"), "detached")
            elif method == "Inspector.targetCrashed":
                self._end(message.get("sessionId"), "crashed")
            return
        entry = self._pending.get(ident)
        if entry is None or entry[0].done():
            return
        future = entry[0]
        if "error" in message:
            error = message["error"]
            text = str(error.get("message", error))
            lost = any(m in text.lower() for m in ("not found", "closed", "detached", "crash"))
            future.set_exception((DeviceLost if lost else CDPError)(f"DevTools: {text}"))
        else:
            future.set_result(message.get("result", {}))

    def _end(self, session: str | None, why: str) -> None:
        if session is None:
            return
        self._gone[session] = why
        while len(self._gone) > GONE_KEPT:
            self._gone.popitem(last=False)
        for future, owner in list(self._pending.values()):
            if owner == session and not future.done():
                future.set_exception(DeviceLost(f"the page is gone ({why})"))
        for callback in self._watchers.pop(session, []):
            callback(why)

    def watch(self, session: str, callback: Callable[[str], None]) -> None:
        """Call `callback(why)` once the page of `session` crashes or its target goes."""
        if session in self._gone:
            callback(self._gone[session])
        else:
            self._watchers.setdefault(session, []).append(callback)

    async def page_context(self, count: int) -> str:
        """One of `count` browser contexts for direct pages, in turn (created on first use): pages
        of a context share its renderer, as a `BrowserPool`'s shared contexts do."""
        async with self._context_lock:
            if len(self._contexts) < count:
                created = await self.send("Target.createBrowserContext")
                self._contexts.append(str(created["browserContextId"]))
        return self._contexts[next(self._opened) % len(self._contexts)]

    async def attach(self, target_id: str, pool: BrowserPool | None = None) -> PageSession:
        result = await self.send("Target.attachToTarget", {"targetId": target_id, "flatten": True})
        return PageSession(self, str(result["sessionId"]), pool)

    async def target_of(self, url: str) -> str | None:
        """The id of the page target showing `url` (pages of RL environments have unique URLs).
        Pages attaching together (a batched first reset) share one listing of the targets."""
        if url not in self._targets:
            if self._listing is None or self._listing.done():
                self._listing = asyncio.ensure_future(self._list_targets())
            await asyncio.shield(self._listing)
            if url not in self._targets:  # opened after that listing began
                await self._list_targets()
        return self._targets.pop(url, None)

    async def _list_targets(self) -> None:
        targets = await self.send("Target.getTargets", {"filter": [{"type": "page"}]})
        self._targets = {str(t.get("url")): str(t["targetId"]) for t in targets["targetInfos"]}

    async def close(self) -> None:
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()
        if self._reader is not None:
            with contextlib.suppress(BaseException):
                await self._reader


@dataclass(eq=False)
class PageSession:
    """A page's session on a `DevToolsConnection`: `send` as Playwright's CDPSession has it, and
    `evaluate` of a function with one JSON argument, as `Page.evaluate` has it."""

    connection: DevToolsConnection
    session_id: str
    pool: BrowserPool | None = None

    @property
    def gone(self) -> str | None:
        """Why the page can no longer be driven (crashed, closed, its browser gone), or None."""
        return self.connection._gone.get(self.session_id) or self.connection.closed

    async def send(self, method: str, params: dict[str, Any] | None = None) -> Any:
        try:
            return await self.connection.send(method, params, self.session_id)
        except DeviceLost:
            if self.connection.closed is not None and self.pool is not None:
                await _until_pool_sees_it(self.pool)
            raise

    async def evaluate(self, function: str, arg: Any = None) -> Any:
        # The argument travels as a JSON literal inside the expression; evaluated in the page's main
        # world, as Playwright's evaluate is, and a promise is awaited.
        result = await self.send(
            "Runtime.evaluate",
            {
                "expression": f"({function})({json.dumps(arg)})",
                "returnByValue": True,
                "awaitPromise": True,
            },
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text", "error")
            raise CDPError(f"the page threw: {str(text).splitlines()[0]}")
        return result["result"].get("value")


@dataclass(eq=False)
class _Link:
    generation: int
    connection: asyncio.Future[DevToolsConnection | None]


_links: weakref.WeakKeyDictionary[BrowserPool, _Link] = weakref.WeakKeyDictionary()


async def page_session(pool: BrowserPool, url: str) -> PageSession | None:
    """A direct session to the page of `pool`'s browser showing `url`, or None (no DevTools port,
    the page not found, the direct path off): the caller then keeps Playwright's path."""
    if not ENABLED:
        return None
    connection = await _connection(pool, url)
    if connection is None:
        return None
    target = await connection.target_of(url)
    if target is None:
        return None
    return await connection.attach(target, pool)


async def _until_pool_sees_it(pool: BrowserPool) -> None:
    """The websocket closes only with the browser, and usually before Playwright notices: the host
    replaces a browser only once its pool reports it gone, so the error waits (briefly) for that."""
    deadline = asyncio.get_running_loop().time() + LOST_BROWSER_WAIT_S
    while pool.running and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)


async def connection_of(pool: BrowserPool) -> DevToolsConnection | None:
    """The direct connection to `pool`'s browser, when it was launched with `devtools_args` and the
    direct path is on."""
    if not ENABLED or pool_mark(pool) is None:
        return None
    return await _connection(pool, "")


async def _connection(pool: BrowserPool, url: str) -> DevToolsConnection | None:
    link = _links.get(pool)
    if link is not None and link.generation == pool.generation:
        try:
            found = await asyncio.shield(link.connection)
        except Exception as exc:  # never left to the page: it keeps Playwright's path
            log.debug("no DevTools connection: %s", exc)
            return None
        if found is None or found.closed is None:
            return found
    old = link.connection if link is not None else None
    mark = pool_mark(pool)
    link = _Link(
        pool.generation, asyncio.ensure_future(_find(url) if mark is None else _find_marked(pool, mark))
    )
    _links[pool] = link
    if old is not None and old.done() and not old.cancelled() and old.exception() is None:
        stale = old.result()
        if stale is not None:
            asyncio.ensure_future(stale.close())
    return await asyncio.shield(link.connection)


async def _find_marked(pool: BrowserPool, mark: str) -> DevToolsConnection | None:
    own = await pool.devtools_url()  # a browser the pool started itself says where it listens
    for endpoint in [own] if own is not None else await _marked_endpoints(mark):
        try:
            return await DevToolsConnection(endpoint).connect()
        except Exception as exc:  # the browser going away: its pages keep Playwright's path
            log.debug("DevTools endpoint %s: %s", endpoint, exc)
    log.info("no DevTools port for the browser marked %s", mark)
    return None


async def _marked_endpoints(mark: str) -> list[str]:
    """The endpoints of the browser marked `mark`, waiting while it runs without one: Chromium
    writes the file naming its port a moment after it starts, and on a loaded machine Playwright
    can hand the browser over (and a first page ask for its connection) before that. What is found
    first is kept for the browser's life."""
    deadline = asyncio.get_running_loop().time() + PORT_FILE_WAIT_S
    while True:
        browsers = await asyncio.to_thread(devtools_browsers, None, mark)
        found = [e for e in map(_endpoint, browsers.values()) if e is not None]
        if found or not browsers or asyncio.get_running_loop().time() >= deadline:
            return found
        await asyncio.sleep(0.05)


async def _find(url: str) -> DevToolsConnection | None:
    """The connection to whichever browser of this process shows `url` (a host may run one per scale)."""
    for endpoint in await asyncio.to_thread(devtools_endpoints):
        connection = DevToolsConnection(endpoint)
        try:
            await connection.connect()
            await connection._list_targets()
        except Exception as exc:  # a browser going away, a refused handshake: try the next one
            log.debug("DevTools endpoint %s: %s", endpoint, exc)
            await connection.close()
            continue
        if url in connection._targets:
            return connection
        await connection.close()
    log.info("no DevTools port shows %s; its page stays on Playwright's path", url)
    return None
