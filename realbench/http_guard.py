"""What every realbench HTTP server puts in front of its routes: who may talk to it and how much.

- Loopback by default. Listening on any other address needs a token, read from an environment
  variable (``REALBENCH_SERVER_TOKEN`` unless told otherwise); clients send it as
  ``Authorization: Bearer TOKEN`` (a browser page opened with ``?token=TOKEN`` gets it as a
  same-site cookie).
- A Host allow-list (loopback names, the bound address, the machine's names when bound to a
  wildcard, plus any given) and an Origin check by scheme, host and port: a page from another site
  (another local port included) can neither read nor post (DNS rebinding, CSRF). A request that
  changes state and that the browser marks cross-site (``Sec-Fetch-Site``) is refused too.
- A WebSocket handshake passes the same Host, Origin and token checks (token from the header or
  the cookie only); a refused one is closed before it is accepted (HTTP 403).
- A body of a POST/PUT/PATCH must be JSON (``Content-Type: application/json``) and at most
  `max_body_bytes` (413 beyond); JSON nested deeper than `max_json_depth` is a 400.
- `GuardRules` holds what differs between servers (the console's stricter rules: its own cookie and
  token header, the token moved out of the address bar by a redirect, POST as the only state
  change, cross-site reads of its API refused, no sockets).

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
from urllib.parse import parse_qs, parse_qsl, quote, urlencode, urlsplit

from realbench.errors import ConfigError, RealbenchError, ServerError

if TYPE_CHECKING:  # the server side only: clients import this module without uvicorn
    import uvicorn

log = logging.getLogger(__name__)

DEFAULT_TOKEN_ENV = "REALBENCH_SERVER_TOKEN"
TOKEN_COOKIE = "rb_token"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
READ_METHODS = frozenset({"GET", "HEAD"})  # the methods a ``?token=`` link may be opened with
SAME_SITE_FETCH = frozenset({"same-origin", "none"})  # Sec-Fetch-Site values of the server's own pages
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
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
    """Who may talk to a server: the token (None on loopback without one) and the Host allow-list.

    `allowed_hosts=None` answers any Host name, and only with a token: a page that rebinds its own
    name to the server's address gets no token from the browser (cookies go by host name)."""

    token: str | None = None
    allowed_hosts: frozenset[str] | None = field(default_factory=lambda: LOOPBACK_NAMES)

    def __post_init__(self) -> None:
        if self.allowed_hosts is None and self.token is None:
            raise ConfigError(
                "a server that answers any Host name needs a token",
                hint="give the Host names it answers to, or a token",
            )


@dataclass(frozen=True)
class GuardRules:
    """What differs between the servers behind `GuardMiddleware`; the defaults are those of the
    clone server and the rollout service."""

    # Cookies are kept per host name, not per port: servers on one machine need distinct names.
    token_cookie: str = TOKEN_COOKIE
    token_header: str | None = None  # a header carrying the bare token, beside Authorization
    # A GET/HEAD with the right ``?token=`` is answered 303 to the same address without it (and
    # the cookie), so the token leaves the address bar, history and Referer at once.
    query_token_redirect: bool = False
    methods: frozenset[str] | None = None  # the methods answered at all (405 otherwise); None: any
    json_always: bool = False  # a state change declares a JSON body even when it sends none
    cross_site_prefixes: tuple[str, ...] = ()  # paths no cross-site request reaches, reads included
    websockets: bool = True  # False: every handshake is refused (an app without socket routes)


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


