"""Ctrl-C during a run: the episodes it cut short are `interrupted`, not given up and not the
phone's aborts; `show` says so; a plain rerun runs them (and only them) again.

The run is driven by the real LocalRunner with fake targets (labelled as fakes): an episode on a
fake target blocks until the target is closed, as a phone's episode ends when its connection is
torn down, and then ends as a device failure (env_invalid), which is what a closed phone gives.
SIGINT is delivered to the main thread while it waits for the workers. Verdicts come from the
index on disk and from `realbench show`."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from realbench.episode import EndReason, EpisodeResult
from realbench.outcome import Outcome, Verdict
from realbench.runner import LocalRunner, summarize
from realbench.store import EpisodeKey, RunStore
from realbench.taskpack import load_pack
from tests.store_support import show_json

ROOT = Path(__file__).resolve().parent.parent
PACK = load_pack(ROOT / "taskpacks" / "toy")
RUN = "fake@phone"


def _result(key: EpisodeKey, outcome: Outcome, error: str | None = None) -> EpisodeResult:
    return EpisodeResult(
        task_id=key.task,
        seed=key.seed,
        instruction="do it",
        params={},
        agent="fake",
        target="clone-on-phone",
        device={"kind": "phone", "serial": "fake-0"},
        outcome=outcome,
        end_reason=EndReason.ABORT if not outcome.scored else EndReason.ANSWER,
        answer=None,
        verdicts=[Verdict.ok("done")] if outcome is Outcome.SUCCESS else [],
        steps=[],
        error=error,
        started=time.time(),
        finished=time.time(),
    )


class FakePhone:
    """A fake target: its episodes block until it is closed, then end as a lost device."""

    def __init__(self, serial: str) -> None:
        self.serial = serial
        self.closed = threading.Event()
        self.started = threading.Event()
        self.after: list[Outcome] = []

    def describe(self) -> dict[str, str]:
        return {"serial": self.serial}

    def after_episode(self, result: EpisodeResult) -> None:
        self.after.append(result.outcome)  # what a farm phone counts toward its abort rate

    def run(self, key: EpisodeKey) -> EpisodeResult:
        self.started.set()
        self.closed.wait(30)
        return _result(key, Outcome.ENV_INVALID, "DeviceLost: the phone's connection closed")


def _keys() -> list[EpisodeKey]:
    return [EpisodeKey(PACK.tasks[0].id, r, r) for r in range(4)]


def _interrupt_when(started: threading.Event) -> threading.Thread:
    main = threading.main_thread().ident
    assert main is not None

    def fire() -> None:
        if started.wait(30):
            time.sleep(0.3)
            signal.pthread_kill(main, signal.SIGINT)

    thread = threading.Thread(target=fire, daemon=True)
    thread.start()
    return thread


def test_ctrl_c_records_interrupted_episodes_that_a_plain_rerun_resumes(tmp_path):
    store_dir = tmp_path / "s"
    phones = [FakePhone("fake-0"), FakePhone("fake-1")]
    keys = _keys()
    with RunStore(store_dir, writer="realbench run") as store:
        store.ensure_run(
            RUN, pack="toy", app="toy", agent="fake", target="clone-on-phone", config={"max_attempts": 3}
        )
        by_serial = {p.serial: p for p in phones}
        runner = LocalRunner(
            store,
            RUN,
            PACK,
            phones,  # type: ignore[arg-type]
            agent_factory=lambda: None,  # type: ignore[arg-type,return-value]
            progress=False,
            execute=lambda target, key: by_serial[target.serial].run(key),  # type: ignore[attr-defined]
        )
        both_started = threading.Event()

        def both() -> None:
            if phones[0].started.wait(30) and phones[1].started.wait(30):
                both_started.set()

        threading.Thread(target=both, daemon=True).start()
        _interrupt_when(both_started)
        with pytest.raises(KeyboardInterrupt):
            runner.run(keys)
        for p in phones:  # what the run's ExitStack does next: close the targets
            p.closed.set()
        assert runner.wait_stopped(10) == 0
    rows = _rows(store_dir)
    assert sorted(o for _, o, _ in rows) == ["interrupted", "interrupted"], rows
    assert all("interrupted" in (e or "") for _, _, e in rows)
    assert all(p.after == [] for p in phones), "an interruption counted against a phone"

    show = show_json(store_dir)
    (run,) = show["runs"]
    assert (run["interrupted"], run["given_up"], run["aborted"], run["abort_rate"]) == (2, 0, 0, 0.0)
    assert run["given_up_reasons"] == {}
    assert all(d["env_invalid"] == 0 for d in run["devices"].values())
    text = subprocess.run(
        [sys.executable, "-m", "realbench", "show", str(store_dir)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    assert "2 episode(s) interrupted" in text.stdout and "retry-given-up" not in text.stdout, text.stdout

    # a plain rerun (no --retry-given-up) runs the interrupted ones again, with a full budget
    with RunStore(store_dir, writer="realbench run") as store:
        runner = LocalRunner(
            store,
            RUN,
            PACK,
            [FakePhone("fake-0")],  # type: ignore[list-item]
            agent_factory=lambda: None,  # type: ignore[arg-type,return-value]
            progress=False,
            execute=lambda target, key: _result(key, Outcome.SUCCESS),
        )
        assert [i.key for i in runner.pending(keys)] == keys
        assert all(i.last_attempt - i.attempt == 2 for i in runner.pending(keys))
        summary = runner.run(keys)
        assert summary.data["episodes"] == len(keys) and summary.data["interrupted"] == 0
        assert summarize(store, RUN).data["successes"] == len(keys)


def test_an_env_invalid_attempt_with_budget_left_is_not_given_up(tmp_path):
    """Ctrl-C between an abort and its rerun leaves an env_invalid final attempt: resumable."""
    key = _keys()[0]
    with RunStore(tmp_path / "s", writer="test") as store:
        store.ensure_run(RUN, pack="toy", app="toy", agent="fake", target="real", config={"max_attempts": 3})
        store.write_episode(RUN, key, 0, "toy", _result(key, Outcome.ENV_INVALID, "DeviceError: flaky"))
        data = summarize(store, RUN).data
        assert (data["interrupted"], data["given_up"]) == (1, 0)
        for attempt in (1, 2):
            store.write_episode(
                RUN, key, attempt, "toy", _result(key, Outcome.ENV_INVALID, "DeviceError: flaky")
            )
        data = summarize(store, RUN).data
        assert (data["interrupted"], data["given_up"]) == (0, 1)
        assert data["abort_rate"] == 1.0


def _rows(store_dir: Path) -> list[tuple[str, str, str | None]]:
    db = sqlite3.connect(f"file:{store_dir / 'index.sqlite'}?mode=ro", uri=True)
    try:
        return list(db.execute("SELECT episode_id, outcome, error FROM episodes ORDER BY episode_id"))
    finally:
        db.close()


@pytest.mark.browser
def test_ctrl_c_on_a_clone_run_is_one_line_and_a_rerun_finishes_it(tmp_path):
    """The whole command: SIGINT to its process group, as a terminal's Ctrl-C sends it."""
    out = tmp_path / "run"
    args = [sys.executable, "-m", "realbench", "run", "--pack", "taskpacks/toy", "--out", str(out)]
    args += ["--repeats", "12", "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        args,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if (out / "index.sqlite").exists() and _count(out) >= 1:
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the run ended before it could be interrupted"
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "WebSocketDisconnect" not in stderr, stderr
    assert "run stopped (Ctrl-C)" in stderr
    (run,) = show_json(out)["runs"]
    assert (run["given_up"], run["abort_rate"]) == (0, 0.0), run
    assert "env_invalid" not in run["outcomes"], run["outcomes"]
    rerun = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    (run,) = show_json(out)["runs"]
    assert run["episodes"] == 12 and run["interrupted"] == 0 and run["given_up"] == 0


def _count(store_dir: Path) -> int:
    try:
        return len(_rows(store_dir))
    except sqlite3.Error:
        return 0


class FakeBrowserPhone(FakePhone):
    """A fake target whose episode dies of the Ctrl-C itself (its browser, in the same process group,
    gets the signal too) and returns before this process's main thread has handled the signal."""

    def __init__(self, serial: str) -> None:
        super().__init__(serial)
        self.died = threading.Event()

    def run(self, key: EpisodeKey) -> EpisodeResult:
        self.started.set()
        self.died.set()
        return _result(key, Outcome.ENV_INVALID, "TargetClosedError: the browser has been closed")


def test_an_episode_that_dies_of_the_ctrl_c_before_the_stop_is_interrupted(tmp_path):
    store_dir = tmp_path / "s"
    phone = FakeBrowserPhone("fake-0")
    main = threading.main_thread().ident
    assert main is not None

    def signal_late() -> None:
        if phone.died.wait(30):
            time.sleep(0.2)  # the main thread gets to the signal after the browser died of it
            signal.pthread_kill(main, signal.SIGINT)

    with RunStore(store_dir, writer="realbench run") as store:
        store.ensure_run(
            RUN, pack="toy", app="toy", agent="fake", target="clone-on-phone", config={"max_attempts": 3}
        )
        runner = LocalRunner(
            store,
            RUN,
            PACK,
            [phone],  # type: ignore[list-item]
            agent_factory=lambda: None,  # type: ignore[arg-type,return-value]
            progress=False,
            execute=lambda target, key: phone.run(key),
        )
        threading.Thread(target=signal_late, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            runner.run(_keys()[:1])
        assert runner.wait_stopped(10) == 0
    assert [o for _, o, _ in _rows(store_dir)] == ["interrupted"]
    assert phone.after == [], "an interruption counted against the phone"
