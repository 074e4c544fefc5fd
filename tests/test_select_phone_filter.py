"""`realbench select` picks only tasks a real run would start, and says how many it left out and why.

The verdict comes from the pack itself (each picked task's `real.allowed`) and from the certificate
file, never from the selection's own list of exclusions.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from realbench.cli import app
from realbench.taskpack import load_pack

PACK = Path(__file__).resolve().parent.parent / "taskpacks" / "train_ticketing"
BASE, TRAINED = "m-base", "m-trained"
runner = CliRunner()


def clone_table(task_ids: list[str], seed: int = 0) -> pd.DataFrame:
    """Five clone runs per model; every third task gains, the rest pass or fail both."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, task in enumerate(task_ids):
        pb, pr = [(0.0, 1.0), (1.0, 1.0), (0.0, 0.0)][i % 3]
        for model, p in ((BASE, pb), (TRAINED, pr)):
            for r in range(5):
                rows.append((task, model, "clone", r, bool(rng.random() < p), 30.0))
    return pd.DataFrame(rows, columns=["task", "model", "env", "run", "success", "duration_s"])


def select_json(tmp_path: Path, *extra: str) -> dict:
    pack = load_pack(PACK)
    table = tmp_path / "clone.csv"
    clone_table([t.id for t in pack.tasks]).to_csv(table, index=False)
    args = ["select", "--clone", str(table), "--base", BASE, "--trained", TRAINED]
    args += ["--budget-hours", "100", "--runs", "1", "--json", *extra]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_select_never_picks_a_task_not_allowed_on_a_real_account(tmp_path: Path) -> None:
    pack = load_pack(PACK)
    forbidden = {t.id for t in pack.tasks if not t.real.allowed}
    assert forbidden, "the pack has tasks not allowed on a real account"
    out = select_json(tmp_path, "--pack", str(PACK))
    picked = {t["task"] for t in out["selected"]}
    # A budget this large takes every eligible task: every allowed task is picked, none other.
    assert picked == {t.id for t in pack.tasks} - forbidden
    assert set(out["excluded"]) == forbidden
    assert all(why.startswith("not allowed on a real account") for why in out["excluded"].values())
    assert out["excluded_by_reason"] == {"not allowed on a real account": len(forbidden)}
    assert sum(out["population"].values()) == len(pack.tasks) - len(forbidden)


def test_select_says_how_many_it_left_out_and_why(tmp_path: Path) -> None:
    pack = load_pack(PACK)
    forbidden = sorted(t.id for t in pack.tasks if not t.real.allowed)
    table = tmp_path / "clone.csv"
    clone_table([t.id for t in pack.tasks]).to_csv(table, index=False)
    res = runner.invoke(
        app,
        ["select", "--clone", str(table), "--base", BASE, "--trained", TRAINED, "--budget-hours", "100"]
        + ["--runs", "1", "--pack", str(PACK)],
        env={"COLUMNS": "200"},
    )
    assert res.exit_code == 0, res.output
    assert f"excluded {len(forbidden)} of {len(pack.tasks)} tasks" in res.stdout
    for task in forbidden:
        assert f"excluded {task}: not allowed on a real account" in res.stdout


def test_select_certified_picks_only_certified_tasks(tmp_path: Path) -> None:
    pack = load_pack(PACK)
    allowed = [t.id for t in pack.tasks if t.real.allowed]
    certified = set(allowed[: len(allowed) // 2])
    cert = {
        "pack": str(PACK),
        "app": pack.app,
        "package": "com.example",
        "rig": "rigs/virtual.yaml",
        "created": "now",
        "phones": [{"serial": "p1", "app_version": "1.0"}],
        "results": [
            {"task": t, "phone": "p1", "app_version": "1.0", "runnable": True, "certified": t in certified}
            | ({} if t in certified else {"failed_step": "golden[0]", "reason": "selector not found"})
            for t in allowed
        ],
    }
    path = tmp_path / "certification.json"
    path.write_text(json.dumps(cert), encoding="utf-8")
    out = select_json(tmp_path, "--pack", str(PACK), "--certified", str(path))
    picked = {t["task"] for t in out["selected"]}
    granted = {r["task"] for r in json.loads(path.read_text())["results"] if r["certified"]}
    assert picked == granted
    uncertified = set(allowed) - certified
    assert uncertified <= set(out["excluded"])
    assert all("not certified on any phone" in out["excluded"][t] for t in uncertified)
    assert "selector not found" in out["excluded"][sorted(uncertified)[0]]


def test_select_without_a_known_pack_says_nothing_was_filtered(tmp_path: Path) -> None:
    """Without --pack and with no pack recorded by the clone runs, the selection says it filtered nothing."""
    from tests.analysis_fixtures import write_store

    store = write_store(tmp_path / "clone", env="clone", n_tasks=3, repeats=1, seed=0)
    from devices.phone_filter import phone_filter

    # The fixture's store records no pack that exists: nothing can be decided, and it says so.
    f = phone_filter(None, None, [store])
    assert f.excluded == {} and f.source.startswith("none")
    assert phone_filter(PACK, None, [store]).excluded


def test_the_reproducibility_screen_replays_no_task_the_phones_may_not_run() -> None:
    from analysis.fakes import FakeDeterministicReplayer
    from analysis.selection import RecordedTrace, select_tasks
    from realbench.real_allowed import real_exclusions

    pack = load_pack(PACK)
    table = clone_table([t.id for t in pack.tasks])
    traces = {
        t.id: [RecordedTrace(t.id, f"{t.id}-ep", BASE, [{"type": "click", "x": 1, "y": 2}], None)]
        for t in pack.tasks
    }
    replayer = FakeDeterministicReplayer()
    excluded = real_exclusions(pack)
    res = select_tasks(
        table,
        base=BASE,
        trained=TRAINED,
        budget_hours=100,
        runs_per_model=1,
        traces=traces,
        replayer=replayer,
        replay_k=2,
        not_runnable=excluded,
    )
    replayed = set(replayer.calls)
    assert replayed == {t.id for t in pack.tasks} - set(excluded)
    assert res.screen is not None and res.screen.ran and res.screen.excluded == []