def same_origin(origin: str, host: str, scheme: str = "http") -> bool:
    """Whether a browser's Origin is the server's own: the same scheme, host name and port (another
    port of the same machine is another site's server); a port left out is the scheme's default."""
    scheme = {"ws": "http", "wss": "https"}.get(scheme, scheme)
    if host and origin.lower() == f"{scheme}://{host}".lower():
        return True  # what a browser sends from the server's own page: no parsing needed
    try:
        parts = urlsplit(origin)
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
        own = urlsplit(f"{scheme}://{host}")
        own_port = own.port or DEFAULT_PORTS.get(scheme)
    except ValueError:
        return False
    if parts.scheme != scheme or not parts.hostname or not host:
        return False
    return parts.hostname.lower() == (own.hostname or "").lower() and port == own_port


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
    """ASGI middleware enforcing `ServerSecurity`, the body limits of `ServerLimits` and the
    server's `GuardRules`.

    A WebSocket handshake passes the same Host, Origin and token checks as a request (a browser
    opens a socket to any site without asking, so the Origin check is what keeps another site's
    page off it); its token comes from the header or the cookie, never the query. A refused
    handshake is closed before it is accepted, which the server answers with HTTP 403."""

    def __init__(
        self, app: ASGIApp, security: ServerSecurity, limits: ServerLimits, rules: GuardRules | None = None
    ) -> None:
        self.app = app
        self.security = security
        self.limits = limits
        self.rules = rules or GuardRules()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await self._guard_socket(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers_of(scope)
        method = scope["method"].upper()
        given = _token_of(headers, scope, method, self.rules)
        refusal = self._refusal(headers, given, scope) or self._request_refusal(headers, scope, method)
        if refusal is not None:
            await _answer(send, *refusal)
            return
        from_query = self.security.token is not None and given is not None and given[1] == "query"
        if from_query and self.rules.query_token_redirect:
            await self._redirect_without_token(scope, send)
            return
        if method in UNSAFE_METHODS:
            body = await self._read_body(headers, receive, send)
            if body is None:
                return
            receive = replay_body(body, receive)
        if from_query:
            await self.app(scope, receive, self._with_cookie(send))
            return
        await self.app(scope, receive, send)

    def _refusal(
        self, headers: dict[str, str], given: tuple[str, str] | None, scope: Scope
    ) -> tuple[int, str, str] | None:
        """(status, message, hint) when the request or handshake may not reach the app, else None.
        `given` is the token it carries (`_token_of`) and where it came from."""
        allowed = self.security.allowed_hosts
        if allowed is not None and _hostname(headers.get("host", "")) not in allowed:
            return 403, "Host header not allowed", "add the name with --allow-host"
        origin = headers.get("origin")
        # Same origin means scheme, host AND port: another local web app on another port is another site.
        if origin is not None and not same_origin(
            origin, headers.get("host", ""), scope.get("scheme", "http")
        ):
            return 403, "cross-origin request refused", "call the API from the same host and port"
        token = self.security.token
        if token is not None and (
            given is None or not secrets.compare_digest(given[0].encode("utf-8", "replace"), token.encode())
        ):
            return (
                401,
                "missing or wrong token",
                "send 'Authorization: Bearer TOKEN' (the server's token env var)",
            )
        return None

    def _request_refusal(
        self, headers: dict[str, str], scope: Scope, method: str
    ) -> tuple[int, str, str] | None:
        """The checks of a plain request beyond `_refusal`: method, cross-site marks, content type."""
        rules = self.rules
        if rules.methods is not None and method not in rules.methods:
            return 405, f"method {method} not allowed", f"use one of {', '.join(sorted(rules.methods))}"
        site = headers.get("sec-fetch-site", "same-origin")
        cross_site = site.lower() not in SAME_SITE_FETCH
        if cross_site and (method in UNSAFE_METHODS or scope["path"].startswith(rules.cross_site_prefixes)):
            return (
                403,
                f"cross-site request refused (Sec-Fetch-Site {site[:40]})",
                "use the server's own pages",
            )
        if rules.json_always and method in UNSAFE_METHODS and _content_type(headers) != "application/json":
            return 415, "a state change needs a JSON body", "send 'Content-Type: application/json'"
        return None

    async def _read_body(self, headers: dict[str, str], receive: Receive, send: Send) -> bytes | None:
        """The whole body, or None after answering (413 over the limit: a declared length before a
        byte is read, a streamed one as soon as it passes; 408 late; 415 not JSON)."""
        limit = self.limits.max_body_bytes
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await _too_large(send, limit)
            return None
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
                return None
            if message["type"] != "http.request":
                return None  # the client went away
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await _too_large(send, limit)
                return None
            chunks.append(chunk)
            more = bool(message.get("more_body"))
        body = b"".join(chunks)
        if body and _content_type(headers) != "application/json":
            await _answer(send, 415, "request bodies must be JSON", "send 'Content-Type: application/json'")
            return None
        return body

    def _cookie(self) -> bytes:
        return f"{self.rules.token_cookie}={self.security.token}; HttpOnly; SameSite=Strict; Path=/".encode()

    def _with_cookie(self, send: Send) -> Send:
        cookie = self._cookie()

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"set-cookie", cookie)]
            await send(message)

        return send_with_cookie

    async def _redirect_without_token(self, scope: Scope, send: Send) -> None:
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        rest = urlencode([(k, v) for k, v in query if k != "token"])
        # The path as the client sent it (percent-encoded), so the Location header stays ASCII.
        raw = scope.get("raw_path") or quote(scope.get("root_path", "") + scope["path"]).encode()
        path = raw.split(b"?", 1)[0]  # some servers keep the query in raw_path
        location = path + (f"?{rest}".encode() if rest else b"")
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", location),
                    (b"set-cookie", self._cookie()),
                    (b"content-length", b"0"),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})

    async def _guard_socket(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _headers_of(scope)
        if self.rules.websockets:
            refusal = self._refusal(headers, _token_of(headers, scope, SOCKET_METHOD, self.rules), scope)
        else:
            refusal = (403, "this server has no sockets", "")
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, message, _ = refusal
        if (await receive())["type"] == "websocket.connect":
            await send({"type": "websocket.close", "code": POLICY_VIOLATION, "reason": f"{status} {message}"})


def _headers_of(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _content_type(headers: dict[str, str]) -> str:
    return headers.get("content-type", "").split(";", 1)[0].strip().lower()


def _token_of(
    headers: dict[str, str], scope: Scope, method: str, rules: GuardRules
) -> tuple[str, str] | None:
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip(), "header"
    if rules.token_header is not None and rules.token_header in headers:
        return headers[rules.token_header], "header"
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == rules.token_cookie and value:
            return value, "cookie"
    if method in READ_METHODS:  # a person opening a page link; the cookie carries it from then on
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
