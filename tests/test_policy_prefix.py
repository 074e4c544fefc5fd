"""Golden-prefix starts (devices/rl/policy_prefix.py): the replayed prefix reaches the states the
golden plan reaches, on the browser-free path, for every task the policy trains on; the policy's
own steps start after it; and a configuration without prefix starts is the one it was before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from clones.base import get_clone  # noqa: E402
from clones.dom_plan import initial_state, instantiate  # noqa: E402
from devices.rl.policy_env import FreeEpisode  # noqa: E402
from devices.rl.policy_prefix import prefix_limit, replay_prefix  # noqa: E402
from devices.rl.policy_train import Roller, TrainConfig, train_command, trainable  # noqa: E402
from realbench.agents.policy_features import Kind, Memory  # noqa: E402
from realbench.agents.policy_net import PolicyShape, init_params  # noqa: E402
from realbench.taskpack import load_pack  # noqa: E402


@pytest.mark.parametrize("pack_dir", ["taskpacks/train_ticketing", "taskpacks/bank"])
def test_the_whole_golden_plan_replayed_as_a_prefix_succeeds(pack_dir: str) -> None:
    """If a replayed prefix drifted from the plan, training would start groups on states the plan
    never reaches; replaying all of it must therefore pass the verifier, task by task."""
    pack = load_pack(pack_dir)
    clone = get_clone(pack.clone)
    tasks = [t for t in pack.tasks if trainable(t)]
    assert len(tasks) >= 20
    failed = []
    for task in tasks:
        instance = instantiate(task, 0)
        episode = FreeEpisode(clone, instance, initial_state(clone, instance))
        replayed = replay_prefix(episode, Memory(), instance, len(task.golden))
        if not episode.done:
            episode.act(Kind.TERMINATE)
        if replayed < prefix_limit(task) or not episode.result().verdict.success:
            failed.append((task.id, replayed, prefix_limit(task)))
    assert not failed


def test_prefix_limit_leaves_the_last_step_to_the_policy() -> None:
    pack = load_pack("taskpacks/toy")
    task = next(t for t in pack.tasks if t.id == "buy-item")
    assert len(task.golden) == 3 and prefix_limit(task) == 2
    for t in load_pack("taskpacks/train_ticketing").tasks:
        assert 0 <= prefix_limit(t) <= max(0, len(t.golden) - 1)


def test_a_prefixed_episode_starts_where_the_plan_left_it() -> None:
    """The replayed steps are in the policy's memory and count against its step budget, but they
    are not among the rollout's own (trained-on) steps; with all but the last step replayed, the
    greedy untrained policy has one decision to make on the item page."""
    pack = load_pack("taskpacks/toy")
    task = next(t for t in pack.tasks if t.id == "buy-item")
    cfg = TrainConfig(pack="toy", tasks=["buy-item"], max_steps=3)
    roller = Roller(pack, cfg)
    params = init_params(cfg.shape, np.random.default_rng(0))
    plain = roller.play(params, task, 5, None)
    prefixed = roller.play(params, task, 5, None, prefix=2)
    assert len(prefixed.steps) == 1  # budget 3, two spent by the prefix
    assert len(plain.steps) >= 1
    names = {c.node.text for c in prefixed.steps[0].candidates if c.node is not None}
    item = instantiate(task, 5).params["item"]
    assert f"商品{item}" not in names  # not the list screen any more: the prefix opened the item
    assert [c["kind"] for c in prefixed.result.choices][:2] == ["click", "click"]


def test_prefix_starts_off_keeps_the_command_and_on_spells_it() -> None:
    out = Path("out")
    base = dict(pack="toy", tasks=["buy-item"])
    assert "--prefix-starts" not in train_command(TrainConfig(**base), out)
    assert "--prefix-starts 0.5" in train_command(TrainConfig(prefix_starts=0.5, **base), out)
    with pytest.raises(ValueError):
        TrainConfig(prefix_starts=1.5, **base)
    assert PolicyShape() == TrainConfig(**base).shape
