"""The shared guard's rules that every server gets (Origin by scheme, host and port; cross-site
state changes; tokens that are not ASCII) and the knobs a server sets (`GuardRules`). Each request
is first sent to the bare app, which records it (the attack lands), then through the guard, where
the app must not see it."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from realbench.errors import ConfigError
from realbench.http_guard import (
    LOOPBACK_NAMES,
    GuardMiddleware,
    GuardRules,
    ServerLimits,
    ServerSecurity,
    same_origin,
)

TOKEN = "s3cret-token-0123456789"
BASE = "http://127.0.0.1:8000"


class _RecordingApp:
    """A bare ASGI app standing in for a server's routes: it records every request that reached it."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":
            await receive()
            self.seen.append(("WEBSOCKET", scope["path"]))
            await send({"type": "websocket.accept"})
            return
        while (await receive()).get("more_body"):
            pass
        self.seen.append((scope["method"], scope["path"]))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def _send(app: Any, method: str, path: str, headers: dict[str, Any], body: bytes = b"") -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as c:
            return await c.request(method, path, headers=headers, content=body)

    return anyio.run(go)


def _guarded(rules: GuardRules | None = None, token: str | None = TOKEN) -> tuple[_RecordingApp, Any]:
    app = _RecordingApp()
    security = ServerSecurity(token=token, allowed_hosts=LOOPBACK_NAMES)
    return app, GuardMiddleware(app, security, ServerLimits(), rules)


AUTH = {"authorization": f"Bearer {TOKEN}"}
JSON = {**AUTH, "content-type": "application/json"}


@pytest.mark.parametrize(
    "method, headers, status",
    [
        ("POST", {**JSON, "origin": "https://127.0.0.1:8000"}, 403),  # another scheme: another origin
        ("GET", {**AUTH, "origin": "http://127.0.0.1:8001"}, 403),  # another local port
        ("GET", {**AUTH, "origin": "http://127.0.0.1"}, 403),  # port 80
        ("POST", {**JSON, "origin": "http://evil.example:8000"}, 403),
        ("POST", {**JSON, "sec-fetch-site": "cross-site"}, 403),  # no Origin, but marked cross-site
        ("POST", {**JSON, "sec-fetch-site": "same-site"}, 403),  # a sibling subdomain's page
        ("GET", {"authorization": b"Bearer s3cret-token-\xe9"}, 401),  # not ASCII: refused, no 500
        ("GET", {"cookie": f"realbench_console={TOKEN}"}, 401),  # the console's cookie, not this server's
        ("GET", {"x-realbench-token": TOKEN}, 401),  # a header this server does not read
    ],
)
def test_default_rules_refuse_what_the_bare_app_accepts(
    method: str, headers: dict[str, Any], status: int
) -> None:
    app, guard = _guarded()
    assert _send(app, method, "/api/sessions", headers, b"{}" if method == "POST" else b"").status_code == 200
    assert app.seen == [(method, "/api/sessions")]  # unguarded, the attack lands
    app.seen.clear()
    assert (
        _send(guard, method, "/api/sessions", headers, b"{}" if method == "POST" else b"").status_code
        == status
    )
    assert app.seen == []


def test_default_rules_let_the_servers_own_pages_through() -> None:
    app, guard = _guarded()
    for method, headers in [
        ("POST", {**JSON, "origin": BASE, "sec-fetch-site": "same-origin"}),
        ("GET", {**AUTH, "sec-fetch-site": "cross-site"}),  # a link from another site opens a page
        ("GET", {"cookie": f"rb_token={TOKEN}"}),
        ("POST", AUTH),  # no body: no content type needed (clients post bare commands)
    ]:
        assert (
            _send(guard, method, "/s/1", headers, b"{}" if "content-type" in headers else b"").status_code
            == 200
        )
    page = _send(guard, "HEAD", f"/?token={TOKEN}", {})
    assert page.status_code == 200 and f"rb_token={TOKEN}" in page.headers["set-cookie"]
    assert len(app.seen) == 5


