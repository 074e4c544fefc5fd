"""Who may talk to the console: the shared guard of every realbench server (`realbench.http_guard`),
with the console's stricter rules.

- Bound to a loopback address, requests must name a loopback Host (a page on another site that
  resolves its own name to 127.0.0.1 — DNS rebinding — is refused).
- Bound elsewhere, the command refuses to start without a token of at least 16 characters from an
  environment variable; every request then carries it (``Authorization: Bearer``,
  ``X-Realbench-Token``, or the cookie the first ``?token=`` visit sets, after which the visit is
  redirected to the same address without it). ``?token=`` is read only on a GET or HEAD (a link a
  person opens), never on a POST. Any Host name is answered then: the token is the check.
- Requests that change anything are POSTs with a JSON body (a cross-site form cannot send one);
  other methods than GET, HEAD and POST are refused. Any request that carries an Origin must come
  from this console's own origin: scheme, host AND port. The API answers no request a browser marks
  as cross-site (`Sec-Fetch-Site`), reads included: a fleet read health-checks phones, and the
  video stream is a phone's screen.
- The console has no socket routes: every WebSocket handshake is refused.
- Body size and time limits, header deadlines and connection caps are the shared ones
  (`CONSOLE_LIMITS`, served with `http_guard.server_config`).
"""

from __future__ import annotations

from realbench.errors import ConfigError
from realbench.http_guard import (
    LOOPBACK_NAMES,
    ASGIApp,
    GuardMiddleware,
    GuardRules,
    ServerLimits,
    ServerSecurity,
    is_loopback,
)

# What an operator's page sends: actions, labels, recorder edits. A screenshot never goes up.
CONSOLE_LIMITS = ServerLimits(max_body_bytes=1024 * 1024, max_json_depth=32)
MIN_TOKEN_CHARS = 16
CONSOLE_RULES = GuardRules(
    token_cookie="realbench_console",  # beside a clone server's cookie on the same machine
    token_header="x-realbench-token",
    query_token_redirect=True,
    methods=frozenset({"GET", "HEAD", "POST"}),
    json_always=True,
    cross_site_prefixes=("/api/",),
    websockets=False,
)


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
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(
            "the console token is too short", hint=f"use at least {MIN_TOKEN_CHARS} random characters"
        )
    return token


def console_security(token: str | None, *, loopback: bool, host: str = "") -> ServerSecurity:
    """Loopback Host names (and the bound address, 127.0.0.2 say) when bound to loopback; any Host
    with the token elsewhere."""
    if not loopback:
        if token is None:
            raise ConfigError("a console off loopback needs a token", hint="pass --token-env VAR")
        return ServerSecurity(token=token, allowed_hosts=None)
    bound = {host.strip("[]").lower()} if host and is_loopback(host) else set()
    return ServerSecurity(token=token, allowed_hosts=LOOPBACK_NAMES | bound)


def console_guard(app: ASGIApp, *, token: str | None, loopback: bool, host: str = "") -> GuardMiddleware:
    """The console app behind the shared guard, with the console's rules and limits."""
    security = console_security(token, loopback=loopback, host=host)
    return GuardMiddleware(app, security, CONSOLE_LIMITS, CONSOLE_RULES)
