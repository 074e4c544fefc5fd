"""The runner's per-target eligibility (what `run --certified` uses): an episode runs only on a
target allowed to run it, reruns stay on allowed targets, and an episode no live target may run
ends the run instead of circling forever. Evidence: each scripted device's own input record."""

from __future__ import annotations

from pathlib import Path

import pytest

from realbench.golden import GoldenAgent
from realbench.runner import LocalRunner, plan_episodes
from realbench.store import EpisodeKey, RunStore
from realbench.taskpack import parse_pack
from tests.scripted import PACK, ScriptedTarget

pack = parse_pack(PACK)


def _store(tmp_path: Path) -> RunStore:
    store = RunStore(tmp_path)
    store.ensure_run("r", pack="scripted", app="scripted", agent="golden", target="real", config={})
    return store


def _only(grants: dict[str, set[str]]):  # noqa: ANN202 - the runner's eligible callable
    def eligible(target: ScriptedTarget, key: EpisodeKey) -> bool:
        return key.task in grants.get(target.device.serial, set())

    return eligible


@pytest.mark.timeout(60)
def test_each_target_runs_only_what_it_may(tmp_path: Path) -> None:
    store = _store(tmp_path)
    a, b = ScriptedTarget("A"), ScriptedTarget("B")
    keys = plan_episodes(pack, task_ids=["submit", "lost"], repeats=3)
    runner = LocalRunner(
        store,
        "r",
        pack,
        [a, b],
        GoldenAgent,
        progress=False,
        eligible=_only({"A": {"submit"}, "B": {"lost"}}),
    )
    summary = runner.run(keys).data
    assert summary["tasks"]["submit"]["episodes"] + summary["tasks"]["lost"]["episodes"] == 6
    frame = store.episodes_frame()
    assert set(frame[frame["task"] == "submit"]["device_serial"]) == {"A"}
    assert set(frame[frame["task"] == "lost"]["device_serial"]) == {"B"}
    assert a.setups == 3 and b.setups == 3  # each phone set up exactly its own task's episodes


@pytest.mark.timeout(60)
def test_a_rerun_stays_on_the_only_allowed_target(tmp_path: Path) -> None:
    store = _store(tmp_path)
    dead, idle = ScriptedTarget("dead", fail_after=0), ScriptedTarget("idle")
    keys = plan_episodes(pack, task_ids=["submit"], repeats=1)
    runner = LocalRunner(
        store,
        "r",
        pack,
        [dead, idle],
        GoldenAgent,
        max_attempts=2,
        progress=False,
        eligible=_only({"dead": {"submit"}}),
    )
    summary = runner.run(keys).data
    assert summary["outcomes"] == {"env_invalid": 2}
    assert dead.setups == 2 and idle.setups == 0  # the other phone never took a task it may not run


@pytest.mark.timeout(60)
def test_an_episode_no_target_may_run_is_not_run(tmp_path: Path) -> None:
    store = _store(tmp_path)
    a = ScriptedTarget("A")
    keys = plan_episodes(pack, task_ids=["submit", "lost"], repeats=1)
    summary = (
        LocalRunner(store, "r", pack, [a], GoldenAgent, progress=False, eligible=_only({"A": {"submit"}}))
        .run(keys)
        .data
    )
    assert set(summary["tasks"]) == {"submit"}
    assert set(store.episodes_frame()["task"]) == {"submit"} and a.setups == 1