def test_same_origin_compares_scheme_host_and_port() -> None:
    assert same_origin("http://127.0.0.1", "127.0.0.1")
    assert same_origin("http://127.0.0.1:80", "127.0.0.1")
    assert same_origin("https://Console.Lab", "console.lab:443", "https")
    assert same_origin("http://[::1]:8000", "[::1]:8000", "ws")  # a socket's scope says ws
    assert not same_origin("http://127.0.0.1:8000", "127.0.0.1:8000", "https")
    assert not same_origin("http://127.0.0.1:8000", "127.0.0.1:8001")
    assert not same_origin("null", "127.0.0.1:8000")
    assert not same_origin("http://127.0.0.1:99999", "127.0.0.1:8000")  # no such port
    assert not same_origin("http://127.0.0.1:8000", "")


def test_rules_a_server_sets() -> None:
    rules = GuardRules(
        token_cookie="c",
        token_header="x-t",
        query_token_redirect=True,
        methods=frozenset({"GET", "POST"}),
        json_always=True,
        cross_site_prefixes=("/api/",),
    )
    app, guard = _guarded(rules)
    refused = [
        ("PUT", "/api/x", JSON, b"{}", 405),
        ("POST", "/api/x", AUTH, b"", 415),  # a state change declares JSON even without a body
        ("GET", "/api/x", {**AUTH, "sec-fetch-site": "cross-site"}, b"", 403),  # reads of the API too
        ("GET", "/api/x", {"cookie": f"rb_token={TOKEN}"}, b"", 401),
    ]
    for method, path, headers, body, status in refused:
        assert _send(_RecordingApp(), method, path, headers, body).status_code == 200
        assert _send(guard, method, path, headers, body).status_code == status, (method, headers)
    assert app.seen == []
    assert _send(guard, "GET", "/api/x", {"x-t": TOKEN}).status_code == 200
    assert _send(guard, "GET", "/api/x", {"cookie": f"c={TOKEN}"}).status_code == 200
    moved = _send(guard, "GET", f"/page?a=1&token={TOKEN}", {})
    assert moved.status_code == 303 and moved.headers["location"] == "/page?a=1"
    assert moved.headers["set-cookie"].startswith(f"c={TOKEN};") and "HttpOnly" in moved.headers["set-cookie"]
    moved = _send(guard, "GET", f"/%E9%A1%B5?token={TOKEN}&b=%E2%9C%93", {})
    assert moved.status_code == 303 and moved.headers["location"] == "/%E9%A1%B5?b=%E2%9C%93"
    assert app.seen == [("GET", "/api/x"), ("GET", "/api/x")]  # the redirects themselves reached nothing


def test_a_server_without_sockets_refuses_even_its_own_pages_handshake() -> None:
    app, guard = _guarded(GuardRules(websockets=False), token=None)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "websocket",
        "scheme": "ws",
        "path": "/events",
        "headers": [(b"host", b"127.0.0.1:8000"), (b"origin", BASE.encode())],
        "query_string": b"",
    }
    anyio.run(app, scope, receive, send)
    assert app.seen == [("WEBSOCKET", "/events")] and sent.pop()["type"] == "websocket.accept"
    app.seen.clear()
    anyio.run(guard, scope, receive, send)
    assert app.seen == [] and sent == [
        {"type": "websocket.close", "code": 1008, "reason": "403 this server has no sockets"}
    ]
    # with sockets allowed, the same handshake from the server's own origin goes through
    _, allowed = _guarded(token=None)
    anyio.run(allowed, scope, receive, send)
    assert sent[-1]["type"] == "websocket.accept"


def test_any_host_only_with_a_token() -> None:
    with pytest.raises(ConfigError, match="needs a token"):
        ServerSecurity(token=None, allowed_hosts=None)
    app = _RecordingApp()
    guard = GuardMiddleware(app, ServerSecurity(token=TOKEN, allowed_hosts=None), ServerLimits())
    # a rebound name gets no token from the browser; with it, any name the operator uses works
    assert _send(guard, "GET", "/", {"host": "rebound.example"}).status_code == 401
    assert _send(guard, "GET", "/", {"host": "lab-7.internal", **AUTH}).status_code == 200
