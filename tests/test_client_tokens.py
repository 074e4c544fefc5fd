"""Clients of a token-guarded server send the token from the same environment variable the server
reads (REALBENCH_SERVER_TOKEN unless told otherwise): headless clone targets (API calls and the
page's own requests), clone-on-phone targets (API calls, and the phone browser's page link) and the
rollout client. Evidence is the server's answer and the clone state it holds."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clones.server import CloneServer
from devices.rl.async_client import AsyncRolloutClient
from devices.rl.client import RolloutClient
from devices.rl.service import RolloutServer
from realbench.episode import run_episode
from realbench.errors import ConfigError, DeviceError, RealbenchError
from realbench.golden import GoldenAgent
from realbench.http_guard import DEFAULT_TOKEN_ENV, LOOPBACK_NAMES, ServerSecurity, client_token
from realbench.outcome import Outcome
from realbench.taskpack import TaskPack, load_pack
from tests.test_server_guard import _NoPool

TOKEN = "guarded-tok-7f3a9c"
ROOT = Path(__file__).resolve().parents[1]


def test_the_token_comes_from_the_servers_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DEFAULT_TOKEN_ENV, raising=False)
    assert client_token() is None  # nothing set: nothing sent (a loopback server needs none)
    with pytest.raises(ConfigError, match="MY_TOKEN"):
        client_token("MY_TOKEN")  # a variable named on purpose must be set
    monkeypatch.setenv(DEFAULT_TOKEN_ENV, TOKEN)
    monkeypatch.setenv("MY_TOKEN", "other")
    assert client_token() == TOKEN and client_token("MY_TOKEN") == "other"


def test_rollout_client_sends_the_default_token(monkeypatch: pytest.MonkeyPatch) -> None:
    security = ServerSecurity(token=TOKEN, allowed_hosts=LOOPBACK_NAMES)
    with RolloutServer(_NoPool(), security=security) as server:  # type: ignore[arg-type]
        monkeypatch.delenv(DEFAULT_TOKEN_ENV, raising=False)
        with pytest.raises(RealbenchError, match="token"):
            RolloutClient(server.url).request("GET", "/v1/health")
        monkeypatch.setenv(DEFAULT_TOKEN_ENV, TOKEN)
        assert RolloutClient(server.url).request("GET", "/v1/health")["ok"]


def test_async_rollout_client_sends_the_default_token(monkeypatch: pytest.MonkeyPatch) -> None:
    async def health() -> Any:
        async with AsyncRolloutClient(server.url) as client:
            return await client.request("GET", "/v1/health")

    security = ServerSecurity(token=TOKEN, allowed_hosts=LOOPBACK_NAMES)
    with RolloutServer(_NoPool(), security=security) as server:  # type: ignore[arg-type]
        monkeypatch.delenv(DEFAULT_TOKEN_ENV, raising=False)
        with pytest.raises(RealbenchError, match="token"):
            asyncio.run(health())
        monkeypatch.setenv(DEFAULT_TOKEN_ENV, TOKEN)
        assert asyncio.run(health())["ok"]


@pytest.mark.browser
def test_a_clone_target_runs_against_a_token_guarded_server(
    monkeypatch: pytest.MonkeyPatch, toy_pack: TaskPack, browser_pool: Any
) -> None:
    from devices.clone_target import CloneTarget

    security = ServerSecurity(token=TOKEN, allowed_hosts=LOOPBACK_NAMES)
    task = toy_pack.tasks[0]
    with CloneServer(security=security) as server:
        monkeypatch.delenv(DEFAULT_TOKEN_ENV, raising=False)
        bare = CloneTarget(toy_pack, server.url, browser=browser_pool)
        try:
            with pytest.raises(DeviceError, match="401"):
                bare.setup(task.instantiate(0, task.clone.setup.clock.date()))
        finally:
            bare.teardown()
        assert len(server.store) == 0  # the server created nothing for a client without the token

        monkeypatch.setenv(DEFAULT_TOKEN_ENV, TOKEN)
        target = CloneTarget(toy_pack, server.url, browser=browser_pool)
        try:
            result = run_episode(task.instantiate(0, task.clone.setup.clock.date()), target, GoldenAgent())
            # the page loaded and its taps reached the server: the clone's state shows the task done
            assert result.outcome is Outcome.SUCCESS, (result.error, result.verdicts)
            assert len(server.store) == 1
        finally:
            target.teardown()


@pytest.fixture(scope="module")
def clone_phone(adb_server_port: int) -> Iterator[tuple[Any, str]]:
    from devices.clone_browser import DEFAULT_CHROMIUM
    from devices.virtual import VirtualPhoneHost

    if not Path(DEFAULT_CHROMIUM).exists():
        pytest.skip("clone screens need Debian's Chromium")
    with VirtualPhoneHost() as host:
        (info,) = host.start(1, screens="clone", drift="none")
        host.adb_connect(adb_server_port)
        yield host, info.serial


@pytest.mark.farm
@pytest.mark.browser
def test_clone_on_phone_runs_against_a_token_guarded_server(
    monkeypatch: pytest.MonkeyPatch, clone_phone: tuple[Any, str]
) -> None:
    from devices.farm.rig_targets import targets_from_rig
    from devices.rig import PhoneSpec, parse_rig

    _, serial = clone_phone
    pack = load_pack(ROOT / "taskpacks" / "bank" / "pack.yaml")
    task = pack.task("transfer_saved_payee")
    spec: dict[str, Any] = {"serial": serial, "profile": "generic-1080x2400", "virtual": True}
    rig = parse_rig({"name": "clone-phone", "phones": [spec]})
    # the farm's clone server reads the token from the variable, and so do its clients
    monkeypatch.setenv(DEFAULT_TOKEN_ENV, TOKEN)
    with targets_from_rig(rig, pack, "clone-on-phone", phones=[PhoneSpec(**spec)]) as targets:
        target = targets[0]
        result = run_episode(task.instantiate(0, target.today(task)), target, GoldenAgent())
        target.after_episode(result)
    assert result.outcome is Outcome.SUCCESS, (result.error, result.verdicts)
