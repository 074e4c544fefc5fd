"""What the interlock's decision costs in CPU per guarded action, on the real packs' own screens.

The screens are the ones each pack's golden plans pass through, rendered by the headless clones at
phone resolution (scale 2.625, 1080 px wide) and dumped as Android-style hierarchies. For each
screen, with the interlock armed as a `real` run arms it (the task's boundary, the app's forbidden
controls, the pack's policy):

- `controls`: finding every stop control on the screen — done on each observation and on each of
  the guard's fresh dumps, so three to four times per guarded action;
- `check`: the decision for a tap at the screen's centre.

Both are pure CPU in the process driving the phone, so on a 2-core host they compete with the
browser or the virtual phone for the same cores. Prints medians, the machine and its load.

    .venv/bin/python benchmarks/interlock_cost.py [--tasks 6] [--repeats 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine_info import machine_facts  # noqa: E402

from devices.farm.interlock import Interlock  # noqa: E402
from devices.farm.interlock_policy import InterlockPolicy  # noqa: E402
from devices.pack_run import clone_targets  # noqa: E402
from realbench.actions import Click  # noqa: E402
from realbench.boundary import to_pixels  # noqa: E402
from realbench.episode import run_episode  # noqa: E402
from realbench.golden import GoldenAgent  # noqa: E402
from realbench.hierarchy import Hierarchy  # noqa: E402
from realbench.taskpack import TaskPack, load_pack  # noqa: E402

PACKS = ("train_ticketing", "bank")


def screens(pack: TaskPack, tasks: int) -> list[tuple[Interlock, str]]:
    """(armed interlock, hierarchy XML) for every screen of the first `tasks` boundary tasks' plans."""
    chosen = [t for t in pack.tasks if t.real.allowed and t.real.boundary][:tasks]
    policy = InterlockPolicy.for_pack(pack)
    out: list[tuple[Interlock, str]] = []
    with clone_targets(pack, workers=1) as (target,):
        for task in chosen:
            instance = task.instantiate(0, task.clone.setup.clock.date())
            result = run_episode(instance, target, GoldenAgent())
            interlock = Interlock(instance.boundary(), list(pack.real_app.forbidden), policy=policy)
            out += [(interlock, step.hierarchy) for step in result.steps if step.hierarchy]
    return out


def _controls(interlock: Interlock, xml: str, screen: tuple[int, int]) -> None:
    interlock.controls(Hierarchy(xml), screen)


def _check_centre_tap(interlock: Interlock, xml: str, screen: tuple[int, int]) -> None:
    pixels = partial(to_pixels, width=screen[0], height=screen[1])
    interlock.check(Click(x=500, y=500), Hierarchy(xml), pixels, screen)


def timed(fn: Any, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def measure(pack_name: str, tasks: int, repeats: int) -> dict[str, Any]:
    pack = load_pack(ROOT / "taskpacks" / pack_name)
    cases = screens(pack, tasks)
    controls_ms, check_ms, nodes = [], [], []
    for interlock, xml in cases:
        hierarchy = Hierarchy(xml)
        screen = (hierarchy.screen.right, hierarchy.screen.bottom)
        nodes.append(len(hierarchy.nodes))
        # A fresh parse each time: the interlock decides on a fresh dump, never a cached one.
        controls_ms.append(1000 * timed(partial(_controls, interlock, xml, screen), repeats))
        check_ms.append(1000 * timed(partial(_check_centre_tap, interlock, xml, screen), repeats))
    selectors = len(cases[0][0].boundary) + len(cases[0][0].forbidden) if cases else 0
    return {
        "pack": pack_name,
        "screens": len(cases),
        "nodes_median": statistics.median(nodes) if nodes else 0,
        "stop_selectors": selectors,
        "controls_ms_median": round(statistics.median(controls_ms), 2) if cases else None,
        "check_ms_median": round(statistics.median(check_ms), 2) if cases else None,
        "check_ms_max": round(max(check_ms), 2) if cases else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=6, help="boundary tasks per pack whose screens are used")
    parser.add_argument("--repeats", type=int, default=5, help="timings per screen (median kept)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = [measure(name, args.tasks, args.repeats) for name in PACKS]
    result = {"machine": machine_facts(), "rows": rows}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    m = result["machine"]
    print(f"{m['cpu']}, {m['cores']} cores, load average {m['load_avg']}")
    print("pack             screens  nodes  selectors  controls ms  check ms (max)")
    for r in rows:
        print(
            f"{r['pack']:16} {r['screens']:7} {r['nodes_median']:6} {r['stop_selectors']:10} "
            f"{r['controls_ms_median']:12} {r['check_ms_median']:9} ({r['check_ms_max']})"
        )


if __name__ == "__main__":
    main()
