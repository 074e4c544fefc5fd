"""A rerun of a finished run brings up no browser, clone server or phone: every planned episode is
already in the store, so nothing could reach a target. A run with one episode left starts them as
before, and a given-up episode that `--retry-given-up` reopens counts as left.

Browser-free: the target factory is replaced by one that records that it was asked for targets
(and fails, so nothing runs); the store is filled as the runner fills it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from devices import pack_run
from devices.pack_run import run_pack
from realbench.outcome import Outcome
from realbench.run_config import RunConfig
from realbench.runner import default_run_id, plan_episodes
from realbench.store import RunStore
from realbench.taskpack import load_pack
from tests.store_support import episode_result

TOY = Path(__file__).resolve().parents[1] / "taskpacks" / "toy"


class TargetsAsked(Exception):
    """Raised by the fake target factory: the run wanted targets."""


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []

    @contextmanager
    def fake_clone_targets(*_args: Any, **_kwargs: Any) -> Iterator[list[Any]]:
        calls.append("clone")
        raise TargetsAsked
        yield []  # pragma: no cover - never reached

    monkeypatch.setattr(pack_run, "clone_targets", fake_clone_targets)
    return calls


def stored_run(out: Path, repeats: int, *, give_up_first: bool = False) -> int:
    """A clone run of the toy pack with every episode stored (the first given up when asked)."""
    pack = load_pack(TOY)
    keys = plan_episodes(pack, repeats=repeats)
    run_id = default_run_id("golden", "clone")
    with RunStore(out, writer="test") as store:
        store.ensure_run(run_id, pack=pack.app, app=pack.app, agent="golden", target="clone", config={})
        for i, key in enumerate(keys):
            if give_up_first and i == 0:
                for attempt in range(3):
                    failed = episode_result(key.task, key.seed)
                    failed.outcome = Outcome.ENV_INVALID
                    store.write_episode(run_id, key, attempt, pack.app, failed)
                continue
            store.write_episode(run_id, key, 0, pack.app, episode_result(key.task, key.seed))
    return len(keys)


def config(out: Path, repeats: int, **extra: Any) -> RunConfig:
    return RunConfig(
        pack=TOY, out=out, target="clone", agent="golden", repeats=repeats, progress=False, **extra
    )


def test_a_finished_run_reruns_without_starting_targets(tmp_path: Path, asked: list[str]) -> None:
    episodes = stored_run(tmp_path / "store", repeats=2)
    summary = run_pack(config(tmp_path / "store", repeats=2))
    assert asked == []
    assert summary["episodes"] == episodes and summary["not_run"] == 0
    assert (tmp_path / "store" / "summary.json").exists()


def test_one_episode_left_starts_the_targets(tmp_path: Path, asked: list[str]) -> None:
    stored_run(tmp_path / "store", repeats=1)
    with pytest.raises(TargetsAsked):
        run_pack(config(tmp_path / "store", repeats=2))  # repeat 1 of every task is new
    assert asked == ["clone"]


def test_a_given_up_episode_reopened_by_retry_starts_the_targets(tmp_path: Path, asked: list[str]) -> None:
    stored_run(tmp_path / "store", repeats=1, give_up_first=True)
    run_pack(config(tmp_path / "store", repeats=1))  # given up: final without --retry-given-up
    assert asked == []
    with pytest.raises(TargetsAsked):
        run_pack(config(tmp_path / "store", repeats=1, retry_given_up=True))
    assert asked == ["clone"]
