"""Fault injection on virtual phones: does the farm lose, duplicate or mis-score episodes?

What it does (all on virtual phones — a test rig behind the real adb server, not phones):

1. starts N virtual phones in this process and writes a rig naming them, plus the synthetic farm
   pack (every healthy episode ends as `boundary_reached`);
2. runs `realbench run --target real` as a subprocess while a seeded injector drops ADB
   connections, kills the on-device uiautomator server, blacks out and slows down screenshots;
3. SIGKILLs the runner mid-run, runs the same command again (it resumes), then once more (it
   must find nothing left to do);
4. reads the run store and the phones' own input logs and reports:
   - lost: planned episodes with no final result;
   - done_twice: episodes with more than one scored attempt in the store;
   - misscored: scored episodes whose outcome is not the deterministic `boundary_reached`
     (a fault that leaked into a score);
   - aborts_unexplained: `env_invalid` attempts without a device error recorded;
   - recovery_s: per injected fault, time until the phone next received an input.

    python benchmarks/farm_faults.py --episodes 200 --phones 4 --json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from devices.farm.synthetic import write_synthetic_pack  # noqa: E402
from devices.virtual import VirtualPhoneHost  # noqa: E402

# Recoverable by the driver's retries: drop, kill_server, black (short), slow.
# Unrecoverable within an episode (must end as env_invalid, never as a score): long_black,
# version_drift (health check), logout (logged-in probe).
FAULTS = ("drop", "kill_server", "black", "slow", "long_black", "version_drift", "logout")


@dataclass
class Injection:
    t: float
    serial: str
    kind: str


@dataclass
class Injector:
    """Injects one fault every `period_s` (jittered) on a random phone until stopped."""

    host: VirtualPhoneHost
    serials: list[str]
    seed: int = 0
    period_s: float = 0.8
    kinds: tuple[str, ...] = FAULTS
    log: list[Injection] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _paused: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _timers: dict[tuple[str, str], tuple[threading.Timer, Any]] = field(default_factory=dict)

    def run(self) -> None:
        rng = np.random.default_rng(self.seed)
        while not self._stop.wait(float(rng.uniform(0.5, 1.5)) * self.period_s):
            serial = self.serials[int(rng.integers(len(self.serials)))]
            kind = self.kinds[int(rng.integers(len(self.kinds)))]
            with self._lock:
                if not self._paused.is_set():
                    self._inject(serial, kind)

    def _inject(self, serial: str, kind: str) -> None:
        phone = self.host.phone(serial)
        self.log.append(Injection(time.time(), serial, kind))
        if kind == "drop":
            phone.drop_connection()
        elif kind == "kill_server":
            phone.kill_uiautomator()
        elif kind in ("black", "long_black"):
            phone.set_faults(black_screenshots=True)
            window = 0.3 if kind == "black" else 3.0
            self._later(serial, "black", window, lambda p=phone: p.set_faults(black_screenshots=False))
        elif kind == "slow":
            phone.set_faults(screenshot_delay_s=1.5)
            self._later(serial, kind, 1.0, lambda p=phone: p.set_faults(screenshot_delay_s=0.0))
        elif kind == "version_drift":
            phone.set_faults(versions={"com.MobileTicket": "5.9.9.9"})
            self._later(serial, kind, 1.5, lambda p=phone: p.set_faults(versions={}))
        else:
            phone.set_faults(logged_out=["com.MobileTicket"])
            # sessions do not come back by themselves: the window outlasts an episode
            self._later(serial, kind, 4.0, lambda p=phone: p.set_faults(logged_out=[]))

    def _later(self, serial: str, kind: str, delay: float, fn: Any) -> None:
        """End a fault window later; a new fault of the same kind on the same phone restarts the
        window (an older timer must not cut the new one short)."""
        old = self._timers.pop((serial, kind), None)
        if old is not None:
            old[0].cancel()
        t = threading.Timer(delay, fn)
        t.daemon = True
        self._timers[(serial, kind)] = (t, fn)
        t.start()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No faults while a run starts: its pre-run checks rightly refuse a phone whose app is at
        another version, and what the suite measures is recovery during the run."""
        with self._lock:
            self._paused.set()
            self.end_open_faults()
        try:
            yield
        finally:
            self._paused.clear()

    def stop(self) -> None:
        """Stop injecting (the caller joins the thread, then calls `end_open_faults`)."""
        self._stop.set()

    def end_open_faults(self) -> None:
        """End every open fault window now rather than cancel it: a pending timer would outlive
        the phones, and a fault left open (an app at another version, a logged-out account) would
        make the next run refuse its phones, which is not what that run is there to test."""
        for timer, end_fault in self._timers.values():
            timer.cancel()
            end_fault()
        self._timers.clear()


