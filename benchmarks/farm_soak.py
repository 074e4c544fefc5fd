"""Soak: a long farm run on virtual phones with periodic ADB drops and uiautomator kills.

Real farms fail over long sessions in two ways above all: the ADB connection drops and the
on-device uiautomator server dies. This keeps one set of virtual phones (a test rig behind the
real adb server, not phones) up for `--minutes`, and runs `realbench run --target real` round after
round into one store (each round its own run id, the synthetic farm pack, every healthy episode
`boundary_reached`) while a seeded injector drops a random phone's ADB connection or kills its
uiautomator server every `--fault-period` seconds (jittered). Every third round the runner is
SIGKILLed mid-run (rounds 1, 4, 7 …) and resumed. After each round the same command runs again and must find nothing
to do. At the end it reads the store and reports, over all rounds:

- lost: planned episodes with no record at all;
- done_twice: episodes with more than one scored attempt;
- misscored: scored episodes whose outcome is not `boundary_reached`;
- abort rate (env_invalid attempts / attempts) and recovery times (fault -> that phone's next
  scored episode finished, an upper bound that includes that episode).

    nice -n 10 python benchmarks/farm_soak.py --minutes 30 --json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from farm_faults import Injector, realbench_run, recovery_times, stored_count  # noqa: E402
from machine_info import cpu_model  # noqa: E402

from devices.farm.synthetic import write_synthetic_pack  # noqa: E402
from devices.virtual import VirtualPhoneHost  # noqa: E402

SOAK_FAULTS = ("drop", "kill_server")
TASKS = 10


def _machine() -> dict[str, Any]:
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "loadavg": os.getloadavg()}


def _write_rig(path: Path, serials: list[str], max_attempts: int) -> None:
    path.write_text(
        yaml.safe_dump(
            {
                "name": "farm-soak",
                "description": "virtual phones started by benchmarks/farm_soak.py",
                "phones": [{"serial": s, "profile": "generic-1080x2400", "virtual": True} for s in serials],
                "apps": [
                    {
                        "package": "com.MobileTicket",
                        "version": "5.8.0.8",
                        "login_screen": {"resource_id": "login_button"},
                    }
                ],
                "concurrency": {"quarantine_after": 50, "lease_timeout_s": 60, "max_attempts": max_attempts},
            }
        ),
        encoding="utf-8",
    )


def _round(
    pack: Path,
    rig: Path,
    out: Path,
    run_id: str,
    repeats: int,
    max_attempts: int,
    kill: bool,
    env: dict[str, str],
) -> dict[str, Any]:
    planned = TASKS * repeats
    t0 = time.time()
    before = stored_count(out)
    codes = []
    proc = realbench_run(pack, rig, out, repeats, max_attempts, env, run_id)
    killed = False
    if kill:
        while proc.poll() is None and stored_count(out) - before < planned // 2:
            time.sleep(0.2)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            killed = True
        codes.append(proc.wait())
        proc = realbench_run(pack, rig, out, repeats, max_attempts, env, run_id)
    codes.append(proc.wait())
    settled = stored_count(out)
    codes.append(realbench_run(pack, rig, out, repeats, max_attempts, env, run_id).wait())
    return {
        "run_id": run_id,
        "planned": planned,
        "sigkilled": killed,
        "exit_codes": codes,
        "rerun_new_attempts": stored_count(out) - settled,
        "wall_s": round(time.time() - t0, 1),
        "loadavg": os.getloadavg()[0],
    }


def _tally(out: Path, rounds: list[dict[str, Any]]) -> tuple[dict[str, Any], Any]:
    import pandas as pd

    from realbench.outcome import Outcome
    from realbench.store import RunStore

    store = RunStore(out, create=False)
    try:
        lost = done_twice = misscored = gave_up = scored_eps = 0
        frames = []
        for r in rounds:
            attempts = store.attempts(r["run_id"])
            scored = {k: [o for o in outs if o.scored] for k, outs in attempts.items()}
            lost += r["planned"] - len(attempts)
            done_twice += sum(1 for s in scored.values() if len(s) > 1)
            misscored += sum(1 for s in scored.values() for o in s if o is not Outcome.BOUNDARY_REACHED)
            gave_up += sum(1 for s in scored.values() if not s)
            scored_eps += sum(1 for s in scored.values() if s)
            frames.append(store.episodes_frame([r["run_id"]]))
        damaged = len(store.damaged())
    finally:
        store.close()
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    invalid = int((frame["outcome"] == str(Outcome.ENV_INVALID)).sum()) if len(frame) else 0
    return {
        "planned": sum(r["planned"] for r in rounds),
        "finished_scored": scored_eps,
        "gave_up": gave_up,
        "lost": lost,
        "done_twice": done_twice,
        "misscored": misscored,
        "damaged": damaged,
        "attempts": int(len(frame)),
        "env_invalid_attempts": invalid,
        "abort_rate": round(invalid / len(frame), 4) if len(frame) else 0.0,
    }, frame


def run_soak(
    *,
    minutes: float = 30.0,
    phones: int = 4,
    repeats: int = 10,
    fault_period_s: float = 6.0,
    max_attempts: int = 6,
    seed: int = 0,
    workdir: Path | None = None,
    log: Any = None,
) -> dict[str, Any]:
    work = Path(workdir or tempfile.mkdtemp(prefix="farm-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    pack = write_synthetic_pack(work / "pack", tasks=TASKS, steps=1, with_boundary=True)
    out = work / "store"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.time()
    start = _machine()
    rounds: list[dict[str, Any]] = []
    with VirtualPhoneHost() as host:
        infos = host.start(phones, screens="static", drift="none")
        host.adb_connect()
        serials = [i.serial for i in infos]
        rig = work / "rig.yaml"
        _write_rig(rig, serials, max_attempts)
        injector = Injector(host, serials, seed=seed, period_s=fault_period_s, kinds=SOAK_FAULTS)
        thread = threading.Thread(target=injector.run, daemon=True)
        thread.start()
        try:
            while time.time() - t0 < minutes * 60:
                n = len(rounds)
                r = _round(pack, rig, out, f"soak-{n:03d}", repeats, max_attempts, n % 3 == 1, env)
                rounds.append(r)
                if log is not None:
                    print(json.dumps({"t_min": round((time.time() - t0) / 60, 1), **r}), file=log, flush=True)
        finally:
            injector.stop()
            thread.join(timeout=5)
            injector.end_open_faults()
    figures, frame = _tally(out, rounds)
    rec = np.array(recovery_times(frame, injector.log))
    by_kind: dict[str, int] = {}
    for inj in injector.log:
        by_kind[inj.kind] = by_kind.get(inj.kind, 0) + 1
    good = frame[frame["scored"]] if len(frame) else frame
    figures.update(
        {
            "device": "virtual-phone (test rig, not phones)",
            "phones": phones,
            "rounds": len(rounds),
            "rounds_sigkilled": sum(1 for r in rounds if r["sigkilled"]),
            "nonzero_exit_codes": sum(1 for r in rounds for c in r["exit_codes"] if c not in (0, -9)),
            "rerun_new_attempts": sum(r["rerun_new_attempts"] for r in rounds),
            "faults_injected": len(injector.log),
            "faults_by_kind": by_kind,
            "recovery_s": {
                "what": "fault -> that phone's next scored episode finished (upper bound)",
                "n": int(len(rec)),
                "median": round(float(np.median(rec)), 2) if len(rec) else None,
                "p95": round(float(np.percentile(rec, 95)), 2) if len(rec) else None,
                "max": round(float(np.max(rec)), 2) if len(rec) else None,
            },
            "episode_s_median": round(float((good["finished"] - good["started"]).median()), 3)
            if len(good)
            else None,
            "wall_min": round((time.time() - t0) / 60, 1),
            "machine_at_start": start,
            "machine_at_end": _machine(),
            "loadavg_1min_per_round": [round(r["loadavg"], 2) for r in rounds],
            "workdir": str(work),
        }
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--phones", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=10, help="repeats of the 10 tasks per round")
    parser.add_argument("--fault-period", type=float, default=6.0, help="mean seconds between faults")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--json", action="store_true", help="print one JSON object at the end")
    args = parser.parse_args()
    figures = run_soak(
        minutes=args.minutes,
        phones=args.phones,
        repeats=args.repeats,
        fault_period_s=args.fault_period,
        seed=args.seed,
        workdir=args.workdir,
        log=sys.stderr,
    )
    if args.json:
        print(json.dumps(figures, ensure_ascii=False))
        return
    for key, value in figures.items():
        print(f"{key:>24}: {value}")


if __name__ == "__main__":
    main()
