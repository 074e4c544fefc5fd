"""Who may talk to the console: loopback by default; elsewhere only with a token.

- Bound to a loopback address, requests must name a loopback Host (a page on another site that
  resolves its own name to 127.0.0.1 — DNS rebinding — is refused).
- Bound elsewhere, the command refuses to start without a token from an environment variable;
  every request then carries it (``Authorization: Bearer``, ``X-Realbench-Token``, or the cookie
  the first ``?token=`` visit sets).
- Requests that change anything are POSTs with a JSON body (a cross-site form cannot send one)
  whose Origin, when a browser sends it, is this console's own; the API answers no request a
  browser marks as cross-site (`Sec-Fetch-Site`).
"""

from __future__ import annotations

import hmac
import ipaddress
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Receive, Scope, Send

from realbench.errors import ConfigError

COOKIE = "realbench_console"
LOOPBACK_NAMES = ("localhost",)


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

    def __init__(self, app: ASGIApp, *, token: str | None, loopback: bool) -> None:
        self.app = app
        self.token = token
        self.loopback = loopback

    async def _reply(
        self, send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        body = ('{"error": "' + message.replace('"', "'") + '"}').encode()
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

    def _presented(self, headers: dict[str, str], query: dict[str, str]) -> tuple[str | None, bool]:
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip(), False
        if "x-realbench-token" in headers:
            return headers["x-realbench-token"], False
        cookie = SimpleCookie(headers.get("cookie", ""))
        if COOKIE in cookie:
            return cookie[COOKIE].value, False
        if "token" in query:
            return query["token"], True
        return None, False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
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
            presented, from_query = self._presented(headers, query)
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
        await self.app(scope, receive, send)

    @staticmethod
    def _state_change_problem(method: str, headers: dict[str, Any], host: str) -> str | None:
        if method != "POST":
            return "only POST changes state"
        if headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            return "a state-changing request needs a JSON body (Content-Type: application/json)"
        origin = headers.get("origin")
        if origin is not None and origin not in (f"http://{host}", f"https://{host}"):
            return f"cross-origin request refused (Origin {origin})"
        site = headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return f"cross-site request refused (Sec-Fetch-Site {site})"
        return None
