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


def test_the_curriculum_moves_back_only_from_its_start_and_only_on_success() -> None:
    from devices.rl.policy_prefix import ADVANCE_AT, Curriculum

    task = next(t for t in load_pack("taskpacks/toy").tasks if t.id == "buy-item")
    c = Curriculum()
    assert c.start(task) == 2  # one step before the end
    c.record(task, 2, ADVANCE_AT - 0.01)
    assert c.start(task) == 2
    c.record(task, 1, 1.0)  # a group from another start says nothing about this one
    assert c.start(task) == 2
    c.record(task, 2, ADVANCE_AT)
    assert c.start(task) == 1
    c.record(task, 1, 1.0)
    c.record(task, 0, 1.0)
    assert c.start(task) == 0


@pytest.mark.slow
def test_curriculum_training_walks_back_and_resumes_to_the_same_weights(tmp_path: Path) -> None:
    from devices.rl.policy_train import train
    from realbench.agents.policy_net import load_checkpoint

    cfg = dict(
        pack="toy", tasks=["buy-item"], group=4, batch_tasks=1, seed=3, eval_every=100, prefix_starts=1.0
    )
    whole = train(TrainConfig(updates=6, **cfg), tmp_path / "whole", progress=False)
    # the last step of buy-item is found by sampling, so the start leaves the end of the plan
    assert whole.curriculum["buy-item"] < 2
    train(TrainConfig(updates=3, **cfg), tmp_path / "split", progress=False)
    split = train(TrainConfig(updates=6, **cfg), tmp_path / "split", progress=False)
    assert split.curriculum == whole.curriculum
    assert load_checkpoint(tmp_path / "split")[1].weights_sha256 == whole.card.weights_sha256


def _sha_after(tmp_path: Path, name: str, **options: object) -> str:
    from devices.rl.policy_train import train

    cfg = TrainConfig(
        pack="toy", tasks=["buy-item"], group=4, batch_tasks=1, seed=2, eval_every=100, **options
    )
    return train(cfg, tmp_path / name, progress=False).card.weights_sha256


def test_the_entropy_bonus_reaches_groups_without_a_reward_spread_only_when_asked(tmp_path: Path) -> None:
    """With one step per episode buy-item (three steps) always fails at progress 0, so every group's
    rewards are equal: by default nothing moves the weights; with `entropy_all` the bonus does."""
    from realbench.agents.policy_net import weights_hash

    start = weights_hash(init_params(PolicyShape(), np.random.default_rng(2)))
    assert _sha_after(tmp_path, "plain", updates=2, max_steps=1) == start
    assert _sha_after(tmp_path, "all", updates=2, max_steps=1, entropy_all=True) != start


def test_the_curve_records_the_weights_a_shorter_rerun_reaches(tmp_path: Path) -> None:
    """What the committed checkpoints' reproduction test relies on: the first N updates of a long
    run are a run of N updates (only --updates and --eval-every differ), and the curve says which
    weights they reached."""
    import json

    from devices.rl.policy_train import CURVE_JSON

    long = _sha_after(
        tmp_path, "long", updates=4, prefix_starts=0.75, prefix_temperature=1.0, entropy_all=True
    )
    short = _sha_after(
        tmp_path, "short", updates=2, prefix_starts=0.75, prefix_temperature=1.0, entropy_all=True
    )
    points = json.loads((tmp_path / "long" / CURVE_JSON).read_text(encoding="utf-8"))["points"]
    by_update = {p["update"]: p["weights_sha256"] for p in points}
    assert by_update[2] == short and by_update[4] == long != short
