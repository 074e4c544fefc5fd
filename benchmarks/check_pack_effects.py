"""Benchmark of check-pack's safety-by-effect rule on this machine (not a test).

For each shipped pack: the CPU and wall seconds of `check_pack` with every rule wired as the CLI
wires it (registered names, verifier contracts, boundary rules, personal data, and each real-allowed task's golden plan
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

from machine_info import cpu_model  # noqa: E402

from clones.contracts import pack_checks  # noqa: E402
from realbench.taskpack import check_pack, load_pack  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"machine: {cpu_model()}, {os.cpu_count()} CPUs, load average {os.getloadavg()}")
    for name in ("train_ticketing", "bank"):
        pack = load_pack(ROOT / "taskpacks" / name)
        cpu, wall = [], []
        for _ in range(args.repeats):
            c0, w0 = time.process_time(), time.perf_counter()
            problems = check_pack(pack, **pack_checks())
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
