"""Distinct task instances of each shipped pack across seeds, and what instantiation costs (not a test).

An instance is a task with its parameters drawn for one seed; `from_state` parameters are drawn from
the task's start state (docs/adding-a-task.md). Prints, per pack, the distinct instructions and
distinct parameter sets over seeds 0..N-1, the tasks that draw from the state, and the CPU
milliseconds per instantiation (median of the per-task means; start states are cached per setup).

    .venv/bin/python benchmarks/task_variety.py --seeds 50
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from machine_info import cpu_model  # noqa: E402

import clones.registry  # noqa: E402,F401  (registers the clones and their samplers)
from realbench.taskpack import StateParam, load_pack  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50)
    args = parser.parse_args()
    print(f"machine: {cpu_model()}, {os.cpu_count()} CPUs, load average {os.getloadavg()}")
    for name in ("train_ticketing", "bank"):
        pack = load_pack(ROOT / "taskpacks" / name)
        instructions: set[tuple[str, str]] = set()
        params: set[tuple[str, str]] = set()
        per_task_ms: list[float] = []
        for task in pack.tasks:
            today = task.clone.setup.clock.date()
            task.instantiate(0, today)  # builds and caches the start state outside the timing
            t0 = time.process_time()
            for seed in range(args.seeds):
                inst = task.instantiate(seed, today)
                instructions.add((task.id, inst.instruction))
                params.add((task.id, json.dumps(inst.params, sort_keys=True, ensure_ascii=False)))
            per_task_ms.append((time.process_time() - t0) * 1000 / args.seeds)
        sampled = sum(any(isinstance(s, StateParam) for s in t.params.values()) for t in pack.tasks)
        print(
            f"{name}: {len(pack.tasks)} tasks ({sampled} draw from the state), seeds 0-{args.seeds - 1}: "
            f"{len(instructions)} distinct instructions, {len(params)} distinct parameter sets; "
            f"median {statistics.median(per_task_ms):.2f} ms CPU per instantiation "
            f"(slowest task {max(per_task_ms):.2f} ms)"
        )


if __name__ == "__main__":
    main()
