"""What every realbench HTTP server puts in front of its routes: who may talk to it and how much.

- Loopback by default. Listening on any other address needs a token, read from an environment
  variable (``REALBENCH_SERVER_TOKEN`` unless told otherwise); clients send it as
  ``Authorization: Bearer TOKEN`` (a browser page opened with ``?token=TOKEN`` gets it as a
  same-site cookie).
- A Host allow-list (loopback names, the bound address, the machine's names when bound to a
  wildcard, plus any given) and an Origin check: a page from another site can neither read nor
  post (DNS rebinding, CSRF).
- A WebSocket handshake passes the same Host, Origin and token checks (token from the header or
  the cookie only); a refused one is closed before it is accepted (HTTP 403).
- A body of a POST/PUT/PATCH must be JSON (``Content-Type: application/json``) and at most
  `max_body_bytes` (413 beyond); JSON nested deeper than `max_json_depth` is a 400.

- Connections (`server_config`, what every server hands uvicorn): a request's headers must arrive
  within `header_timeout_s` of the connection opening (or of its first byte after a keep-alive
  pause) and be at most `max_header_bytes`; a body must arrive within `body_timeout_s` (408);
  one client address holds at most `max_connections_per_client` connections and the server at
  most `max_connections` (more are closed at once), so half-open requests cannot exhaust its
  file descriptors.

Session caps and idle expiry are the servers' own (they know what a session is); their limits live
in `ServerLimits` too, so one set of options configures a server.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import os
import secrets
import socket
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from realbench.errors import ConfigError, RealbenchError, ServerError

if TYPE_CHECKING:  # the server side only: clients import this module without uvicorn
    import uvicorn

log = logging.getLogger(__name__)

DEFAULT_TOKEN_ENV = "REALBENCH_SERVER_TOKEN"
TOKEN_COOKIE = "rb_token"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SOCKET_METHOD = "WEBSOCKET"  # what the token lookup is told for a handshake: no token from the query
POLICY_VIOLATION = 1008  # the WebSocket close code of a refused handshake

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class LimitExceeded(RealbenchError):
    """A server limit (sessions, environments) is reached: HTTP 429."""

    http_status = 429


class BodyError(RealbenchError):
    """A request body the server will not read (too deep, not JSON): HTTP 400 or 413."""

    def __init__(self, status: int, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.http_status = status


@dataclass(frozen=True)
class ServerLimits:
    """Limits of one server; every one is a command-line option of the server's command."""

    max_body_bytes: int = 4 * 1024 * 1024
    max_json_depth: int = 64
    max_sessions: int = 1024
    idle_timeout_s: float = 3600.0
    max_snapshots: int = 4096
    # connections (see `server_config`): well under the common `ulimit -n 1024`
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    max_header_bytes: int = 64 * 1024
    max_connections_per_client: int = 256
    max_connections: int = 768
    keep_alive_s: int = 5
    # connections accepted per turn of the event loop (and the listen queue): each takes a file
    # before the caps can refuse it, so a burst may hold at most this many beyond them
    accept_backlog: int = 128


@dataclass(frozen=True)
class ServerSecurity:
    """Who may talk to a server: the token (None on loopback without one) and the Host allow-list."""

    token: str | None = None
    allowed_hosts: frozenset[str] = field(default_factory=lambda: LOOPBACK_NAMES)


# What an app built without explicit security accepts: loopback plus the host name Starlette's
# in-process TestClient sends. Every served app (`serve`, CloneServer, the rollout service) is
# given `security_for(its host)` instead.
IN_PROCESS_SECURITY = ServerSecurity(allowed_hosts=LOOPBACK_NAMES | {"testserver"})


def is_loopback(host: str) -> bool:
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _machine_names() -> set[str]:
    names = {socket.gethostname().lower(), socket.getfqdn().lower()}
    with contextlib.suppress(OSError):
        names.update(socket.gethostbyname_ex(socket.gethostname())[2])
    return names


def security_for(
    host: str, *, token_env: str = DEFAULT_TOKEN_ENV, allow_hosts: Iterable[str] = ()
) -> ServerSecurity:
    """The security of a server bound to `host`; refuses a non-loopback address without a token."""
    token = os.environ.get(token_env) or None
    if not is_loopback(host) and not token:
        raise ServerError(
            f"refusing to listen on {host} without a token: set the environment variable {token_env}",
            hint=f"e.g. export {token_env}=$(python -c 'import secrets; print(secrets.token_urlsafe(24))'); "
            "clients send it as 'Authorization: Bearer TOKEN'. Or listen on 127.0.0.1",
        )
    allowed = set(LOOPBACK_NAMES) | {host.strip("[]").lower()} | {h.lower() for h in allow_hosts}
    if host in ("0.0.0.0", "::", ""):
        allowed |= _machine_names()
    return ServerSecurity(token=token, allowed_hosts=frozenset(allowed))


