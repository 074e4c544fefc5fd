"""A small run store to attack: three stored episodes of one run (the store tests' common setup),
and the CLI run as a user runs it (a separate process), for the tests that read its exit and stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from realbench.episode import EndReason, EpisodeResult, StepRecord
from realbench.outcome import Outcome, Verdict
from realbench.store import EpisodeKey, RunStore

ROOT = Path(__file__).resolve().parent.parent
RUN = "golden@clone"
KEYS = [EpisodeKey("t1", 0, 0), EpisodeKey("t1", 1, 1), EpisodeKey("t2", 0, 0)]


def episode_result(task: str, seed: int) -> EpisodeResult:
    """A successful one-step episode of `task`, as the runner would store it."""
    return EpisodeResult(
        task_id=task,
        seed=seed,
        instruction=f"do {task}",
        params={"n": seed},
        agent="golden",
        target="clone",
        device={"kind": "clone", "serial": "page-0"},
        outcome=Outcome.SUCCESS,
        end_reason=EndReason.ANSWER,
        answer="42",
        verdicts=[Verdict.ok("verifier says so")],
        steps=[StepRecord(index=0, action={"type": "tap", "x": 1, "y": 2}, raw="tap(1,2)", hierarchy="<h/>")],
        final_hierarchy="<h/>",
        started=time.time(),
        finished=time.time() + 1,
    )


def fill_store(path: Path, keys: list[EpisodeKey] = KEYS, *, config: dict[str, Any] | None = None) -> None:
    """Write `keys` as episodes of RUN into the store at `path` (created when missing)."""
    with RunStore(path, writer="test") as store:
        store.ensure_run(RUN, pack="toy", app="toy", agent="golden", target="clone", config=config or {})
        for key in keys:
            store.write_episode(RUN, key, 0, "toy", episode_result(key.task, key.seed))


def realbench_cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "realbench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def show_json(store_dir: Path) -> Any:
    """`realbench show --json` of a store, as a reader in another process sees it."""
    done = realbench_cli("show", str(store_dir), "--json", timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
