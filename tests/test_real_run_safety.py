"""A real run of account-changing tasks on virtual phones changes nothing on the phone.

`realbench run --target real --agent golden` on rigs/virtual.yaml, with the four tasks that once
changed the account unguarded. The evidence is the virtual phone's own app state (the clone state
behind the phone), read from its control channel after the run — not the run's report: every task
is either skipped (not allowed on a real account) or stopped at its commit boundary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clones.base import get_clone
from clones.dom_plan import instantiate
from devices.virtual.control import PhoneControl
from realbench.errors import RealbenchError
from realbench.store import RunStore
from realbench.taskpack import load_pack
from tests.adb_support import kill_adb_server, start_adb_server

pytestmark = pytest.mark.farm

ROOT = Path(__file__).resolve().parent.parent
TASKS = ["passenger-delete", "passenger-add", "settings-push-off", "reminder-delete"]
TICKET = "com.MobileTicket"


@pytest.fixture()
def vphone_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """An own adb server and state folder, with the rig's two virtual phones up (reused by the run)."""
    (tmp_path / "runtime").mkdir()
    env = start_adb_server({**os.environ, "XDG_RUNTIME_DIR": str(tmp_path / "runtime")})
    cli = [sys.executable, "-m", "realbench", "vphone"]
    try:
        up = subprocess.run(
            [*cli, "up", "-n", "2", "--drift", "mild", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert up.returncode == 0, up.stderr
        env["VPHONES"] = up.stdout
        yield env
    finally:
        subprocess.run([*cli, "down"], env=env, capture_output=True, timeout=60)
        kill_adb_server(env)


def _ticket_states(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """serial -> the 12306 app's clone state, for each phone on which the app was started."""
    out = {}
    for phone in record["phones"]:
        control = PhoneControl(phone["control_url"])
        try:
            out[phone["serial"]] = control.app_state(TICKET)
        except RealbenchError:
            continue  # the app was never started on this phone: nothing ran there
        finally:
            control.close()
    return out


def test_real_run_of_account_changing_tasks_changes_nothing_on_the_phone(
    vphone_env: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    run = subprocess.run(
        [
            sys.executable, "-m", "realbench", "run",
            "--pack", "taskpacks/train_ticketing", "--out", str(out),
            "--target", "real", "--agent", "golden", "--rig", "rigs/virtual.yaml",
            "--tasks", ",".join(TASKS), "--no-progress",
        ],
        cwd=ROOT, env=vphone_env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]

    # The phone's own state: the only task allowed on the real side ran on one phone and left the
    # account as the task's start state had it — 陈静 is still a passenger.
    pack = load_pack(ROOT / "taskpacks" / "train_ticketing")
    task = pack.task("passenger-delete")
    start = get_clone(pack.clone).build_state(task.clone.setup, instantiate(task).params)["user"]
    states = _ticket_states(json.loads(vphone_env["VPHONES"]))
    assert len(states) == 1, sorted(states)
    user = next(iter(states.values()))["user"]
    assert [p["name"] for p in user["passengers"]] == [p["name"] for p in start["passengers"]]
    assert "陈静" in [p["name"] for p in user["passengers"]]
    for key in ("passengers", "reminders", "settings", "orders", "waitlists"):
        assert user.get(key) == start.get(key), key

    # What the run says agrees (secondary): three tasks skipped with their reason, one stopped at
    # its boundary.
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    skipped = {s["task"]: s["reason"] for s in summary["skipped"]}
    assert sorted(skipped) == sorted(t for t in TASKS if t != "passenger-delete")
    assert all("not allowed on a real account" in r for r in skipped.values())
    assert list(summary["tasks"]) == ["passenger-delete"]
    # graded on the virtual phone by what the blocked tap would have done; it ended at the boundary
    assert sum(summary["outcomes"].values()) == 1, summary["outcomes"]
    frame = RunStore(out, create=False).episodes_frame()
    assert frame["task"].tolist() == ["passenger-delete"]
    assert frame["end_reason"].tolist() == ["boundary"]
    show = subprocess.run(
        [sys.executable, "-m", "realbench", "show", str(out)],
        cwd=ROOT, env=vphone_env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "skipped on the real side" in show.stdout and "reminder-delete" in show.stdout
