"""Resume after SIGKILL: a `realbench run` killed mid-run finishes on rerun with no episode lost or
done twice (a real subprocess on the headless clone)."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACK = ROOT / "taskpacks" / "train_ticketing"

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _run_cmd(out: Path, repeats: int) -> list[str]:
    return [
        sys.executable, "-m", "realbench", "run",
        "--pack", str(PACK), "--target", "clone", "--agent", "golden",
        "--repeats", str(repeats), "--out", str(out), "--no-progress",
        "--tasks", "@" + str(out.parent / "tasks.json"),
    ]  # fmt: skip


def _stored(out: Path) -> list[tuple]:
    db = out / "index.sqlite"
    if not db.exists():
        return []
    try:
        with sqlite3.connect(db) as con:
            return con.execute("SELECT task, seed, repeat, attempt, outcome FROM episodes").fetchall()
    except sqlite3.OperationalError:  # the runner has not created its schema yet
        return []


def test_sigkill_then_resume(tmp_path):
    from realbench.taskpack import load_pack

    pack = load_pack(PACK)
    task_ids = [t.id for t in pack.tasks[:4]]
    (tmp_path / "tasks.json").write_text(json.dumps(task_ids))
    out = tmp_path / "store"
    repeats = 3
    proc = subprocess.Popen(
        _run_cmd(out, repeats),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(_stored(out)) < 3:
            if proc.poll() is not None:
                pytest.fail(f"run ended before it could be killed: {proc.stdout.read().decode()[-2000:]}")
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    killed_at = len(_stored(out))
    assert 3 <= killed_at < len(task_ids) * repeats, "the run must be killed part-way"
    done = subprocess.run(_run_cmd(out, repeats), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = _stored(out)
    keys = [(t, s, r) for t, s, r, _a, _o in rows]
    assert len(keys) == len(set(keys)), "an episode was done twice"
    assert set(keys) == {(t, s, r) for t in task_ids for r in range(repeats) for s in [r]}, (
        "an episode is missing"
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] == len(task_ids) * repeats
    assert summary["successes"] == summary["episodes"]  # golden plans pass
    # no half-written episode folder survives
    leftovers = [p for p in (out / "episodes").rglob("*") if ".tmp" in p.name]
    assert leftovers == []
