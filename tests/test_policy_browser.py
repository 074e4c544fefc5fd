"""The browser-free training path against the browser env: a policy's episodes played without a
browser, replayed action by action on the browser env (a click at the matching node's bounds
centre), end with the same verdicts. Also the checkpoint agent acting on the browser's hierarchy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")

import devices.rl  # noqa: F401,E402  (registers the Gymnasium ids)
from devices.rl.gym_env import RealbenchEnv  # noqa: E402
from devices.rl.host import acquire_shared_host, release_shared_host  # noqa: E402
from realbench.actions import Click, Key, KeyPress, Terminate, Type, action_to_json  # noqa: E402
from realbench.golden import to_normalised  # noqa: E402
from realbench.hierarchy import Hierarchy  # noqa: E402

pytestmark = pytest.mark.browser

TASK = "buy-item"


@pytest.fixture(scope="module")
def host():
    h = acquire_shared_host()
    yield h
    release_shared_host(h)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A policy trained on the toy task (a few updates; the episodes below need not all succeed)."""
    from devices.rl.policy_train import TrainConfig, train

    out = tmp_path_factory.mktemp("policy") / "trained"
    cfg = TrainConfig(pack="toy", tasks=[TASK], updates=6, group=8, batch_tasks=1, seed=0, eval_every=6)
    train(cfg, out, progress=False)
    return out


def _replay_action(choice: dict[str, Any], hierarchy: Hierarchy, width: int, height: int) -> str:
    kind = choice["kind"]
    if kind == "click":
        same = [
            n
            for n in hierarchy.nodes
            # not the class: the browser names containers by their CSS layout
            if (n.text, n.content_desc, n.short_id) == (choice["text"], choice["desc"], choice["id"])
            and not n.bounds.empty
        ]
        assert len(same) > choice["nth"], (choice, [(n.text, n.short_id) for n in hierarchy.nodes])
        x, y = to_normalised(*same[choice["nth"]].bounds.center, width, height)
        return action_to_json(Click(x=x, y=y))
    if kind == "type":
        return action_to_json(Type(text=choice["text"]))
    if kind == "back":
        return action_to_json(KeyPress(key=Key.BACK))
    return action_to_json(Terminate())


def test_browser_free_episodes_get_the_same_verdicts_in_the_browser(host, trained: Path) -> None:
    from devices.rl.policy_train import Roller, TrainConfig
    from realbench.agents.policy_net import load_checkpoint
    from realbench.taskpack import load_pack

    params, card = load_checkpoint(trained)
    pack = load_pack("taskpacks/toy")
    task = pack.tasks[0]
    roller = Roller(pack, TrainConfig(pack="toy", tasks=[TASK]))
    env = RealbenchEnv("toy", TASK, host=host, screen_cache=False)
    verdicts: list[tuple[bool, bool]] = []
    try:
        # the greedy episode of each instance, and a few sampled ones (successes and failures)
        plays = [(s, None) for s in (0, 1, 2)] + [(s, np.random.default_rng(10 + s)) for s in range(5)]
        for seed, rng in plays:
            free = roller.play(params, task, seed, rng).result
            obs, info = env.reset(seed=seed)
            assert info["instruction"] == roller.start(task, seed, None)[0].instruction
            ended = False
            for choice in free.choices:
                assert not ended, "the browser episode ended before the browser-free one"
                height, width = obs["screenshot"].shape[:2]
                action = _replay_action(choice, Hierarchy(obs["hierarchy"]), width, height)
                obs, _, terminated, truncated, _ = env.step(action)
                ended = terminated or truncated
            browser = env.verdict()
            verdicts.append((free.verdict.success, bool(browser["success"])))
            assert bool(browser["success"]) == free.verdict.success, (seed, free.choices, browser)
    finally:
        env.close()
    assert any(f for f, _ in verdicts), "no episode succeeded: the test compared failures only"
    assert not all(f for f, _ in verdicts), "no episode failed: the test compared successes only"


@pytest.mark.parametrize("task_id", ["settings-push-off", "refund-one-passenger"])
def test_row_labels_read_in_the_browser_are_those_trained_on(host, task_id: str) -> None:
    """A policy trained on the browser-free path reads each control's row labels there; on a phone
    or a clone page it reads them from the dumped hierarchy. Along the golden plan both must give
    every visible control the same words (else what was learned about 消息推送's switch or 王芳's
    退票 would not carry over)."""
    import clones.registry  # noqa: F401
    from devices.rl.policy_env import FreeEpisode
    from devices.rl.policy_prefix import prefix_limit, replay_prefix
    from devices.rl.policy_train import Roller, TrainConfig
    from realbench.agents.policy import views_of
    from realbench.agents.policy_features import Memory, actionable
    from realbench.hierarchy import strip_spacing
    from realbench.taskpack import load_pack

    pack = load_pack("taskpacks/train_ticketing")
    task = next(t for t in pack.tasks if t.id == task_id)
    roller = Roller(pack, TrainConfig(pack="train_ticketing", tasks=[task_id]))
    instance, state = roller.start(task, 0, None)
    env = RealbenchEnv("train_ticketing", task_id, host=host, screen_cache=False)
    labelled, acted = 0, 0
    try:
        obs, _ = env.reset(seed=0)
        for k in range(prefix_limit(task) + 1):
            episode = FreeEpisode(roller.clone, instance, state, context=True)
            replay_prefix(episode, Memory(), instance, k)
            free: dict[tuple[str, str], list[str]] = {}
            for v in episode.views():
                if actionable(v):
                    free.setdefault((v.resource_id, strip_spacing(v.text)), []).append(v.context)
            for v in views_of(Hierarchy(obs["hierarchy"]), context=True):
                if actionable(v):
                    # (the two paths space a label's inline runs differently: "消息中心 2")
                    key = (v.resource_id, strip_spacing(v.text))
                    assert v.context in free.get(key, []), (k, v, free)
                    labelled += bool(v.context)
            if k < prefix_limit(task):
                nxt = FreeEpisode(roller.clone, instance, state, context=True)
                replay_prefix(nxt, Memory(), instance, k + 1)
                # a layout-only step (a scroll) is no choice on the browser-free path
                for choice in nxt.choices[acted:]:
                    height, width = obs["screenshot"].shape[:2]
                    action = _replay_action(choice, Hierarchy(obs["hierarchy"]), width, height)
                    obs, *_ = env.step(action)
                acted = len(nxt.choices)
    finally:
        env.close()
    assert labelled >= 5, "too few labelled controls compared: the check saw almost nothing"
