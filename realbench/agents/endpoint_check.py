"""Is a model served where a command will call it? Asked once, before the first request.

A wrong URL, a missing or wrong API key or a wrong model name would otherwise turn every episode
(or every judge request) into an unscored failure; here each becomes one `PreflightError` line.
"""

from __future__ import annotations

import time
from typing import Any

from realbench.agents.client import NO_KEY, ChatEndpoint
from realbench.errors import ModelError, PreflightError

CHECK_TIMEOUT_S = 10.0
WAIT_POLL_S = 0.5
START_HINT = (
    "start one with `realbench serve-model MODEL --name NAME` (or, without a GPU, the test fake: "
    "`python -m realbench.agents.fake_server --port 8000 --model NAME`) and check the URL ends in /v1"
)


def check_served(
    base_url: str,
    model: str | None,
    *,
    api_key_env: str | None = None,
    what: str = "--model",
    wait_s: float = 0.0,
) -> list[str]:
    """The models `base_url` lists (GET /models, with the API key); raises PreflightError when it
    does not answer (after trying for `wait_s` seconds), refuses the key, or does not list `model`."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return _check_once(base_url, model, api_key_env=api_key_env, what=what)
        except _NoAnswer as exc:
            if time.monotonic() >= deadline:
                raise PreflightError(exc.message, hint=exc.hint) from None
            time.sleep(WAIT_POLL_S)


class _NoAnswer(PreflightError):
    """Nothing listens at the URL (yet)."""


def _check_once(base_url: str, model: str | None, *, api_key_env: str | None, what: str) -> list[str]:
    import httpx

    endpoint = ChatEndpoint(base_url=base_url, model=model or "?", api_key_env=api_key_env)
    url = endpoint.display_url.rstrip("/") + "/models"
    try:
        key = endpoint.resolve_key()
    except ModelError as exc:
        raise PreflightError(exc.message, hint=exc.hint) from None
    headers = {"Authorization": f"Bearer {key}"} if key != NO_KEY else {}
    try:
        response = httpx.get(base_url.rstrip("/") + "/models", headers=headers, timeout=CHECK_TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise _NoAnswer(
            f"no model endpoint answers at {url}: {type(exc).__name__}", hint=START_HINT
        ) from None
    if response.status_code in (401, 403):
        raise PreflightError(
            f"the endpoint at {url} refused the API key (HTTP {response.status_code})",
            hint="export the key the server expects and name it with --api-key-env",
        )
    try:
        response.raise_for_status()
        data: Any = response.json()
        models = [m.get("id", "") for m in data.get("data", []) if isinstance(m, dict)]
    except (httpx.HTTPError, ValueError, AttributeError):
        raise PreflightError(
            f"{url} is not an OpenAI-compatible model list (HTTP {response.status_code})", hint=START_HINT
        ) from None
    if model is not None and model not in models:
        raise PreflightError(
            f"{what} {model!r} is not served at {endpoint.display_url}: it serves {', '.join(models) or 'nothing'}",
            hint="pass a name it lists (`realbench serve-model --name` sets the served name)",
        )
    return models
