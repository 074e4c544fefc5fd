"""An asyncio client of the rollout service, for trainers whose rollout loop is a coroutine
(TRL's and verl's agent loops): the same calls as `RolloutClient`, awaited.

    async with AsyncRolloutClient("http://127.0.0.1:8770") as client:
        env = await client.make(pack="train_ticketing", task_id="book-ticket", action_format="ui-tars")
        obs, info = await env.reset(seed=0)
        obs, reward, terminated, truncated, info = await env.step("Action: click(point='<point>10 20</point>')")
"""

from __future__ import annotations

from typing import Any

import httpx

from devices.rl.client import Step, answer_of, error_from, make_body, unpack_transition, unreachable
from realbench.errors import RealbenchError
from realbench.http_guard import auth_headers, client_token


class AsyncRolloutClient:
    def __init__(
        self, base_url: str, *, timeout: float = 120.0, image: str = "array", token_env: str | None = None
    ) -> None:
        """`token_env`: as in `RolloutClient` (REALBENCH_SERVER_TOKEN is sent when it is set)."""
        if image not in ("array", "bytes"):
            raise ValueError("image is 'array' or 'bytes'")
        self.base_url = base_url.rstrip("/")
        self.image = image
        headers = auth_headers(client_token(token_env))
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout, headers=headers)

    async def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        try:
            resp = await self._http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise unreachable(self.base_url, exc) from None
        return answer_of(method, path, resp)

    async def make(
        self, pack: str | None = None, task_id: str | None = None, **fields: Any
    ) -> AsyncRemoteEnv:
        return (await self.make_many(1, pack=pack, task_id=task_id, **fields))[0]

    async def make_many(
        self, count: int, pack: str | None = None, task_id: str | None = None, **fields: Any
    ) -> list[AsyncRemoteEnv]:
        data = await self.request("POST", "/v1/envs", make_body(count, pack, task_id, fields))
        return [AsyncRemoteEnv(self, env_id) for env_id in data["env_ids"]]

    async def step_batch(self, steps: list[tuple[AsyncRemoteEnv, Any]]) -> list[Step | RealbenchError]:
        body = {"steps": [{"env_id": env.env_id, "action": action} for env, action in steps]}
        results = (await self.request("POST", "/v1/batch/step", body))["results"]
        return [error_from(r) if "error" in r else self.unpack(r) for r in results]

    async def health(self) -> dict[str, Any]:
        return dict(await self.request("GET", "/v1/health"))

    def unpack(self, data: dict[str, Any]) -> Step:
        return unpack_transition(data, self.image)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncRolloutClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncRemoteEnv:
    """One environment of the service, with the Gymnasium call shapes, awaited."""

    def __init__(self, client: AsyncRolloutClient, env_id: str) -> None:
        self.client = client
        self.env_id = env_id

    def _path(self, what: str = "") -> str:
        return f"/v1/envs/{self.env_id}" + (f"/{what}" if what else "")

    async def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        data = await self.client.request("POST", self._path("reset"), {"seed": seed, "options": options})
        obs, _, _, _, info = self.client.unpack(data)
        return obs, info

    async def step(self, action: Any) -> Step:
        return self.client.unpack(await self.client.request("POST", self._path("step"), {"action": action}))

    async def reward(self) -> dict[str, Any]:
        return dict(await self.client.request("GET", self._path("reward")))

    async def close(self) -> None:
        await self.client.request("DELETE", self._path())
