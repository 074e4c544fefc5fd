"""The page's event socket (WS /api/sessions/{sid}/events) against a real uvicorn server, with a real
WebSocket client: what it answers, what the guard refuses at the handshake (other sites, other
hosts, missing or wrong tokens, tokens in the query), oversized and malformed messages; then a clone
page that taps over the socket, falls back to HTTP while the server is away and opens a new socket
when it is back. Evidence: the server's session store and the page's own network record."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from clones.server import WS_MESSAGE_TOO_BIG, WS_UNKNOWN_SESSION, CloneServer
from realbench.http_guard import ServerLimits

TOGGLE = {"ev": "toggle_student", "arg": None, "form": {}, "long_press": False}
LIMITS = ServerLimits(max_body_bytes=64 * 1024)


@pytest.fixture(scope="module")
def server() -> Iterator[CloneServer]:
    with CloneServer(limits=LIMITS) as s:
        yield s


def _session(url: str, headers: dict[str, str] | None = None) -> str:
    with httpx.Client(base_url=url, headers=headers or {}) as c:
        return str(c.post("/api/sessions", json={"clone": "train_ticketing"}).json()["session"])


def _socket(url: str, sid: str, **headers: str) -> ClientConnection:
    """A WebSocket to the session's event socket; `host` names another host in the handshake
    while the connection still goes to the server (a name that resolves here: DNS rebinding)."""
    host = headers.pop("host", None)
    origin = headers.pop("origin", url)
    addr = urlsplit(url)
    ws_url = f"ws://{host or addr.netloc}/api/sessions/{sid}/events"
    sock = socket.create_connection((addr.hostname, addr.port), timeout=10) if host else None
    return connect(ws_url, sock=sock, origin=origin, additional_headers=headers, open_timeout=10)


def _student(server: CloneServer, sid: str) -> bool:
    return bool(server.store.get(sid).state["ui"]["search"]["student"])


def _ask(ws: ClientConnection, message: Any) -> dict[str, Any]:
    ws.send(message if isinstance(message, str) else json.dumps(message))
    return dict(json.loads(ws.recv(timeout=10)))


def test_an_event_on_the_socket_is_answered_like_the_post(server: CloneServer) -> None:
    by_socket, by_post = _session(server.url), _session(server.url)
    with _socket(server.url, by_socket) as ws:
        first = _ask(ws, TOGGLE)
        second = _ask(ws, TOGGLE)
    with httpx.Client(base_url=server.url) as c:
        posted = c.post(f"/api/sessions/{by_post}/event", json=TOGGLE).json()
    assert first["html"] == posted["html"] and first["route"] == posted["route"] == "home"
    assert second["version"] == first["version"] + 1
    assert _student(server, by_socket) is False and _student(server, by_post) is True


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "http://evil.example"},  # another site's page (cross-site WebSocket hijacking)
        {"origin": "null"},  # a sandboxed frame or a file:// page
        {
            "host": "evil.example:80",
            "origin": "http://evil.example",
        },  # DNS rebinding: a name that resolves here
    ],
    ids=["other-origin", "null-origin", "other-host"],
)
def test_the_guard_refuses_handshakes_from_elsewhere(server: CloneServer, headers: dict[str, str]) -> None:
    sid = _session(server.url)
    with pytest.raises(InvalidStatus) as refused:
        _socket(server.url, sid, **headers)
    assert refused.value.response.status_code == 403
    assert _student(server, sid) is False


def test_a_token_guarded_server_needs_the_token_in_the_header_or_the_cookie(monkeypatch) -> None:
    token = "s3cret-token"
    monkeypatch.setenv("REALBENCH_SERVER_TOKEN", token)
    from realbench.http_guard import security_for

    with CloneServer(limits=LIMITS, security=security_for("127.0.0.1")) as guarded:
        sid = _session(guarded.url, {"authorization": f"Bearer {token}"})
        for wrong in ({}, {"authorization": "Bearer nope"}, {"cookie": "rb_token=nope"}):
            with pytest.raises(InvalidStatus) as refused:
                _socket(guarded.url, sid, **wrong)
            assert refused.value.response.status_code == 403
        query_url = guarded.url.replace("http://", "ws://") + f"/api/sessions/{sid}/events?token={token}"
        with pytest.raises(InvalidStatus):
            connect(query_url, origin=guarded.url, open_timeout=10)
        assert _student(guarded, sid) is False, "no refused handshake reached the session"
        with _socket(guarded.url, sid, authorization=f"Bearer {token}") as ws:
            _ask(ws, TOGGLE)
        with _socket(guarded.url, sid, cookie=f"rb_token={token}") as ws:
            _ask(ws, TOGGLE)
            _ask(ws, TOGGLE)
        assert _student(guarded, sid) is True, "three accepted events, three toggles"


def test_bad_messages_get_an_error_answer_and_the_socket_stays_usable(server: CloneServer) -> None:
    sid = _session(server.url)
    with _socket(server.url, sid) as ws:
        not_json = _ask(ws, "{nope")
        deep = _ask(ws, "[" * 5000 + "]" * 5000)
        not_object = _ask(ws, [1, 2])
        no_event = _ask(ws, {"arg": "x"})
        for answer in (not_json, deep, not_object, no_event):
            assert answer["status"] == 400 and answer["error"] and "html" not in answer
        assert "nests deeper" in deep["error"] and "ev" in no_event["error"]
        assert _student(server, sid) is False
        assert "html" in _ask(ws, TOGGLE)
    assert _student(server, sid) is True


def test_a_message_over_the_body_limit_closes_the_socket(server: CloneServer) -> None:
    sid = _session(server.url)
    version = server.store.get(sid).version
    with _socket(server.url, sid) as ws:
        ws.send(json.dumps({**TOGGLE, "arg": "x" * (LIMITS.max_body_bytes + 1)}))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == WS_MESSAGE_TOO_BIG
    assert server.store.get(sid).version == version
    assert httpx.get(server.url + "/healthz").status_code == 200


def test_unknown_and_deleted_sessions(server: CloneServer) -> None:
    with _socket(server.url, "no-such-session") as ws, pytest.raises(ConnectionClosed) as closed:
        ws.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == WS_UNKNOWN_SESSION
    sid = _session(server.url)
    with _socket(server.url, sid) as ws:
        httpx.delete(f"{server.url}/api/sessions/{sid}")
        gone = _ask(ws, TOGGLE)
    assert gone["status"] == 404 and "no session" in gone["error"]


# --- a clone page ----------------------------------------------------------------------------

EVENT_FETCHES = "() => performance.getEntriesByType('resource').filter(e => e.name.endsWith('/event')).length"


@pytest.mark.browser
def test_a_page_taps_over_the_socket_falls_back_to_http_and_reopens_it() -> None:
    from clones.base import get_clone
    from devices.clone_browser import BrowserPool, Emulation
    from devices.clone_device import CloneDevice
    from realbench.actions import Click
    from realbench.golden import to_normalised
    from realbench.hierarchy import Hierarchy, Selector

    clone = get_clone("train_ticketing")
    first = CloneServer(limits=LIMITS).start()
    port, store = first.port, first.store
    with BrowserPool() as pool:
        device = CloneDevice(pool, first.url, clone, emulation=Emulation(width=412, height=915, scale=1.0))
        restarted: CloneServer | None = None
        try:
            sid = _session(first.url)
            device.open(sid)
            device.settle()

            def page(script: str) -> Any:
                return device._run(device._page_eval(script), "test probe")

            def tap_toggle() -> None:
                node = Hierarchy(device.hierarchy()).find_one(Selector(resource_id="home_page_student"))
                assert node is not None
                x, y = to_normalised(*node.bounds.center, *device.size())
                device.act(Click(x=x, y=y))

            assert page("() => window.__rb.transport()") == "socket"
            tap_toggle()
            assert store.get(sid).state["ui"]["search"]["student"] is True
            assert page(EVENT_FETCHES) == 0, "the tap's event went over the socket, not HTTP"

            first.stop()  # closes the page's socket
            restarted = CloneServer(port=port, store=store, limits=LIMITS).start()
            assert page("() => window.__rb.transport()") == "http"
            tap_toggle()
            assert store.get(sid).state["ui"]["search"]["student"] is False
            assert page(EVENT_FETCHES) == 1, "with the socket down the event went over HTTP"
            page(
                "() => new Promise(r => { const t = () => window.__rb.transport() === 'socket' ? r() : setTimeout(t, 20); t(); })"
            )
            tap_toggle()
            assert store.get(sid).state["ui"]["search"]["student"] is True
            assert page(EVENT_FETCHES) == 1, "the reopened socket carried the next event"
        finally:
            device.close()
            (restarted or first).stop()


@pytest.mark.browser
def test_a_page_of_a_token_guarded_server_gets_its_socket(monkeypatch) -> None:
    """The page's token travels as a header on every request (clone pages on phones, clone-on-phone
    targets); the socket's handshake carries it too, so events do not fall back to HTTP."""
    from clones.base import get_clone
    from devices.clone_browser import BrowserPool, Emulation
    from devices.clone_device import CloneDevice
    from realbench.http_guard import security_for

    token = "page-token"
    monkeypatch.setenv("REALBENCH_SERVER_TOKEN", token)
    with CloneServer(limits=LIMITS, security=security_for("127.0.0.1")) as guarded, BrowserPool() as pool:
        sid = _session(guarded.url, {"authorization": f"Bearer {token}"})
        device = CloneDevice(
            pool,
            guarded.url,
            get_clone("train_ticketing"),
            emulation=Emulation(width=412, height=915, scale=1.0),
            token=token,
        )
        try:
            device.open(sid)
            device.settle()
            opened = "() => new Promise(r => { const t = () => window.__rb.transport() === 'socket' ? r(true) : setTimeout(t, 20); t(); })"
            assert device._run(device._page_eval(opened), "wait for the socket") is True
        finally:
            device.close()
