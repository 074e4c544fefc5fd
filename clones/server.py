"""The clone server: one Starlette app hosting many in-memory sessions of every clone.

A session is ``{id, clone, state, version, drift, baseline}``; the server owns the state, renders
screens from it, applies UI events posted by the page runtime (clones/static/runtime.js), and
offers state get/put, diff, snapshot and restore so a reset never restarts a browser.

JSON API (all under /api):
  POST   /api/sessions                     {clone, setup?, params?, state?, drift?} -> {session, version}
  GET    /api/sessions/{sid}/state         -> the state document
  PUT    /api/sessions/{sid}/state         full state -> {version}
  GET    /api/sessions/{sid}/diff?snapshot=ID   -> {changes}  (against the baseline without ID)
  POST   /api/sessions/{sid}/snapshot      -> {snapshot}
  POST   /api/sessions/{sid}/restore       {snapshot} | {state} | {setup, params} -> {version, route, html}
  POST   /api/sessions/{sid}/event         {ev, arg, form, long_press} -> {version, route, html}
  WS     /api/sessions/{sid}/events        the same event and answer as text messages, one at a time
                                           (an error answer is {error, status, hint}); what the page
                                           runtime uses once the socket is open, the POST otherwise
  DELETE /api/sessions/{sid}
  GET    /api/clones, GET /healthz
Pages: GET /s/{sid} (the whole page; ``?screen=none``: without the screen), GET /s/{sid}/screen ->
{version, route, html}; GET / lists the clones with a button each that POSTs /new/{clone}
(``?drift=&seed=``) to open a fresh session (a state change is never a GET: an ``<img src>`` on any
page must not create sessions).

What the page shell adds around a clone's `render(state)`: the shared stylesheet
(clones/static/base.css) plus the clone's optional `stylesheet` text, a status bar with the virtual
clock (system UI: not in the hierarchy dump), a generic dialog for ``ui.dialog = {title, message,
buttons: [{label, ev, arg}]}`` (any other ``ui.dialog`` value is the clone's to draw), a toast for
``ui.toast`` unless the clone's screen already shows that text, and the drift overlays. A handler
that raises CloneError leaves the state as it was and shows its message as the toast.

Security and limits (realbench.http_guard): loopback by default, a token from an environment
variable for any other address, a Host allow-list and Origin check, JSON bodies only, a body-size
cap (413; a socket message over it closes the socket with 1009), JSON nesting cap (400), a session
cap (429) and idle expiry; a state whose ``ui.route``
is not one of the clone's routes is refused (400). Connections: header and body read deadlines and
per-client and total connection caps (`realbench.http_guard.server_config`).
"""

from __future__ import annotations

import asyncio
import errno
import functools
import html
import logging
import secrets
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket, WebSocketDisconnect

from clones.base import Clone, State, UIEvent, clone_names, diff, get_clone
from clones.drift import DRIFT_EVENT, Drift, DriftScreen, relabel_html, resolve_drift, shift_html
from clones.flow_interruptions import flow_interruptions_of
from clones.interruptions import interruptions_of
from clones.screen import screen_html
from clones.state_copy import copy_tree
from realbench.errors import CloneError, ConfigError, RealbenchError, ServerError
from realbench.http_guard import (
    IN_PROCESS_SECURITY,
    BodyError,
    GuardMiddleware,
    LimitExceeded,
    ServerLimits,
    ServerSecurity,
    parse_json_body,
    security_for,
    server_config,
)
from realbench.taskpack import CloneSetup

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).parent / "static"
# close codes of the event socket: 1009 is the standard "message too big"; 4404 (the application
# range) says the session does not exist, so the page falls back to HTTP and gets the 404's text
WS_MESSAGE_TOO_BIG = 1009
WS_UNKNOWN_SESSION = 4404
MAX_SNAPSHOTS = 4096
STATE_KEYS = ("world", "user", "ui", "clock")


@functools.cache
def _asset(name: str) -> str:
    return (STATIC_DIR / name).read_text(encoding="utf-8")


