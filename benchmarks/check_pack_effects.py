"""Benchmark of check-pack's safety-by-effect rule on this machine (not a test).

For each shipped pack: the CPU and wall seconds of `check_pack` with every rule wired as the CLI
wires it (registered names, boundary rules, personal data, and each real-allowed task's golden plan
run browser-free on the clone with the account diffed per step), median of `--repeats` runs.
CPU time is the figure to compare across machines; wall time depends on the load printed beside it.

    .venv/bin/python benchmarks/check_pack_effects.py --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from clones.base import clone_names, get_clone  # noqa: E402
from clones.effects import effect_problems  # noqa: E402
from realbench.taskpack import check_pack, load_pack  # noqa: E402


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {cpu_model()}, {os.cpu_count()} CPUs, load average {os.getloadavg()}")
    for name in ("train_ticketing", "bank"):
        pack = load_pack(ROOT / "taskpacks" / name)
        clone = get_clone(pack.clone)
        cpu, wall = [], []
        for _ in range(args.repeats):
            c0, w0 = time.process_time(), time.perf_counter()
            problems = check_pack(
                pack,
                has_clone=lambda n: n in clone_names(),
                has_verifier=lambda c, n: n in get_clone(c).verifiers,
                has_side_effect_check=lambda c, n: n in get_clone(c).side_effect_checks,
                account_effect=lambda task, clone=clone: effect_problems(clone, task),  # type: ignore[misc]
            )
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
            assert not problems, problems
        print(
            f"{name}: {len(pack.tasks)} tasks, check_pack median CPU {statistics.median(cpu):.2f} s, "
            f"wall {statistics.median(wall):.2f} s"
        )
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