def wait_for_first_episode(run: subprocess.Popen[bytes], store: Path, timeout_s: float = 300.0) -> None:
    """Until `run` has stored an episode (so it is past its pre-run checks) or has ended."""
    before, deadline = stored_count(store), time.time() + timeout_s
    while run.poll() is None and stored_count(store) <= before and time.time() < deadline:
        time.sleep(0.1)


def stored_count(store: Path) -> int:
    index = store / "index.sqlite"
    if not index.exists():
        return 0
    try:
        db = sqlite3.connect(f"file:{index}?mode=ro", uri=True, timeout=1)
        try:
            return int(db.execute("SELECT COUNT(*) FROM episodes").fetchone()[0])
        finally:
            db.close()
    except sqlite3.Error:
        return 0


def realbench_run(
    pack: Path,
    rig: Path,
    out: Path,
    repeats: int,
    max_attempts: int,
    env: dict[str, str],
    run_id: str | None = None,
) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable, "-m", "realbench", "run",
        "--pack", str(pack), "--out", str(out), "--target", "real", "--rig", str(rig),
        "--agent", "golden", "--repeats", str(repeats), "--max-attempts", str(max_attempts), "--no-progress",
    ]  # fmt: skip
    if run_id:
        cmd += ["--run-id", run_id]
    log = open(out.parent / f"run-{int(time.time() * 1000)}.log", "wb")  # noqa: SIM115 - closed by the OS with the child
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def recovery_times(frame: Any, injections: list[Injection]) -> list[float]:
    """Per fault: seconds until that phone finished its next scored episode (an upper bound on
    the time to recover: it includes that episode's own duration)."""
    good = frame[frame["scored"]] if not frame.empty else frame
    out = []
    for inj in injections:
        after = good[(good["device_serial"] == inj.serial) & (good["finished"] > inj.t)]["finished"]
        if len(after):
            out.append(float(after.min()) - inj.t)
    return out


def analyse(out: Path, planned: int) -> dict[str, Any]:
    from realbench.outcome import Outcome
    from realbench.store import RunStore

    store = RunStore(out, create=False)
    try:
        (run_id,) = [r["run_id"] for r in store.runs()]
        attempts = store.attempts(run_id)
        frame = store.episodes_frame([run_id])
    finally:
        store.close()
    scored_per_key = {k: [o for o in outs if o.scored] for k, outs in attempts.items()}
    done_twice = sum(1 for s in scored_per_key.values() if len(s) > 1)
    lost = planned - sum(1 for k, s in scored_per_key.items() if s or len(attempts[k]) > 0)
    finished = sum(1 for s in scored_per_key.values() if s)
    misscored = sum(1 for s in scored_per_key.values() for o in s if o is not Outcome.BOUNDARY_REACHED)
    invalid = frame[frame["outcome"] == str(Outcome.ENV_INVALID)] if not frame.empty else frame
    err_col = "error" if "error" in frame.columns else None
    unexplained = 0
    if err_col is not None and not invalid.empty:
        unexplained = int(
            (~invalid[err_col].fillna("").str.contains("Device|Lost|health|uiautomator|LeaseTimeout")).sum()
        )
    good = frame[frame["scored"]] if not frame.empty else frame
    return {
        "frame": frame,
        "episode_s_median": round(float((good["finished"] - good["started"]).median()), 3)
        if len(good)
        else None,
        "planned": planned,
        "finished_scored": finished,
        "gave_up": sum(1 for s in scored_per_key.values() if not s),
        "lost": lost,
        "done_twice": done_twice,
        "misscored": misscored,
        "attempts": int(len(frame)),
        "env_invalid_attempts": int(len(invalid)),
        "abort_rate": round(len(invalid) / len(frame), 4) if len(frame) else 0.0,
        "aborts_unexplained": unexplained,
        "device_kinds": sorted(set(frame["device_kind"].dropna())) if not frame.empty else [],
    }


