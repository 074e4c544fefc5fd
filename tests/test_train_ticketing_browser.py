"""Every golden plan of the train-ticketing pack, run by the golden agent on the headless clone
(one clone server and one browser for the module)."""

from __future__ import annotations

import pytest

from realbench.outcome import Outcome
from tests.tt_support import PACK

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def target(clone_server, browser_pool):
    from devices.clone_target import CloneTarget

    t = CloneTarget(PACK, clone_server.url, browser=browser_pool, scale=1.0)
    try:
        yield t
    finally:
        t.teardown()


@pytest.mark.parametrize("task_id", [t.id for t in PACK.tasks])
def test_golden_plan_succeeds_in_the_browser(target, task_id):
    from realbench.episode import run_episode
    from realbench.golden import GoldenAgent

    task = PACK.task(task_id)
    instance = task.instantiate(0, task.clone.setup.clock.date())
    result = run_episode(instance, target, GoldenAgent())
    assert result.outcome is Outcome.SUCCESS, (
        result.error,
        [v.reason for v in result.verdicts],
        result.answer,
    )
    assert all(not v.side_effects for v in result.verdicts)
