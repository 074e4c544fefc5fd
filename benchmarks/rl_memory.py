"""Benchmark: where an RL environment's memory goes, by Chromium's own allocators.

One environment host (one browser, as one worker of `rl_envs.py` runs) brings up N environments,
steps them with random taps and back keys for a while, then reads the PSS of its Chromium processes
and asks the browser for a memory dump over DevTools (`devices.rl.memory_infra`). Printed per
environment: the PSS, each process kind's largest allocators (committed sizes: V8's heap, Oilpan's
``blink_gc``, PartitionAlloc's ``malloc``, the compositor's tiles ``cc``...), and the tiles split into
those the pages' layers hold and those the compositor's pools keep freed for reuse. The allocators'
sizes rank the consumers; the PSS is the measure of the whole (shared memory, the tiles, is counted
in the renderer and again in the browser, which draws them).

``--browser-arg`` adds a Chromium switch (repeatable), to compare a setting with the same tree.

    .venv/bin/python benchmarks/rl_memory.py --json                   # 50 environments, 12 s of steps
    .venv/bin/python benchmarks/rl_memory.py --envs 20 --seconds 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.machine_info import cpu_model, host_speed_ms  # noqa: E402
from benchmarks.rl_envs import pack_and_task, random_actions  # noqa: E402
from devices.rl import cdp  # noqa: E402
from devices.rl.config import EnvConfig  # noqa: E402
from devices.rl.host import EnvHost, ResetRequest, StepRequest  # noqa: E402
from devices.rl.memory_infra import MIB, parse_dump, request_dump  # noqa: E402
from devices.rl.transitions import Transition  # noqa: E402

TOP = 8  # allocators listed per process kind


def measure(args: argparse.Namespace) -> dict[str, Any]:
    pack, task, _ = pack_and_task(args.pack, args.task)
    config = EnvConfig(pack=pack, task_id=task, short_side=args.short_side, max_steps=500)
    rng = np.random.default_rng(args.seed)
    load_before = [round(x, 2) for x in os.getloadavg()]
    speed_before = host_speed_ms()
    host = EnvHost(browser_args=tuple(args.browser_arg), renderers=args.renderers).start()
    try:
        ids = host.create([config] * args.envs)
        host.reset([ResetRequest(i, seed=args.seed + i) for i in ids])
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < args.seconds:
            results = host.step(
                [StepRequest(i, a) for i, a in zip(ids, random_actions(rng, len(ids)), strict=True)]
            )
            steps += len(ids)
            ended = [
                i
                for i, r in zip(ids, results, strict=True)
                if not isinstance(r, Transition) or r.terminated or r.truncated
            ]
            if ended:
                host.reset([ResetRequest(i) for i in ended])
        stepped_s = time.perf_counter() - t0
        pss = float(host.stats()["chromium_pss_mib"])
        [endpoint] = cdp.devtools_endpoints(None)
        processes = parse_dump(asyncio.run(request_dump(endpoint)))
    finally:
        host.close()
    n = args.envs
    by_kind: dict[str, dict[str, float]] = {}
    for proc in processes:
        kind = by_kind.setdefault(proc.kind, {})
        for name, size in proc.allocators.items():
            kind[name] = kind.get(name, 0.0) + size / MIB / n
    tiles_in_use = sum(p.tiles_in_use for p in processes) / MIB / n
    tiles_free = sum(p.tiles_free for p in processes) / MIB / n
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "envs": n,
        "renderers": args.renderers,
        "browser_args": args.browser_arg,
        "steps_per_s": round(steps / stepped_s, 1),
        "pss_per_env_mib": round(pss / n, 2),
        "tiles_per_env_mib": {"in_use": round(tiles_in_use, 2), "free_in_pools": round(tiles_free, 2)},
        "allocators_per_env_mib": {
            kind: {name: round(v, 3) for name, v in sorted(sizes.items(), key=lambda kv: -kv[1])[:TOP]}
            for kind, sizes in sorted(by_kind.items())
        },
        "load_avg_before": load_before,
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "host_speed_ms_before": speed_before,
        "host_speed_ms": host_speed_ms(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--envs", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=12.0, help="how long to step before the dump")
    parser.add_argument("--renderers", type=int, default=1, help="renderer processes of the browser")
    parser.add_argument("--short-side", type=int, default=448)
    parser.add_argument("--pack", default=None)
    parser.add_argument("--task", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--browser-arg", action="append", default=[], help="an extra Chromium switch")
    parser.add_argument("--json", action="store_true", help="print JSON only")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    result = measure(args)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['cpu']} · {result['cores']} cores · load {result['load_avg_before']} before")
    print(
        f"{result['envs']} environments, {result['steps_per_s']} steps/s: {result['pss_per_env_mib']} MiB PSS each"
    )
    tiles = result["tiles_per_env_mib"]
    print(f"tiles per environment: {tiles['in_use']} MiB in use, {tiles['free_in_pools']} MiB free in pools")
    for kind, sizes in result["allocators_per_env_mib"].items():
        print(f"{kind}: " + ", ".join(f"{name} {v:.2f}" for name, v in sizes.items()))


if __name__ == "__main__":
    main()
