"""A thin Python client of the rollout service (see `devices.rl.service` and docs/rl.md).

    client = RolloutClient("http://127.0.0.1:8770")
    env = client.make(pack="train_ticketing", task_id="book-ticket")
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step('{"type": "click", "x": 500, "y": 120}')

Errors come back as the RealbenchError subclasses the service raised (EnvNotFound, EpisodeOver,
SnapshotMismatch, ConfigError, WorkerLost...), with the service's message and hint.
"""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np

from devices.rl.errors import ErrorInfo
from devices.rl.transitions import Transition
from realbench.errors import RealbenchError, ServerError
from realbench.http_guard import auth_headers, client_token

Step = tuple[dict[str, Any], float, bool, bool, dict[str, Any]]


def unreachable(base_url: str, exc: httpx.HTTPError) -> ServerError:
    return ServerError(
        f"the rollout service at {base_url} is unreachable: {exc}",
        hint="start it with `realbench rollout-service --port P`",
    )


def answer_of(method: str, path: str, resp: httpx.Response) -> Any:
    """The service's JSON answer, or the RealbenchError it carries."""
    try:
        data = resp.json()
    except ValueError:
        raise ServerError(f"{method} {path}: HTTP {resp.status_code} without a JSON answer") from None
    if resp.status_code >= 400:
        raise error_from(data, resp.status_code)
    return data


def make_body(count: int, pack: str | None, task_id: str | None, fields: dict[str, Any]) -> dict[str, Any]:
    given = {"pack": pack, "task_id": task_id, **fields}
    return {"count": count, **{k: v for k, v in given.items() if v is not None}}


class RolloutClient:
    """Talks to one rollout service. ``image="array"`` decodes screenshots to RGB arrays, ``"bytes"``
    keeps the encoded image."""

    def __init__(
        self, base_url: str, *, timeout: float = 120.0, image: str = "array", token_env: str | None = None
    ) -> None:
        """`token_env` names the environment variable holding the service's token (needed when the
        service listens off loopback); by default the service's own default, REALBENCH_SERVER_TOKEN,
        is sent when it is set."""
        if image not in ("array", "bytes"):
            raise ValueError("image is 'array' or 'bytes'")
        self.base_url = base_url.rstrip("/")
        self.image = image
        headers = auth_headers(client_token(token_env))
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, headers=headers)

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        try:
            resp = self._http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise unreachable(self.base_url, exc) from None
        return answer_of(method, path, resp)

    def make(self, pack: str | None = None, task_id: str | None = None, **fields: Any) -> RemoteEnv:
        return self.make_many(1, pack=pack, task_id=task_id, **fields)[0]

    def make_many(
        self, count: int, pack: str | None = None, task_id: str | None = None, **fields: Any
    ) -> list[RemoteEnv]:
        data = self.request("POST", "/v1/envs", make_body(count, pack, task_id, fields))
        return [RemoteEnv(self, env_id) for env_id in data["env_ids"]]

    def step_batch(self, steps: list[tuple[RemoteEnv, Any]]) -> list[Step | RealbenchError]:
        """Step several environments in one request (they run concurrently on the service)."""
        body = {"steps": [{"env_id": env.env_id, "action": action} for env, action in steps]}
        results = self.request("POST", "/v1/batch/step", body)["results"]
        return [error_from(r) if "error" in r else self.unpack(r) for r in results]

    def reset_batch(
        self, resets: list[tuple[RemoteEnv, int | None]]
    ) -> list[tuple[dict[str, Any], dict[str, Any]] | RealbenchError]:
        body = {"resets": [{"env_id": env.env_id, "seed": seed} for env, seed in resets]}
        results = self.request("POST", "/v1/batch/reset", body)["results"]
        out: list[tuple[dict[str, Any], dict[str, Any]] | RealbenchError] = []
        for r in results:
            if "error" in r:
                out.append(error_from(r))
            else:
                obs, _, _, _, info = self.unpack(r)
                out.append((obs, info))
        return out

    def health(self) -> dict[str, Any]:
        return dict(self.request("GET", "/v1/health"))

    def unpack(self, data: dict[str, Any]) -> Step:
        return unpack_transition(data, self.image)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RolloutClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def unpack_transition(data: dict[str, Any], image: str) -> Step:
    t = Transition.from_json(data)
    shot: Any = t.observation.pixels() if image == "array" else np.frombuffer(t.observation.image, np.uint8)
    obs = {"screenshot": shot, "hierarchy": t.observation.hierarchy}
    return obs, t.reward, t.terminated, t.truncated, t.info


def error_from(data: dict[str, Any], status: int | None = None) -> RealbenchError:
    if isinstance(data, dict) and "error" in data:
        return ErrorInfo(
            type=str(data.get("type") or "RealbenchError"), message=str(data["error"]), hint=data.get("hint")
        ).to_exception()
    return ServerError(f"the rollout service answered HTTP {status}: {str(data)[:200]}")


class RemoteEnv:
    """One environment of the service, with the Gymnasium call shapes."""

    def __init__(self, client: RolloutClient, env_id: str) -> None:
        self.client = client
        self.env_id = env_id

    def _path(self, what: str = "") -> str:
        return f"/v1/envs/{self.env_id}" + (f"/{what}" if what else "")

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        obs, _, _, _, info = self.client.unpack(
            self.client.request("POST", self._path("reset"), {"seed": seed, "options": options})
        )
        return obs, info

    def step(self, action: Any) -> Step:
        return self.client.unpack(self.client.request("POST", self._path("step"), {"action": action}))

    def snapshot(self) -> str:
        """A snapshot id, valid on this service (restore it into any environment of the same clone)."""
        return str(self.client.request("POST", self._path("snapshot"))["snapshot"])

    def restore(self, snapshot: str) -> tuple[dict[str, Any], dict[str, Any]]:
        obs, _, _, _, info = self.client.unpack(
            self.client.request("POST", self._path("restore"), {"snapshot": snapshot})
        )
        return obs, info

    def reward(self) -> dict[str, Any]:
        """The verifier's reward and verdict for the current state."""
        return dict(self.client.request("GET", self._path("reward")))

    def close(self) -> None:
        self.client.request("DELETE", self._path())
