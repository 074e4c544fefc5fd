"""Browser tier: every bank task's golden plan runs on the headless clone and succeeds.

One clone server and one shared Chromium for the whole module; each episode goes through the real
episode loop (boundary detection included) with the golden agent.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from realbench.golden import GoldenAgent
from realbench.outcome import EndReason, Outcome
from realbench.taskpack import load_pack

pytestmark = pytest.mark.browser

PACK = load_pack(Path(__file__).resolve().parents[1] / "taskpacks" / "bank")


@pytest.fixture(scope="module")
def target() -> Iterator[Any]:
    from devices.pack_run import clone_targets

    # scale 1 (412x915 px screenshots): the plans use selectors, so pixels only cost time here
    with clone_targets(PACK, workers=1, scale=1.0) as targets:
        yield targets[0]


def test_every_golden_plan_succeeds_on_the_headless_clone(target: Any) -> None:
    from realbench.episode import run_episode

    failures: list[str] = []
    for task in PACK.tasks:
        instance = task.instantiate(0, task.clone.setup.clock.date())
        result = run_episode(instance, target, GoldenAgent())
        if result.outcome is not Outcome.SUCCESS:
            reason = result.verdicts[0].reason if result.verdicts else result.error
            last = result.steps[-1].error if result.steps else None
            failures.append(f"{task.id}: {result.outcome} ({result.end_reason}) {reason} {last or ''}")
        elif task.real.boundary:
            # a money task must end at its commit boundary, with the tap delivered on the clone
            assert result.end_reason is EndReason.BOUNDARY, task.id
    assert failures == [], "\n".join(failures)
