"""Certify every runnable task of both packs on virtual phones without drift (`make certify-all`).

The property "without drift every runnable task certifies" in full: one virtual phone per pack
(clone screens in Chromium, the real adb server), certified in parallel. `make test` checks a
stratified subset of the same tasks (tests/test_certify_farm.py); this is the whole set, too slow
for CI on a small machine (about a quarter of an hour on 2 cores).

Prints per pack the runnable and certified counts, the wall time, the median and the slowest task
time, and the machine (CPU model, cores, load average before and after). Exits 1 when a runnable
task did not certify (each one is named with its failed step and reason).

    .venv/bin/python benchmarks/certify_all.py [--json] [--packs train_ticketing,bank] [--out DIR]
        [--tasks ID,ID] [--verbose]

`--tasks` narrows the run to those task ids (a pack without any of them is left out), for
re-certifying the tasks a full run named; `--verbose` logs each task's result as it finishes.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine_info import machine_facts  # noqa: E402

from devices.certify import Certificate, certify  # noqa: E402
from devices.rig import load_rig, parse_rig, rig_on_phones  # noqa: E402
from devices.virtual import VirtualPhoneHost  # noqa: E402
from realbench.taskpack import load_pack  # noqa: E402

PACKS = {"train_ticketing": ROOT / "taskpacks" / "train_ticketing", "bank": ROOT / "taskpacks" / "bank"}
VIRTUAL = load_rig(ROOT / "rigs" / "virtual.yaml")


def machine() -> dict[str, Any]:
    return machine_facts()


def rig_for(phone: Any) -> Any:
    """The virtual rig's apps and accounts (with their fixtures) on one started phone."""
    return parse_rig(rig_on_phones(VIRTUAL, [phone], name="certify-all"))


def pack_figures(cert: Certificate) -> dict[str, Any]:
    runnable = [r for r in cert.results if r.runnable]
    times = [r.took_s for r in runnable]
    return {
        "pack": cert.app,
        "tasks": len(cert.results),
        "runnable": len(runnable),
        "certified": sum(r.certified for r in runnable),
        "median_task_s": round(statistics.median(times), 1) if times else None,
        "slowest_task_s": max(times) if times else None,
        "failures": [f"{r.task}: {r.failed_step} {r.reason}" for r in cert.failed()],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--packs", default=",".join(PACKS), help="comma-separated pack names")
    parser.add_argument("--out", type=Path, help="keep the certification files and pages here")
    parser.add_argument("--tasks", default="", help="comma-separated task ids: certify only these")
    parser.add_argument("--verbose", action="store_true", help="log each task's result as it finishes")
    args = parser.parse_args()
    # each boundary the interlock stops is a warning: expected here, and the report says it per task
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    if args.verbose:
        logging.getLogger("devices.certify").setLevel(logging.INFO)
    names = [n.strip() for n in args.packs.split(",") if n.strip()]
    unknown = [n for n in names if n not in PACKS]
    if unknown:
        parser.error(f"unknown packs {unknown}; known: {sorted(PACKS)}")
    packs_by_name = {n: load_pack(PACKS[n]) for n in names}
    wanted = {t.strip() for t in args.tasks.split(",") if t.strip()}
    task_ids: dict[str, list[str] | None] = {n: None for n in names}
    if wanted:
        for n, pack in packs_by_name.items():
            task_ids[n] = [t.id for t in pack.tasks if t.id in wanted]
        missing = wanted - {t for ids in task_ids.values() for t in ids or []}
        if missing:
            parser.error(f"no such task in {names}: {sorted(missing)}")
        names = [n for n in names if task_ids[n]]
    before = machine()
    with tempfile.TemporaryDirectory(prefix="certify-all-") as tmp:
        out = args.out or Path(tmp)
        with VirtualPhoneHost() as host:
            phones = host.start(len(names), screens="clone", drift="none")
            host.adb_connect()
            t0 = time.perf_counter()

            def one(pair: tuple[str, Any]) -> Certificate:
                name, phone = pair
                return certify(rig_for(phone), packs_by_name[name], out / name, task_ids=task_ids[name])

            with ThreadPoolExecutor(len(names)) as pool:
                certs = list(pool.map(one, zip(names, phones, strict=True)))
            took = time.perf_counter() - t0
    packs = [pack_figures(c) for c in certs]
    report = {
        "wall_s": round(took, 1),
        "runnable": sum(p["runnable"] for p in packs),
        "certified": sum(p["certified"] for p in packs),
        "packs": packs,
        "machine_before": before,
        "machine_after": machine(),
    }
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
    else:
        m = report["machine_before"]
        print(
            f"machine: {m['cpu']}, {m['cores']} cores, load average {m['load_avg']} → "
            f"{report['machine_after']['load_avg']}"
        )
        for p in packs:
            print(
                f"{p['pack']}: certified {p['certified']} of {p['runnable']} runnable ({p['tasks']} tasks), "
                f"median {p['median_task_s']} s per task, slowest {p['slowest_task_s']} s"
            )
            for failure in p["failures"]:
                print(f"  FAILED {failure}")
        print(
            f"all: certified {report['certified']} of {report['runnable']} runnable tasks in {took:.0f} s "
            f"({len(names)} virtual phones in parallel)"
        )
    return 0 if report["certified"] == report["runnable"] else 1


if __name__ == "__main__":
    sys.exit(main())
