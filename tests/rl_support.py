"""A toy task pack for the RL environment tests (on the toy clone, clones/toy)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import yaml

from clones.toy import TOY
from devices.rl import cdp
from devices.rl.config import EnvConfig
from devices.rl.host import EnvHost, ResetRequest
from realbench.golden import GoldenAgent
from realbench.observation import Observation, Screenshot
from realbench.taskpack import parse_pack

TOY_PACK = {
    "app": "toy",
    "clone": TOY,
    "real_app": {"package": "com.example.toyshop", "name": "玩具店"},
    "tasks": [
        {
            "id": "buy-item",
            "instruction": "购买商品{item}",
            "params": {"item": {"type": "choice", "values": ["02", "03", "05"]}},
            "difficulty": 1,
            "max_steps": 8,
            "clone": {
                "setup": {
                    "seed": 11,
                    "patch": {
                        "world": {
                            "items": [
                                {"id": i, "name": f"商品{i:02d}", "price": 10 + i, "stock": 5}
                                for i in range(40)
                            ]
                        }
                    },
                },
                "verifier": {"name": "bought"},
                "side_effect_checks": ["one_order"],
            },
            "real": {"boundary": [{"resource_id": "buy"}]},
            "judge": {"rubric": "an order for the item exists"},
            "golden": [
                {"tap": {"text": "商品列表"}},
                {"tap": {"text": "商品{item}"}},
                {"tap": {"resource_id": "buy"}},
            ],
        },
        {
            "id": "search",
            "instruction": "搜索玩具",
            "difficulty": 1,
            "clone": {"verifier": {"name": "bought"}},
            "judge": {"rubric": "n/a"},
            "golden": [{"terminate": "success"}],
        },
    ],
}

OTHER_PACK = {**TOY_PACK, "app": "toy-other", "clone": "toy_other"}


def write_pack(folder: Path, data: dict = TOY_PACK) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "pack.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False), encoding="utf-8")
    parse_pack(data)  # fail here, not in a worker, if the fixture itself is wrong
    return path


def golden_action(agent: GoldenAgent, observation) -> str:
    """The golden plan's next action as Action JSON, for an EnvObservation or an observation dict."""
    from realbench.actions import action_to_json

    obs = Observation(
        screenshot=Screenshot(
            data=observation.image,
            width=observation.width,
            height=observation.height,
            format=observation.format,
        ),
        hierarchy=observation.hierarchy,
    )
    return action_to_json(agent.next_action(obs))


def golden_action_for(agent: GoldenAgent, image: bytes, hierarchy: str | None) -> str:
    """The golden plan's next action for an encoded screenshot and its hierarchy."""
    from realbench.actions import action_to_json

    return action_to_json(
        agent.next_action(Observation(screenshot=Screenshot.from_bytes(image), hierarchy=hierarchy))
    )


def one_env(host: EnvHost, pack: str) -> int:
    """One environment of `pack`'s buy-item task (JPEG observations), reset with seed 1."""
    [env_id] = host.create([EnvConfig(pack=pack, task_id="buy-item", image="jpeg")])
    host.reset([ResetRequest(env_id, seed=1)])
    return env_id


@contextlib.contextmanager
def playwright_path() -> Iterator[None]:
    """The direct DevTools path off for what runs inside (`cdp.use_playwright`), on again after."""
    cdp.use_playwright()
    try:
        yield
    finally:
        cdp.ENABLED = True