# --- request bodies --------------------------------------------------------------------------


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateSession(_Body):
    clone: str = Field(min_length=1)
    setup: CloneSetup | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    state: dict[str, Any] | None = None
    drift: Drift | str | dict[str, Any] | None = None


class EventBody(_Body):
    ev: str = Field(min_length=1, max_length=200)
    arg: str | None = None
    form: dict[str, str] = Field(default_factory=dict)
    long_press: bool = False

    @field_validator("arg", mode="before")
    @classmethod
    def _arg_as_text(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v

    @field_validator("form", mode="before")
    @classmethod
    def _form_as_text(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {
                k: str(x) if isinstance(x, int | float) and not isinstance(x, bool) else x
                for k, x in v.items()
            }
        return v


class RestoreBody(_Body):
    snapshot: str | None = None
    state: dict[str, Any] | None = None
    setup: CloneSetup | None = None
    params: dict[str, Any] = Field(default_factory=dict)


# --- sessions ----------------------------------------------------------------------------------


class ApiError(Exception):
    """An HTTP error answer with a message and a hint (never a traceback)."""

    def __init__(self, status: int, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.hint = hint


def check_state_shape(state: Any, clone: Clone | None = None) -> State:
    if not isinstance(state, dict) or any(k not in state for k in STATE_KEYS):
        raise ApiError(400, f"a clone state is a JSON object with keys {list(STATE_KEYS)}")
    ui = state["ui"]
    if (
        not isinstance(ui, dict)
        or not isinstance(ui.get("route"), str)
        or not isinstance(ui.get("form", {}), dict)
    ):
        raise ApiError(400, "state.ui must hold a string 'route' and a 'form' object")
    routes = clone.routes() if clone is not None else []
    if routes and ui["route"] not in routes:
        raise ApiError(
            400,
            f"state.ui.route {ui['route'][:80]!r} is not a route of clone {clone.name!r}",  # type: ignore[union-attr]
            f"known routes: {', '.join(routes)}",
        )
    ui.setdefault("stack", [])
    ui.setdefault("form", {})
    ui.setdefault("toast", None)
    ui.setdefault("dialog", None)
    ui.setdefault("args", {})
    return state


def working_copy(state: State) -> State:
    """A copy a handler may mutate. The world is read-only by contract, so copies (working states,
    snapshots, baselines) share it instead of copying it."""
    return {k: (v if k == "world" else copy_tree(v)) for k, v in state.items()}


@dataclass
class Snapshot:
    clone: str
    state: State


@dataclass
class Session:
    id: str
    clone: Clone
    state: State
    drift: Drift | None = None
    version: int = 1
    baseline: State = field(default_factory=dict)
    overlays: DriftScreen | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    created: float = field(default_factory=time.time)
    last_used: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        if self.drift is not None and not self.drift.is_none:
            self.overlays = DriftScreen(
                self.drift,
                catalogue=interruptions_of(self.clone.name),
                flow_catalogue=flow_interruptions_of(self.clone.name),
            )
        self.reset_to(self.state)

    def reset_to(self, state: State) -> None:
        """Start over from `state` as an app launch would: new baseline, overlays re-armed."""
        self.state = state
        self.baseline = working_copy(state)
        if self.overlays is not None:
            self.overlays.arm()
        self.version += 1

    def apply(self, event: UIEvent) -> None:
        """Apply one UI event. A refusal (CloneError) leaves the state as it was, plus a toast."""
        overlay_open = self.overlays is not None and self.overlays.active is not None
        if overlay_open and event.name in (DRIFT_EVENT, "__back__"):
            assert self.overlays is not None
            self.overlays.dismiss(event.arg if event.name == DRIFT_EVENT else None)
            self.state["ui"]["form"].update(event.form)
            self.version += 1
            return
        if event.name == DRIFT_EVENT:
            self.version += 1  # an overlay that already closed (e.g. the ad timed out)
            return
        if self.overlays is not None and self.overlays.intercepts(event.name):
            # a drift error dialog answers the event in its place: the clone never receives it
            self.state["ui"]["form"].update(event.form)
            self.version += 1
            return
        work = working_copy(self.state)
        try:
            self.clone.handle(work, event)
        except CloneError as exc:
            self.state["ui"]["form"].update(event.form)
            self.state["ui"]["toast"] = exc.message
        else:
            self.state = work
            if self.overlays is not None:
                self.overlays.after(event.name, str(work.get("ui", {}).get("route", "")))
        self.version += 1


class SessionStore:
    """All sessions and snapshots of one server. Safe to use from several threads."""

    def __init__(
        self,
        max_snapshots: int = MAX_SNAPSHOTS,
        *,
        max_sessions: int | None = None,
        idle_timeout_s: float | None = None,
    ) -> None:
        self._sessions: dict[str, Session] = {}
        self._snapshots: OrderedDict[str, Snapshot] = OrderedDict()
        self._lock = threading.Lock()
        self.max_snapshots = max_snapshots
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self.expired = 0

    @classmethod
    def limited(cls, limits: ServerLimits) -> SessionStore:
        return cls(
            limits.max_snapshots, max_sessions=limits.max_sessions, idle_timeout_s=limits.idle_timeout_s
        )

    def expire_idle(self) -> int:
        """Drop sessions unused for longer than the idle timeout; returns how many."""
        if self.idle_timeout_s is None:
            return 0
        cutoff = time.monotonic() - self.idle_timeout_s
        with self._lock:
            stale = [sid for sid, s in self._sessions.items() if s.last_used < cutoff]
            for sid in stale:
                del self._sessions[sid]
            self.expired += len(stale)
        if stale:
            log.info("expired %d idle session(s)", len(stale))
        return len(stale)

    def __len__(self) -> int:
        return len(self._sessions)

    def build(
        self, clone: Clone, setup: CloneSetup | None, params: dict[str, Any], drift: Drift | None
    ) -> State:
        setup = setup or CloneSetup()
        if drift is not None and drift.data_seed is not None:
            setup = setup.model_copy(update={"data": {**setup.data, "data_seed": drift.data_seed}})
        return check_state_shape(clone.build_state(setup, params))

    def create(self, body: CreateSession) -> Session:
        clone = get_clone(body.clone)
        drift = resolve_drift(body.drift, clone)
        self.expire_idle()
        if self.max_sessions is not None and len(self._sessions) >= self.max_sessions:
            raise LimitExceeded(
                f"session limit reached ({self.max_sessions} sessions)",
                hint="delete sessions you no longer use (DELETE /api/sessions/ID), or raise --max-sessions",
            )
        if body.state is not None:
            state = check_state_shape(working_copy(body.state), clone)
        else:
            state = self.build(clone, body.setup, body.params, drift)
        session = Session(id=secrets.token_hex(8), clone=clone, state=state, drift=drift)
        with self._lock:
            if self.max_sessions is not None and len(self._sessions) >= self.max_sessions:
                raise LimitExceeded(f"session limit reached ({self.max_sessions} sessions)")
            self._sessions[session.id] = session
        log.debug("session %s of %s created", session.id, clone.name)
        return session

    def get(self, sid: str) -> Session:
        session = self._sessions.get(sid)
        if session is None:
            raise ApiError(
                404, f"no session {sid!r}", "create one with POST /api/sessions (idle sessions expire)"
            )
        session.last_used = time.monotonic()
        return session

    def delete(self, sid: str) -> None:
        with self._lock:
            if self._sessions.pop(sid, None) is None:
                raise ApiError(404, f"no session {sid!r}")

    def snapshot(self, session: Session) -> str:
        with session.lock:
            snap = Snapshot(session.clone.name, working_copy(session.state))
        sid = "snap-" + secrets.token_hex(8)
        with self._lock:
            self._snapshots[sid] = snap
            while len(self._snapshots) > self.max_snapshots:
                self._snapshots.popitem(last=False)
        return sid

    def snapshot_for(self, session: Session, snapshot_id: str) -> Snapshot:
        with self._lock:
            snap = self._snapshots.get(snapshot_id)
            if snap is not None:
                self._snapshots.move_to_end(snapshot_id)
        if snap is None:
            raise ApiError(
                404, f"no snapshot {snapshot_id!r}", "snapshots are kept in memory; take a new one"
            )
        if snap.clone != session.clone.name:
            raise ApiError(
                400,
                f"snapshot {snapshot_id!r} is a state of clone {snap.clone!r}, but session {session.id!r} "
                f"runs clone {session.clone.name!r}",
                "restore it into a session of the same clone",
            )
        return snap

    def restore(self, session: Session, body: RestoreBody) -> None:
        given = [x for x in (body.snapshot, body.state, body.setup) if x is not None]
        if len(given) != 1:
            raise ApiError(400, "restore takes exactly one of 'snapshot', 'state' or 'setup'")
        if body.snapshot is not None:
            state = working_copy(self.snapshot_for(session, body.snapshot).state)
        elif body.state is not None:
            state = check_state_shape(working_copy(body.state), session.clone)
        else:
            state = self.build(session.clone, body.setup, body.params, session.drift)
        with session.lock:
            session.reset_to(state)


# --- rendering -------------------------------------------------------------------------------


def _status_bar(state: State) -> str:
    clock = str(state.get("clock", ""))
    hhmm = clock[11:16] if len(clock) >= 16 else ""
    return (
        '<div class="rb-statusbar" data-rb-skip="1" aria-hidden="true">'
        f'<span class="rb-time">{html.escape(hhmm)}</span><span class="rb-sys">5G ▮▮▮ 86%</span></div>'
    )


def render_screen(session: Session) -> str:
    """The inner HTML of ``#app``: status bar, the clone's screen, dialog, toast, drift overlays."""
    state = session.state
    app_html = screen_html(session.clone, state)
    drift = session.drift
    shift = ""
    if drift is not None:
        app_html = relabel_html(app_html, drift.relabel)
        shift = shift_html(drift.layout_shift_px)
    overlay = session.overlays.overlay_html(session.clone.title) if session.overlays is not None else ""
    return f'{_status_bar(state)}<main class="rb-screen">{shift}{app_html}</main>{overlay}'


def render_page(session: Session, *, with_screen: bool = True) -> str:
    """The whole page; `with_screen=False` leaves #app empty for a client that swaps the first
    screen in itself (an RL page: every episode starts with a reset that shows its screen)."""
    clone = session.clone
    extra_css = getattr(clone, "stylesheet", "") or ""
    extra = f"<style>{extra_css}</style>" if extra_css else ""
    return (
        '<!doctype html><html lang="zh-CN"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1,maximum-scale=1,user-scalable=no">'
        f"<title>{html.escape(clone.title)}</title><style>{_asset('base.css')}</style>{extra}</head>"
        f'<body data-session="{session.id}" data-version="{session.version}" '
        f'data-route="{html.escape(str(session.state["ui"]["route"]))}" data-package="{html.escape(clone.package)}">'
        f'<div id="app">{render_screen(session) if with_screen else ""}</div>'
        f"<script>{_asset('runtime.js')}</script></body></html>"
    )


def _screen_payload(session: Session) -> dict[str, Any]:
    return {"version": session.version, "route": session.state["ui"]["route"], "html": render_screen(session)}


# --- the app ---------------------------------------------------------------------------------

Endpoint = Callable[[Request], Awaitable[Response]]


def _problem(status: int, message: str, hint: str | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "hint": hint}, status_code=status)


def _problem_of(exc: Exception) -> tuple[int, str, str | None] | None:
    """The client's error answer (status, message, hint) for an exception, or None when it is the
    server's own fault (to be logged as a 500)."""
    if isinstance(exc, ApiError):
        return exc.status, exc.message, exc.hint
    if isinstance(exc, BodyError | LimitExceeded):
        return exc.http_status, exc.message, exc.hint
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(body)"
        return 400, f"invalid request body: field {where!r}: {first['msg']}", None
    if isinstance(exc, RealbenchError):
        return 400, exc.message, exc.hint
    return None


def _endpoint(fn: Endpoint) -> Endpoint:
    """Turns ApiError/RealbenchError into clear 4xx answers and anything else into a logged 500."""

    @functools.wraps(fn)
    async def wrapper(request: Request) -> Response:
        try:
            return await fn(request)
        except Exception as exc:
            problem = _problem_of(exc)
            if problem is None:
                log.exception("clone server error on %s %s", request.method, request.url.path)
                return _problem(500, "internal error in the clone server (traceback logged)")
            return _problem(*problem)

    return wrapper


async def _json(request: Request) -> Any:
    limits: ServerLimits = request.app.state.limits
    return parse_json_body(await request.body(), limits.max_json_depth)


def create_app(
    store: SessionStore | None = None,
    *,
    security: ServerSecurity | None = None,
    limits: ServerLimits | None = None,
) -> Starlette:
    limits = limits or ServerLimits()
    store = store if store is not None else SessionStore.limited(limits)

    @_endpoint
    async def create_session(request: Request) -> Response:
        body = CreateSession.model_validate(await _json(request))
        session = store.create(body)
        return JSONResponse({"session": session.id, "version": session.version})

    @_endpoint
    async def get_state(request: Request) -> Response:
        session = store.get(request.path_params["sid"])
        with session.lock:
            return JSONResponse(session.state, headers={"x-version": str(session.version)})

    @_endpoint
    async def put_state(request: Request) -> Response:
        session = store.get(request.path_params["sid"])
        state = check_state_shape(await _json(request), session.clone)
        with session.lock:
            session.state = state
            session.version += 1
            return JSONResponse({"version": session.version})

    @_endpoint
    async def get_diff(request: Request) -> Response:
        session = store.get(request.path_params["sid"])
        snap_id = request.query_params.get("snapshot")
        before = store.snapshot_for(session, snap_id).state if snap_id else session.baseline
        with session.lock:
            return JSONResponse({"changes": diff(before, session.state)})

    @_endpoint
    async def take_snapshot(request: Request) -> Response:
        session = store.get(request.path_params["sid"])
        return JSONResponse({"snapshot": store.snapshot(session)})

    @_endpoint
    async def restore(request: Request) -> Response:
        session = store.get(request.path_params["sid"])
        store.restore(session, RestoreBody.model_validate(await _json(request)))
        with session.lock:
            return JSONResponse(_screen_payload(session))

    async def apply_event(sid: str, raw: Any) -> dict[str, Any]:
        session = store.get(sid)
        if not isinstance(raw, dict):
            raise ApiError(400, "an event is a JSON object {ev, arg, form, long_press}")
        body = EventBody.model_validate(raw)
        if session.drift is not None and session.drift.latency_ms:
            await asyncio.sleep(session.drift.latency_ms / 1000)
        event = UIEvent(name=body.ev, arg=body.arg, form=dict(body.form), long_press=body.long_press)
        with session.lock:
            session.apply(event)
            return _screen_payload(session)

    @_endpoint
    async def post_event(request: Request) -> Response:
        return JSONResponse(await apply_event(request.path_params["sid"], await _json(request)))

    async def event_socket(websocket: WebSocket) -> None:
        # The page's event channel: an HTTP request per tap waits behind Chromium's frame work on a
        # busy machine (≈ 10 ms more per step than a message on an open socket, docs/benchmarks.md).
        # The guard (Host, Origin, token) has already checked the handshake.
        sid = websocket.path_params["sid"]
        try:
            await _event_loop(websocket, sid)
        except (WebSocketDisconnect, OSError, RuntimeError):
            # the page went away mid-answer (closed, navigated, its browser stopped by Ctrl-C):
            # nothing to answer, and no traceback for an ordinary goodbye
            log.debug("event socket of session %s closed by the page", sid)

    async def _event_loop(websocket: WebSocket, sid: str) -> None:
        await websocket.accept()
        try:
            store.get(sid)
        except ApiError:
            await websocket.close(code=WS_UNKNOWN_SESSION)
            return
        while True:
            try:
                text = await websocket.receive_text()
            except WebSocketDisconnect:
                return
            raw = text.encode()
            if len(raw) > limits.max_body_bytes:
                await websocket.close(code=WS_MESSAGE_TOO_BIG)
                return
            try:
                answer = await apply_event(sid, parse_json_body(raw, limits.max_json_depth))
            except Exception as exc:
                problem = _problem_of(exc)
                if problem is None:
                    log.exception("clone server error on the event socket of session %s", sid)
                    problem = (500, "internal error in the clone server (traceback logged)", None)
                status, message, hint = problem
                answer = {"error": message, "status": status, "hint": hint}
            await websocket.send_json(answer)

    @_endpoint
    async def delete_session(request: Request) -> Response:
        store.delete(request.path_params["sid"])
        return JSONResponse({"deleted": request.path_params["sid"]})

    @_endpoint
    async def list_clones(request: Request) -> Response:
        out = []
        for name in clone_names():
            clone = get_clone(name)
            out.append(
                {"name": name, "package": clone.package, "title": clone.title, "routes": clone.routes()}
            )
        return JSONResponse({"clones": out})

    @_endpoint
    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True, "sessions": len(store)})

    async def page(request: Request) -> Response:
        try:
            session = store.get(request.path_params["sid"])
            with_screen = request.query_params.get("screen") != "none"
            with session.lock:
                return HTMLResponse(render_page(session, with_screen=with_screen))
        except ApiError as exc:
            return HTMLResponse(f"<h1>{html.escape(exc.message)}</h1>", status_code=exc.status)
        except Exception:
            log.exception("clone server error rendering page %s", request.url.path)
            return HTMLResponse("<h1>internal error (traceback logged)</h1>", status_code=500)

    @_endpoint
    async def screen(request: Request) -> Response:
        session = store.get(request.path_params["sid"])
        with session.lock:
            return JSONResponse(_screen_payload(session))

    def _new_button(name: str, query: str, label: str) -> str:
        # a form with no named fields posts an empty body (the guard only takes JSON bodies)
        action = html.escape(f"/new/{name}{query}")
        return (
            f'<form method="post" action="{action}" style="display:inline">'
            f'<button type="submit">{html.escape(label)}</button></form>'
        )

    async def index(request: Request) -> Response:
        links = "".join(
            f"<li>{html.escape(get_clone(n).title)} ({html.escape(n)}) "
            + " · ".join(
                _new_button(n, q, label)
                for q, label in (("", "open"), ("?drift=mild", "mild drift"), ("?drift=heavy", "heavy drift"))
            )
            + "</li>"
            for n in clone_names()
        )
        return HTMLResponse(f"<!doctype html><meta charset='utf-8'><h1>realbench clones</h1><ul>{links}</ul>")

    @_endpoint
    async def new_page(request: Request) -> Response:
        """Open a fresh session of a clone in a browser (for people; agents use the JSON API). A
        POST: the guard's Origin check keeps other sites' pages from creating sessions."""
        drift = request.query_params.get("drift")
        try:
            seed = int(request.query_params.get("seed", 0))
        except ValueError:
            raise ApiError(400, "seed must be an integer") from None
        body = CreateSession(
            clone=request.path_params["clone"],
            setup=CloneSetup(seed=seed),
            drift={"profile": drift, "seed": seed} if drift else None,
        )
        session = store.create(body)
        return RedirectResponse(f"/s/{session.id}", status_code=303)

    routes = [
        Route("/", index),
        Route("/new/{clone}", new_page, methods=["POST"]),
        Route("/healthz", healthz),
        Route("/api/clones", list_clones),
        Route("/api/sessions", create_session, methods=["POST"]),
        Route("/api/sessions/{sid}", delete_session, methods=["DELETE"]),
        Route("/api/sessions/{sid}/state", get_state, methods=["GET"]),
        Route("/api/sessions/{sid}/state", put_state, methods=["PUT"]),
        Route("/api/sessions/{sid}/diff", get_diff),
        Route("/api/sessions/{sid}/snapshot", take_snapshot, methods=["POST"]),
        Route("/api/sessions/{sid}/restore", restore, methods=["POST"]),
        Route("/api/sessions/{sid}/event", post_event, methods=["POST"]),
        WebSocketRoute("/api/sessions/{sid}/events", event_socket),
        Route("/s/{sid}", page),
        Route("/s/{sid}/screen", screen),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    guard = Middleware(GuardMiddleware, security=security or IN_PROCESS_SECURITY, limits=limits)
    app = Starlette(routes=routes, middleware=[guard])
    app.state.store = store
    app.state.limits = limits
    return app


# --- running it ------------------------------------------------------------------------------


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0 picks a free one); a taken port is a ServerError."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port {port} is not a port number", hint="use 1-65535, or 0 for a free one")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio turns Nagle off (TCP_NODELAY) only on sockets whose proto says
    # TCP, and with Nagle on every request waited ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ServerError(
                f"cannot start the clone server: {host}:{port} is already in use",
                hint=f"pass another --port, or stop the process listening there (`ss -ltnp | grep :{port}`)",
            ) from None
        raise ServerError(
            f"cannot start the clone server on {host}:{port}: {exc.strerror}", hint="check --host"
        ) from None
    sock.set_inheritable(True)
    return sock


