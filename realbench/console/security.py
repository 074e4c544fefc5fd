"""Who may talk to the console: loopback by default; elsewhere only with a token.

- Bound to a loopback address, requests must name a loopback Host (a page on another site that
  resolves its own name to 127.0.0.1 — DNS rebinding — is refused).
- Bound elsewhere, the command refuses to start without a token from an environment variable;
  every request then carries it (``Authorization: Bearer``, ``X-Realbench-Token``, or the cookie
  the first ``?token=`` visit sets). ``?token=`` is read only on a GET (a link a person opens),
  never on a POST.
- Requests that change anything are POSTs with a JSON body (a cross-site form cannot send one).
  Any request that carries an Origin must come from this console's own origin: scheme, host AND
  port (a page served by another local port is another origin). The API answers no request a
  browser marks as cross-site (`Sec-Fetch-Site`).
- A request body is at most `ServerLimits.max_body_bytes` (the shared server limits of
  `realbench.http_guard`): a larger declared length is refused before anything is read, and a
  body streamed without a length is cut off and refused as soon as it passes the limit; it must
  arrive within `body_timeout_s`. Header deadlines and connection caps are the shared
  `http_guard.server_config`'s, which the console is served with.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import time
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from realbench.errors import ConfigError
from realbench.http_guard import ServerLimits, replay_body

COOKIE = "realbench_console"
LOOPBACK_NAMES = ("localhost",)
# What an operator's page sends: actions, labels, recorder edits. A screenshot never goes up.
CONSOLE_LIMITS = ServerLimits(max_body_bytes=1024 * 1024, max_json_depth=32)
DEFAULT_PORTS = {"http": 80, "https": 443}


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def require_token(host: str, token_env: str | None, environ: dict[str, str]) -> str | None:
    """The token the console must demand, or None on loopback without one. Refuses a non-loopback
    bind without a token (ConfigError)."""
    token = environ.get(token_env) if token_env else None
    if token_env and not token:
        raise ConfigError(
            f"--token-env {token_env}: the environment variable is not set",
            hint=f"export {token_env}=<a long random string> (it is never written anywhere)",
        )
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"refusing to serve the console on {host} without a token",
            hint="bind 127.0.0.1 (the default), or pass --token-env VAR with VAR holding a long random token",
        )
    if token is not None and len(token) < 16:
        raise ConfigError("the console token is too short", hint="use at least 16 random characters")
    return token


class ConsoleGuard:
    """ASGI middleware enforcing the rules above."""

    def __init__(
        self, app: ASGIApp, *, token: str | None, loopback: bool, limits: ServerLimits = CONSOLE_LIMITS
    ) -> None:
        self.app = app
        self.token = token
        self.loopback = loopback
        self.limits = limits

    async def _reply(
        self, send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        body = json.dumps({"error": message}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    *(headers or []),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def _presented(
        self, headers: dict[str, str], query: dict[str, str], method: str
    ) -> tuple[str | None, bool]:
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip(), False
        if "x-realbench-token" in headers:
            return headers["x-realbench-token"], False
        cookie = SimpleCookie(headers.get("cookie", ""))
        if COOKIE in cookie:
            return cookie[COOKIE].value, False
        if "token" in query and method in ("GET", "HEAD"):
            return query["token"], True
        return None, False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            # The console has no socket routes, and a socket would skip every check below (a browser
            # opens one to any site): refuse the handshake, which the server answers with 403.
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        host_name = host.rsplit(":", 1)[0].strip("[]") if host else ""
        if self.loopback and not is_loopback(host_name):
            await self._reply(send, 421, "this console answers only to a loopback host name")
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if self.token is not None:
            presented, from_query = self._presented(headers, query, scope["method"])
            if presented is None or not hmac.compare_digest(presented.encode(), self.token.encode()):
                await self._reply(send, 401, "a valid console token is required")
                return
            if from_query and scope["method"] == "GET":
                # Move the token from the address bar into an HttpOnly cookie.
                rest = urlencode({k: v for k, v in query.items() if k != "token"})
                location = scope["path"] + (f"?{rest}" if rest else "")
                cookie = f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/"
                await send(
                    {
                        "type": "http.response.start",
                        "status": 303,
                        "headers": [
                            (b"location", location.encode()),
                            (b"set-cookie", cookie.encode()),
                            (b"content-length", b"0"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": b""})
                return
        origin = headers.get("origin")
        if origin is not None and not same_origin(origin, host, scope.get("scheme", "http")):
            await self._reply(send, 403, f"cross-origin request refused (Origin {origin[:100]})")
            return
        site = headers.get("sec-fetch-site")
        if scope["path"].startswith("/api/") and site is not None and site not in ("same-origin", "none"):
            # Reading the API (which also health-checks phones) is for this console's own pages.
            await self._reply(send, 403, f"cross-site request refused (Sec-Fetch-Site {site})")
            return
        if scope["method"] not in ("GET", "HEAD"):
            problem = self._state_change_problem(scope["method"], headers, host)
            if problem:
                await self._reply(send, 403, problem)
                return
            body = await self._read_body(headers, receive, send)
            if body is None:
                return
            await self.app(scope, replay_body(body, receive), send)
            return
        await self.app(scope, receive, send)

    async def _read_body(self, headers: dict[str, str], receive: Receive, send: Send) -> bytes | None:
        """The whole body, or None after answering 413 (a declared length over the limit is
        refused before a byte is read; a streamed one as soon as it passes the limit)."""
        limit = self.limits.max_body_bytes
        declared = headers.get("content-length", "")
        if declared and (not declared.isdigit() or int(declared) > limit):
            await self._reply(send, 413, f"request body larger than {limit} bytes")
            return None
        chunks: list[bytes] = []
        size = 0
        deadline = time.monotonic() + self.limits.body_timeout_s
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                await self._reply(
                    send, 408, f"request body not received within {self.limits.body_timeout_s:g} s"
                )
                return None
            if message["type"] != "http.request":
                return None  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await self._reply(send, 413, f"request body larger than {limit} bytes")
                return None
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)

    @staticmethod
    def _state_change_problem(method: str, headers: dict[str, Any], host: str) -> str | None:
        if method != "POST":
            return "only POST changes state"
        if headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            return "a state-changing request needs a JSON body (Content-Type: application/json)"
        site = headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return f"cross-site request refused (Sec-Fetch-Site {site})"
        return None


def _host_port(host: str, scheme: str) -> tuple[str, int | None]:
    """(lower-case host name, port) of a Host header value; the scheme's default port when none."""
    try:
        parts = urlsplit(f"{scheme}://{host}")
        return (parts.hostname or "").lower(), parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:
        return "", None


def same_origin(origin: str, host: str, scheme: str = "http") -> bool:
    """Whether a browser's Origin is this console's own: the same scheme, host name and port
    (another port of the same machine is another site's server)."""
    try:
        parts = urlsplit(origin)
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return False
    if parts.scheme != scheme or not parts.hostname or not host:
        return False
    name, own_port = _host_port(host, scheme)
    return parts.hostname.lower() == name and port == own_port
