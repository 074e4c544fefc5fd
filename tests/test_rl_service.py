"""The rollout service end to end with its thin client (a real uvicorn on a free port), its error
answers, and several trainers sharing it."""

from __future__ import annotations

import threading
from datetime import date

import numpy as np
import pytest
from typer.testing import CliRunner

from devices.rl.client import RolloutClient
from devices.rl.errors import EnvNotFound, EpisodeOver, SnapshotMismatch
from devices.rl.pool import EnvPool
from devices.rl.service import RolloutServer
from realbench.errors import ActionError, ConfigError
from realbench.golden import GoldenAgent
from realbench.taskpack import load_pack
from tests.rl_support import OTHER_PACK, golden_action_for, write_pack

pytestmark = pytest.mark.browser

CLICK_LIST = '{"type": "click", "x": 500, "y": 180}'


@pytest.fixture(scope="module")
def packs_root(tmp_path_factory):
    return tmp_path_factory.mktemp("packs")


@pytest.fixture(scope="module")
def packs(packs_root):
    root = packs_root
    return {"toy": str(write_pack(root / "toy")), "other": str(write_pack(root / "other", OTHER_PACK))}


@pytest.fixture(scope="module")
def server(other_toy, packs_root):
    # the test packs' folder is allow-listed
    with EnvPool(backend="inline") as pool, RolloutServer(pool, pack_dirs=(packs_root,)) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server):
    with RolloutClient(server.url, image="bytes") as c:
        yield c


def test_golden_rollout_over_http_earns_reward_one(client, packs):
    env = client.make(pack=packs["toy"], task_id="buy-item")
    obs, info = env.reset(seed=4)
    assert bytes(obs["screenshot"][:2]) == b"\xff\xd8" and "商品列表" in obs["hierarchy"]
    task = load_pack(packs["toy"]).task("buy-item")
    agent = GoldenAgent()
    agent.reset(task.instantiate(info["seed"], date(2026, 3, 2)))
    assert agent.params["item"] in info["instruction"]
    for _ in range(6):
        action = golden_action_for(agent, obs["screenshot"].tobytes(), obs["hierarchy"])
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            break
    assert (reward, terminated, info["outcome"]) == (1.0, True, "success")
    verdict = env.reward()
    assert verdict["reward"] == 1.0 and verdict["verdict"]["success"] is True
    assert verdict["verdict"]["reason"] == "bought the item"
    env.close()
    with pytest.raises(EnvNotFound):
        env.step(CLICK_LIST)


def test_snapshot_restore_and_batch_step(client, packs):
    a, b = client.make_many(2, pack=packs["toy"], task_id="buy-item", screen_cache=False)
    a.reset(seed=1)
    b.reset(seed=2)
    a.step(CLICK_LIST)
    snap = a.snapshot()
    obs_b, info_b = b.restore(snap)
    obs_a, _ = a.restore(snap)
    assert (
        np.array_equal(obs_a["screenshot"], obs_b["screenshot"]) and obs_a["hierarchy"] == obs_b["hierarchy"]
    )
    assert info_b["step"] == 1 and info_b["seed"] == 1
    results = client.step_batch([(a, '{"type": "key", "key": "back"}'), (b, CLICK_LIST)])
    assert results[0][4]["step"] == results[1][4]["step"] == 2
    assert "商品00" not in results[0][0]["hierarchy"] and "商品00" not in results[1][0]["hierarchy"]
    for env in (a, b):
        env.close()


def test_errors_are_4xx_with_a_message_and_leave_other_envs_alone(client, server, packs):
    env = client.make(pack=packs["toy"], task_id="buy-item")
    other = client.make(pack=packs["other"], task_id="buy-item")
    with pytest.raises(EpisodeOver, match="reset"):
        env.step(CLICK_LIST)
    env.reset(seed=0)
    with pytest.raises(ActionError, match="not int"):
        env.step(7)
    with pytest.raises(ConfigError, match="action"):
        client.request("POST", f"/v1/envs/{env.env_id}/step", {})
    with pytest.raises(EnvNotFound):
        client.request("POST", "/v1/envs/env-9999/step", {"action": CLICK_LIST})
    with pytest.raises(SnapshotMismatch, match="no snapshot"):
        env.restore("snap-nope")
    other.reset(seed=0)
    with pytest.raises(SnapshotMismatch, match="toy_other"):
        env.restore(other.snapshot())
    with pytest.raises(ConfigError, match="not available on this service"):
        client.make(pack="/nonexistent/pack.yaml")
    with pytest.raises(ConfigError, match="unknown env"):
        client.request("POST", "/v1/envs", {"env": "realbench/nope-v1"})
    import httpx

    raw = httpx.post(
        f"{server.url}/v1/envs/{env.env_id}/step",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert raw.status_code == 400 and "JSON" in raw.json()["error"]
    assert httpx.get(f"{server.url}/v1/envs/env-9999/reward").status_code == 404
    # a malformed action inside the action space is a format error, not an HTTP error
    _, reward, terminated, _, info = env.step('{"type": "tap"}')
    assert not terminated and info["format_error"] and reward == 0.0
    results = client.step_batch([(env, CLICK_LIST), (type(env)(client, "env-424242"), CLICK_LIST)])
    assert isinstance(results[1], EnvNotFound)
    assert results[0][4]["step"] == 2 and "商品00" in results[0][0]["hierarchy"]
    assert client.health()["ok"] is True
    env.close()
    other.close()


def test_trainers_share_one_service(server, packs):
    errors: list[BaseException] = []
    finals: list[dict] = []

    def trainer(seed: int) -> None:
        try:
            with RolloutClient(server.url) as c:
                env = c.make(pack=packs["toy"], task_id="buy-item")
                obs, _ = env.reset(seed=seed)
                assert obs["screenshot"].shape == (995, 448, 3)
                for action in (CLICK_LIST, '{"type": "key", "key": "back"}', '{"type": "terminate"}'):
                    obs, reward, terminated, truncated, info = env.step(action)
                finals.append(info)
                env.close()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=trainer, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    assert [f["outcome"] for f in finals] == ["failure"] * 3
    assert {f["env_id"] for f in finals} and len({f["seed"] for f in finals}) == 3


def test_cli_command_is_registered():
    from realbench.cli import app

    result = CliRunner().invoke(app, ["rollout-service", "--help"])
    assert result.exit_code == 0
    assert "--workers" in result.output and "--backend" in result.output