def _uvicorn_config(app: Starlette, log_level: str, limits: ServerLimits) -> uvicorn.Config:
    return server_config(
        app,
        limits,
        log_level=log_level,
        lifespan="off",
        # pages keep their connection between taps; an idle one costs no more than a socket
        timeout_keep_alive=120,
        ws="websockets-sansio",
        # frames over the body limit are refused by the protocol layer before they are buffered whole
        ws_max_size=limits.max_body_bytes,
    )


def serve(
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    log_level: str = "info",
    announce: Callable[[str], None] | None = None,
    limits: ServerLimits | None = None,
    token_env: str | None = None,
    allow_hosts: tuple[str, ...] = (),
) -> None:
    """Run the clone server in the foreground until interrupted (`realbench serve`).
    `announce` receives the URL once the port is bound. A non-loopback `host` needs a token in the
    environment variable `token_env` (see realbench.http_guard)."""
    from realbench.http_guard import DEFAULT_TOKEN_ENV

    security = security_for(host, token_env=token_env or DEFAULT_TOKEN_ENV, allow_hosts=allow_hosts)
    sock = bind_socket(host, port)
    url = f"http://{host}:{sock.getsockname()[1]}"
    log.info("clone server listening on %s (clones: %s)", url, ", ".join(clone_names()) or "none")
    if announce is not None:
        announce(url)
    limits = limits or ServerLimits()
    app = create_app(security=security, limits=limits)
    uvicorn.Server(_uvicorn_config(app, log_level, limits)).run(sockets=[sock])


