"""Clone environments fed raw model text (`action_format=`), over HTTP with the async client."""

from __future__ import annotations

import asyncio
from datetime import date

import pytest

from devices.rl.async_client import AsyncRolloutClient
from devices.rl.pool import EnvPool
from devices.rl.service import RolloutServer
from realbench.actions import action_from_json
from realbench.agents.formats import get_format
from realbench.agents.images import ImageSize, target_size
from realbench.golden import GoldenAgent
from realbench.observation import Screenshot
from realbench.taskpack import load_pack
from tests.rl_support import golden_action_for, write_pack

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def packs_root(tmp_path_factory):
    return tmp_path_factory.mktemp("packs")


@pytest.fixture(scope="module")
def pack(packs_root):
    return str(write_pack(packs_root / "toy"))


@pytest.fixture(scope="module")
def server(packs_root):
    with EnvPool(backend="inline") as pool, RolloutServer(pool, pack_dirs=(packs_root,)) as srv:
        yield srv


@pytest.mark.parametrize("fmt_name", ["ui-tars", "qwen-mobile", "qwen3-mobile"])
def test_golden_plan_written_as_model_text_earns_the_reward(server, pack, fmt_name):
    fmt = get_format(fmt_name)

    async def rollout() -> tuple[float, dict]:
        async with AsyncRolloutClient(server.url, image="bytes") as client:
            env = await client.make(pack=pack, task_id="buy-item", action_format=fmt_name)
            obs, info = await env.reset(seed=4)
            shot = Screenshot.from_bytes(obs["screenshot"].tobytes())
            # the service says what size the model saw: the format's own resize of the screenshot
            assert info["image_size"] == list(
                (lambda s: (s.width, s.height))(target_size(shot.width, shot.height, fmt.image_policy()))
            )
            agent = GoldenAgent()
            agent.reset(load_pack(pack).task("buy-item").instantiate(info["seed"], date(2026, 3, 2)))
            reward = 0.0
            for _ in range(8):
                action = action_from_json(
                    golden_action_for(agent, obs["screenshot"].tobytes(), obs["hierarchy"])
                )
                text = fmt.render(action, ImageSize(*info["image_size"]), thought="following the plan")
                obs, reward, terminated, truncated, info = await env.step(text)
                assert info["format_error"] is None, (text, info["format_error"])
                if terminated or truncated:
                    break
            await env.close()
            return reward, info

    reward, info = asyncio.run(rollout())
    assert reward == 1.0 and info["outcome"] == "success"


def test_unparseable_model_text_is_a_format_error(server, pack):
    async def go() -> dict:
        async with AsyncRolloutClient(server.url, image="bytes") as client:
            env = await client.make(pack=pack, task_id="buy-item", action_format="ui-tars")
            await env.reset(seed=1)
            _, reward, _, _, info = await env.step("Thought: I will tap it\nAction: tap the button")
            await env.close()
            return info

    info = asyncio.run(go())
    assert info["format_error"] and "no action call" in info["format_error"]


def test_unknown_action_format_is_refused(server, pack):
    from realbench.errors import RealbenchError

    async def go() -> None:
        async with AsyncRolloutClient(server.url) as client:
            await client.make(pack=pack, action_format="nope")

    with pytest.raises(RealbenchError, match="nope"):
        asyncio.run(go())


def test_ui_tars_type_with_newline_submits_the_form(server, pack):
    """type(content='…\\n') is Type then Enter: the search form is submitted (the screen's own
    search history shows the query afterwards)."""
    from realbench.actions import Click
    from realbench.golden import to_normalised
    from realbench.hierarchy import Hierarchy, Selector

    fmt = get_format("ui-tars")

    async def go() -> tuple[dict, str]:
        async with AsyncRolloutClient(server.url, image="bytes") as client:
            env = await client.make(pack=pack, task_id="search", action_format="ui-tars")
            obs, info = await env.reset(seed=0)
            shot = Screenshot.from_bytes(obs["screenshot"].tobytes())
            field = Hierarchy(obs["hierarchy"]).find_one(Selector(resource_id="query"))
            assert field is not None
            x, y = to_normalised(*field.bounds.center, shot.width, shot.height)
            size = ImageSize(*info["image_size"])
            obs, _, _, _, info = await env.step(fmt.render(Click(x=x, y=y), size, thought="the search box"))
            assert info["format_error"] is None
            obs, _, _, _, info = await env.step("Thought: search for toys\nAction: type(content='积木\\n')")
            await env.close()
            return info, obs["hierarchy"]

    info, xml = asyncio.run(go())
    assert info["action"] == {"type": "type", "text": "积木"}
    assert info["then"] == [{"type": "key", "key": "enter"}]
    history = Hierarchy(xml).find_one(Selector(resource_id="history"))
    assert history is not None and "积木" in history.all_text()