def client_token(token_env: str | None = None) -> str | None:
    """The token a client sends: the same environment variable the server reads its token from
    (``REALBENCH_SERVER_TOKEN`` unless told otherwise). Unset: None, and nothing is sent; a variable
    named explicitly must be set."""
    token = os.environ.get(token_env or DEFAULT_TOKEN_ENV) or None
    if token is None and token_env is not None:
        raise ConfigError(
            f"environment variable {token_env} (the server's token) is not set",
            hint=f"export {token_env} with the token the server was started with",
        )
    return token


def auth_headers(token: str | None) -> dict[str, str]:
    """What a client adds to each request so that a token-guarded server lets it in."""
    return {"authorization": f"Bearer {token}"} if token else {}


def _hostname(netloc: str) -> str:
    if netloc.startswith("["):
        return netloc[1 : netloc.find("]")].lower() if "]" in netloc else netloc.lower()
    return netloc.rsplit(":", 1)[0].lower() if netloc.count(":") == 1 else netloc.lower()


def replay_body(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the app a body already read by the guard, then the connection's own
    messages (a disconnect, say)."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def json_depth_ok(value: Any, max_depth: int) -> bool:
    """True when `value` nests at most `max_depth` containers deep (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            return False
        stack.extend((child, depth + 1) for child in children)
    return True


def parse_json_body(raw: bytes, max_depth: int) -> Any:
    """The body as JSON, or a BodyError (400) for invalid or too deeply nested JSON."""
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except RecursionError:
        raise BodyError(400, f"request body nests deeper than {max_depth} levels") from None
    except ValueError:
        raise BodyError(400, "request body is not valid JSON") from None
    if not json_depth_ok(data, max_depth):
        raise BodyError(400, f"request body nests deeper than {max_depth} levels")
    return data


class GuardMiddleware:
    """ASGI middleware enforcing `ServerSecurity` and the body limits of `ServerLimits`.

    A WebSocket handshake passes the same Host, Origin and token checks as a request (a browser
    opens a socket to any site without asking, so the Origin check is what keeps another site's
    page off it); its token comes from the header or the cookie, never the query. A refused
    handshake is closed before it is accepted, which the server answers with HTTP 403."""

    def __init__(self, app: ASGIApp, security: ServerSecurity, limits: ServerLimits) -> None:
        self.app = app
        self.security = security
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._guard_socket(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers_of(scope)
        method = scope["method"].upper()
        given = _token_of(headers, scope, method)
        refusal = self._refusal(headers, given)
        if refusal is not None:
            await _answer(send, *refusal)
            return
        set_cookie = self.security.token is not None and given is not None and given[1] == "query"
        if method in UNSAFE_METHODS:
            length = headers.get("content-length")
            if length is not None and length.isdigit() and int(length) > self.limits.max_body_bytes:
                await _too_large(send, self.limits.max_body_bytes)
                return
            chunks: list[bytes] = []
            size = 0
            more = True
            deadline = time.monotonic() + self.limits.body_timeout_s
            while more:
                try:
                    message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
                except TimeoutError:
                    await _answer(
                        send,
                        408,
                        f"request body not received within {self.limits.body_timeout_s:g} s",
                        "send the whole body at once",
                    )
                    return
                if message["type"] != "http.request":
                    return  # the client went away
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.limits.max_body_bytes:
                    await _too_large(send, self.limits.max_body_bytes)
                    return
                chunks.append(chunk)
                more = bool(message.get("more_body"))
            body = b"".join(chunks)
            ctype = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if body and ctype != "application/json":
                await _answer(
                    send, 415, "request bodies must be JSON", "send 'Content-Type: application/json'"
                )
                return
            receive = replay_body(body, receive)
        if set_cookie:
            token = self.security.token
            assert token is not None

            async def send_with_cookie(message: Message) -> None:
                if message["type"] == "http.response.start":
                    cookie = f"{TOKEN_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"
                    message["headers"] = [*message.get("headers", []), (b"set-cookie", cookie.encode())]
                await send(message)

            await self.app(scope, receive, send_with_cookie)
            return
        await self.app(scope, receive, send)

    def _refusal(self, headers: dict[str, str], given: tuple[str, str] | None) -> tuple[int, str, str] | None:
        """(status, message, hint) when the request may not reach the app, else None. `given` is
        the token the request carries (`_token_of`) and where it came from."""
        allowed = self.security.allowed_hosts
        if _hostname(headers.get("host", "")) not in allowed:
            return 403, "Host header not allowed", "add the name with --allow-host"
        origin = headers.get("origin")
        # Same origin means host AND port: another local web app on another port is another site.
        if origin is not None and (
            origin == "null" or urlsplit(origin).netloc.lower() != headers.get("host", "").lower()
        ):
            return 403, "cross-origin request refused", "call the API from the same host and port"
        token = self.security.token
        if token is not None and (given is None or not secrets.compare_digest(given[0], token)):
            return (
                401,
                "missing or wrong token",
                "send 'Authorization: Bearer TOKEN' (the server's token env var)",
            )
        return None

    async def _guard_socket(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _headers_of(scope)
        refusal = self._refusal(headers, _token_of(headers, scope, SOCKET_METHOD))
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, message, _ = refusal
        if (await receive())["type"] == "websocket.connect":
            await send({"type": "websocket.close", "code": POLICY_VIOLATION, "reason": f"{status} {message}"})


def _headers_of(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _token_of(headers: dict[str, str], scope: Scope, method: str) -> tuple[str, str] | None:
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip(), "header"
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == TOKEN_COOKIE and value:
            return value, "cookie"
    if method == "GET":  # a person opening a page link; the cookie carries it from then on
        values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
        if values:
            return values[0], "query"
    return None


async def _answer(send: Send, status: int, message: str, hint: str | None = None) -> None:
    payload = json.dumps({"error": message, "type": "GuardError", "hint": hint}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


async def _too_large(send: Send, limit: int) -> None:
    await _answer(
        send, 413, f"request body larger than {limit} bytes", "the server's --max-body option sets the limit"
    )


# --- connections -------------------------------------------------------------------------------


class _ConnectionCounts:
    """Open connections of one server, by client address (shared by its protocol instances)."""

    def __init__(self) -> None:
        self.by_client: Counter[str] = Counter()
        self.refused = 0
        self.timed_out = 0


def guarded_protocol(limits: ServerLimits) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with a header-read deadline and per-client/total connection caps.

    uvicorn arms no timer on a new connection, and a request whose headers never finish cancels
    its keep-alive timer: such a connection stayed open for ever. Here a connection whose request
    headers are not complete `header_timeout_s` after it opened (or after its first byte following
    a response) is closed, and one over a cap is closed as soon as it is accepted."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    counts = _ConnectionCounts()

    class GuardedH11Protocol(H11Protocol):
        stats = counts

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._rb_client = self.client[0] if self.client else "?"
            self._rb_counted = False
            self._rb_header_timer: asyncio.TimerHandle | None = None
            if (
                counts.by_client[self._rb_client] >= limits.max_connections_per_client
                or len(self.connections) > limits.max_connections
            ):
                counts.refused += 1
                if counts.refused in (1, 100) or counts.refused % 1000 == 0:
                    log.warning(
                        "connection from %s refused: %d open from it, %d in all (limits %d / %d; %d refused so far)",
                        self._rb_client,
                        counts.by_client[self._rb_client],
                        len(self.connections),
                        limits.max_connections_per_client,
                        limits.max_connections,
                        counts.refused,
                    )
                transport.abort()
                return
            counts.by_client[self._rb_client] += 1
            self._rb_counted = True
            self._rb_arm_header_timer()

        def _rb_uncount(self) -> None:
            if self._rb_counted:
                self._rb_counted = False
                counts.by_client[self._rb_client] -= 1
                if counts.by_client[self._rb_client] <= 0:
                    del counts.by_client[self._rb_client]
            if self._rb_header_timer is not None:
                self._rb_header_timer.cancel()
                self._rb_header_timer = None

        def _rb_arm_header_timer(self) -> None:
            if self._rb_header_timer is None:
                self._rb_header_timer = self.loop.call_later(limits.header_timeout_s, self._rb_headers_late)

        def _rb_waiting_for_headers(self) -> bool:
            idle = self.cycle is None or self.cycle.response_complete
            return idle and self.conn.their_state in (h11.IDLE, h11.DONE)

        def _rb_headers_late(self) -> None:
            self._rb_header_timer = None
            if self._rb_waiting_for_headers() and not self.transport.is_closing():
                counts.timed_out += 1
                log.debug(
                    "closing a connection from %s: no complete request headers in time", self._rb_client
                )
                self.transport.abort()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if not self._rb_counted:
                return
            if self._rb_waiting_for_headers():
                if not self.transport.is_closing():
                    self._rb_arm_header_timer()  # part of a request's headers: they get the deadline
            elif self._rb_header_timer is not None:
                self._rb_header_timer.cancel()
                self._rb_header_timer = None

        def connection_lost(self, exc: Exception | None) -> None:
            self._rb_uncount()
            super().connection_lost(exc)

        def handle_websocket_upgrade(self, event: h11.Request) -> None:
            self._rb_uncount()  # the socket's protocol takes the connection over
            super().handle_websocket_upgrade(event)

    return GuardedH11Protocol


def server_config(app: Any, limits: ServerLimits, **options: Any) -> uvicorn.Config:
    """The uvicorn settings every realbench server runs with: the guarded h11 protocol (header
    deadline, connection caps), the header size cap, uvicorn's own concurrency cap (503 beyond)
    and a keep-alive timeout. `options` are passed on (log_level, lifespan, ws, …)."""
    import uvicorn

    options.setdefault("timeout_keep_alive", limits.keep_alive_s)
    options.setdefault("access_log", False)
    return uvicorn.Config(
        app,
        http=guarded_protocol(limits),
        h11_max_incomplete_event_size=limits.max_header_bytes,
        limit_concurrency=limits.max_connections,
        backlog=limits.accept_backlog,
        **options,
    )