class CloneServer:
    """The clone server on a free port in a background thread, for in-process use.

    ``with CloneServer() as server: ... server.url ... server.store`` — stopped cleanly on exit.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        store: SessionStore | None = None,
        log_level: str = "warning",
        limits: ServerLimits | None = None,
        security: ServerSecurity | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.limits = limits or ServerLimits()
        if store is None:
            # in-process servers (tests, RL hosts, clone targets) own their sessions' lifetimes:
            # caps and idle expiry only when asked for
            store = SessionStore.limited(limits) if limits is not None else SessionStore()
        self.store = store
        self.log_level = log_level
        self.security = security if security is not None else security_for(host)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise ServerError(
                "the clone server is not running", hint="call start() or use it as a context manager"
            )
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 15.0) -> CloneServer:
        if self._server is not None:
            return self
        sock = bind_socket(self.host, self.port)
        self.port = sock.getsockname()[1]
        app = create_app(self.store, security=self.security, limits=self.limits)
        server = uvicorn.Server(_uvicorn_config(app, self.log_level, self.limits))
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name=f"clone-server-{self.port}", daemon=True
        )
        thread.start()
        deadline = time.monotonic() + timeout_s
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                sock.close()
                raise ServerError("the clone server did not start", hint="run with -v to see uvicorn's log")
            time.sleep(0.01)
        self._server, self._thread, self._sock = server, thread, sock
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None or thread is None:
            return
        server.should_exit = True
        thread.join(timeout_s)
        self._sock.close()
        if thread.is_alive():
            log.warning("clone server thread did not stop within %.0f s", timeout_s)

    def __enter__(self) -> CloneServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