def run_fault_suite(
    *,
    episodes: int = 200,
    phones: int = 4,
    seed: int = 0,
    kill_at: float = 0.35,
    max_attempts: int = 6,
    fault_period_s: float | None = 0.8,
    steps: int = 1,
    workdir: Path | None = None,
) -> dict[str, Any]:
    work = Path(workdir or tempfile.mkdtemp(prefix="farm-faults-"))
    tasks = 10
    repeats = max(1, -(-episodes // tasks))
    planned = tasks * repeats
    pack = write_synthetic_pack(work / "pack", tasks=tasks, steps=steps, with_boundary=True)
    out = work / "store"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.time()
    with VirtualPhoneHost() as host:
        infos = host.start(phones, screens="static", drift="none")
        host.adb_connect()
        serials = [i.serial for i in infos]
        rig = work / "rig.yaml"
        rig.write_text(
            yaml.safe_dump(
                {
                    "name": "farm-faults",
                    "description": "virtual phones started by benchmarks/farm_faults.py",
                    "phones": [
                        {"serial": s, "profile": "generic-1080x2400", "virtual": True} for s in serials
                    ],
                    "apps": [
                        {
                            "package": "com.MobileTicket",
                            "version": "5.8.0.8",
                            "login_screen": {"resource_id": "login_button"},
                        }
                    ],
                    "concurrency": {
                        "quarantine_after": 50,
                        "lease_timeout_s": 60,
                        "max_attempts": max_attempts,
                    },
                }
            ),
            encoding="utf-8",
        )
        injector = Injector(host, serials, seed=seed, period_s=fault_period_s or 0.0)
        thread = threading.Thread(target=injector.run, daemon=True)
        if fault_period_s:
            thread.start()
        try:
            # 1. run, SIGKILL mid-run
            with injector.paused():
                first = realbench_run(pack, rig, out, repeats, max_attempts, env)
                wait_for_first_episode(first, out)
            target = max(1, int(planned * kill_at))
            while first.poll() is None and stored_count(out) < target:
                time.sleep(0.1)
            killed_at = stored_count(out)
            killed = first.poll() is None
            if killed:
                os.kill(first.pid, signal.SIGKILL)
            first.wait()
            # 2. resume to completion (faults continue)
            t_resume = time.time()
            with injector.paused():
                second = realbench_run(pack, rig, out, repeats, max_attempts, env)
                wait_for_first_episode(second, out)
            second.wait()
            resume_s = time.time() - t_resume
        finally:
            injector.stop()
            if thread.is_alive():
                thread.join(timeout=5)
            injector.end_open_faults()
        # 3. a third run must find nothing to do
        before_third = stored_count(out)
        third = realbench_run(pack, rig, out, repeats, max_attempts, env)
        third.wait()
        after_third = stored_count(out)
    (work / "injections.json").write_text(
        json.dumps([inj.__dict__ for inj in injector.log]), encoding="utf-8"
    )
    figures = analyse(out, planned)
    recoveries = recovery_times(figures.pop("frame"), injector.log)
    by_kind: dict[str, int] = {}
    for inj in injector.log:
        by_kind[inj.kind] = by_kind.get(inj.kind, 0) + 1
    rec = np.array(recoveries)
    figures.update(
        {
            "device": "virtual-phone (test rig, not phones)",
            "phones": phones,
            "plan_steps": 2 * steps + 1,
            "runner_sigkilled": killed,
            "stored_when_killed": killed_at,
            "exit_codes": [first.returncode, second.returncode, third.returncode],
            "third_run_new_attempts": after_third - before_third,
            "faults_injected": len(injector.log),
            "faults_by_kind": by_kind,
            "recovery_s": {
                "what": "fault -> that phone's next scored episode finished (upper bound)",
                "median": round(float(np.median(rec)), 3) if recoveries else None,
                "p95": round(float(np.percentile(rec, 95)), 3) if recoveries else None,
                "max": round(float(np.max(rec)), 3) if recoveries else None,
            },
            "resume_wall_s": round(resume_s, 1),
            "wall_s": round(time.time() - t0, 1),
            "workdir": str(work),
        }
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--phones", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=1, help="open/back pairs before the boundary tap")
    parser.add_argument(
        "--fault-period", type=float, default=0.8, help="mean seconds between faults (0: none)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    figures = run_fault_suite(
        episodes=args.episodes,
        phones=args.phones,
        seed=args.seed,
        fault_period_s=args.fault_period or None,
        steps=args.steps,
    )
    if args.json:
        print(json.dumps(figures, ensure_ascii=False))
        return
    for key, value in figures.items():
        print(f"{key:>24}: {value}")


if __name__ == "__main__":
    main()
