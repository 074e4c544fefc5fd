"""The interlock under attack, on a virtual phone through the real adb server and uiautomator2 client.

Prints a table variant → blocked / COMMITTED for
- the 26 earlier cases (tests/test_farm_interlock.py: the commit test screen of the farm tests),
- the attacks of tests/interlock_attacks.py, each run unguarded (it must commit: the trap works)
  and behind the interlock armed like a money-moving pack;
and measures the time-of-check/time-of-use window that remains: for guarded taps, the time from the
moment the phone read the screen for the interlock's last hierarchy dump to the moment the tap
arrived (both on the virtual phone's clock), plus what the guard costs per action.

Every verdict comes from the virtual phone (the test screens' commit records, its input log), never
from the interlock's report. Machine and load are printed with the figures.

    .venv/bin/python benchmarks/interlock_attacks.py [--json] [--samples 200]
"""

from __future__ import annotations

import argparse
import bisect
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine_info import machine_facts  # noqa: E402

from devices.farm.interlock import InterlockedDevice  # noqa: E402
from devices.phone import PhoneDevice  # noqa: E402
from realbench.actions import Click  # noqa: E402
from tests.interlock_attacks import (  # noqa: E402
    BANK,
    BOUNDARY,
    CANCEL,
    FORBIDDEN,
    POLICY,
    Attack,
    attack_rig,
    attacks,
    mid,
    pay_screen,
)


def machine() -> dict[str, Any]:
    return machine_facts()


def earlier_cases() -> list[dict[str, Any]]:
    import pytest

    from tests.farm_support import virtual_phones
    from tests.test_farm_interlock import CASES, Rig

    rows = []
    with virtual_phones(1, commit_screen={}) as (host, serials):
        phone = PhoneDevice(serials[0], virtual=True)
        rig = Rig(host, serials[0], phone, InterlockedDevice(phone))
        for case in CASES:
            try:
                case(rig)
                verdict, detail = "blocked", ""
            except (
                AssertionError,
                pytest.fail.Exception,
            ) as exc:  # the phone's log or commits say it got through
                verdict, detail = "COMMITTED", str(exc).splitlines()[0][:120]
            rows.append({"variant": case.__name__, "origin": "earlier", "guarded": verdict, "detail": detail})
        phone.close()
    return rows


def new_attacks(rig: Any, suite: list[Attack]) -> list[dict[str, Any]]:
    rows = []
    for attack in suite:
        bare = rig.run(attack, guarded=False)
        t0 = time.perf_counter()
        guarded = rig.run(attack, guarded=True)
        took = time.perf_counter() - t0
        reason = rig.guard.blocked[-1].reason if guarded.blocked and rig.guard.blocked else ""
        rows.append(
            {
                "variant": attack.name,
                "origin": attack.origin,
                "unguarded": "committed" if bare.committed else "NO COMMIT (trap broken)",
                "guarded": "COMMITTED" if guarded.committed else "blocked",
                "inputs_from_blocked_action": guarded.blocked_inputs,
                "guarded_run_s": round(took, 3),
                "interlock_said": reason,
            }
        )
    return rows


def window(rig: Any, samples: int) -> dict[str, Any]:
    """Guarded taps on an allowed control (cancel on a pay screen); per tap, phone-side time from
    the last served dump's read to the tap's arrival."""
    probe = Attack("window", "measure", lambda: pay_screen("确认付款"), [])
    rig._install(probe)
    rig.phone.start_app(BANK)
    rig.guard.arm(BOUNDARY, FORBIDDEN, POLICY)
    vphone = rig.vphone
    x, y = mid(CANCEL)
    gaps: list[float] = []
    guard_s: list[float] = []
    bare_s: list[float] = []
    dumps: list[int] = []
    for _ in range(samples):
        rig.guard.observe()
        start = len(vphone.events)
        before_dumps = rig.guard.dumps
        t0 = time.perf_counter()
        rig.guard.act(Click(x=x, y=y))
        guard_s.append(time.perf_counter() - t0)
        dumps.append(rig.guard.dumps - before_dumps)
        event = vphone.events.events(start)[0]
        reads = sorted(vphone.dump_times)
        i = bisect.bisect_right(reads, event.time) - 1
        gaps.append(event.time - reads[i])
        t1 = time.perf_counter()
        rig.phone.act(Click(x=x, y=y))
        bare_s.append(time.perf_counter() - t1)
    committed = [c for s in rig.screens for c in s.commits]
    assert not committed, f"the measuring taps committed: {committed}"
    return {
        "samples": samples,
        "window_ms_median": round(statistics.median(gaps) * 1000, 1),
        "window_ms_p95": round(statistics.quantiles(gaps, n=20)[18] * 1000, 1),
        "window_ms_max": round(max(gaps) * 1000, 1),
        "guarded_tap_ms_median": round(statistics.median(guard_s) * 1000, 1),
        "unguarded_tap_ms_median": round(statistics.median(bare_s) * 1000, 1),
        "dumps_per_tap_median": statistics.median(dumps),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    before = machine()
    rows = earlier_cases()
    suite = attacks()
    with attack_rig() as rig:
        rows += new_attacks(rig, suite)
        measured = window(rig, args.samples)
    result = {"machine": before, "load_after": machine()["load_avg"], "variants": rows, "window": measured}
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
    else:
        print(
            f"machine: {before['cpu']} ({before['cores']} cores), load {before['load_avg']} -> {result['load_after']}"
        )
        print(f"{'variant':44} {'origin':8} {'unguarded':10} {'guarded':10}")
        for r in rows:
            print(f"{r['variant']:44} {r['origin']:8} {r.get('unguarded', '-'):10} {r['guarded']:10}")
        committed = sum(r["guarded"] != "blocked" for r in rows)
        broken = sum(r.get("unguarded", "committed") != "committed" for r in rows)
        print(
            f"{len(rows)} variants: {len(rows) - committed} blocked, {committed} committed; traps broken: {broken}"
        )
        w = measured
        print(
            f"TOCTOU window over {w['samples']} guarded taps: median {w['window_ms_median']} ms, "
            f"p95 {w['window_ms_p95']} ms, max {w['window_ms_max']} ms; guarded tap {w['guarded_tap_ms_median']} ms "
            f"vs unguarded {w['unguarded_tap_ms_median']} ms ({w['dumps_per_tap_median']} dumps per tap)"
        )
    failed = any(r["guarded"] != "blocked" for r in rows) or any(
        r.get("unguarded", "committed") != "committed" for r in rows
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
