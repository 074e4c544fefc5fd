"""Benchmark: clone RL environments at scale (bring-up, reset latency, step throughput, memory).

For each environment count N it builds a `CloneVectorEnv` of N live environments over W worker
processes (one Chromium each) at the model's resolution, then measures:

- ``bringup_s``: from nothing to N environments ready for their first reset (worker processes,
  browsers, clone sessions, pages loaded with the clone's runtime ready; their screens are empty
  until that reset swaps one in, and nothing is captured yet);
- ``first_observation_s``: from nothing to the first batched reset's observations of all N (the
  bring-up plus every environment's first screen, drawn and captured); ``first_reset_cpu_s``: the
  CPU seconds that first reset took, by process kind (``this_process``: the vector environment's
  own, decoding included);
- ``reset_p50_ms`` / ``reset_p95_ms``: single-environment reset latency (restore the task's start
  state, swap the screen in, capture screenshot + hierarchy), sampled over random environments;
  with the screen cache (the default; ``--no-screen-cache`` turns it off) the start screen's image
  and hierarchy are taken once per worker and reused, re-checked against a new capture and dump now
  and then (``screen_cache_counts``: observations served, stored, re-checked equal, found
  different, and misses that waited for another page's capture of the same screen instead of taking
  their own; ``unchanged``: steps that left a still page as it was and kept its last observation
  instead of a capture, with the checks of such steps that found the same image or another);
- ``steps_per_s``: aggregate environment steps per second while all N environments are stepped
  together with random taps and back keys (each step: act, wait for the page, capture, unless the
  step left a still page as it was: about two in three of these random steps, ``unchanged``);
- ``pss_per_env_mib``: summed PSS of every Chromium process (from /proc/PID/smaps_rollup) / N,
  after the stepping; ``pss_per_env_mib_while_stepping``: the same read after each batch step of
  the last two thirds of the stepping (median and max), since collected heaps and caches rise and
  fall while stepping and one reading may catch a low (reading it counts in neither ``steps_per_s``
  nor ``cpu_ms_per_step``);
- ``heap_collections``: the hosts' full collections of their renderers' heaps over the whole run
  (``devices/rl/heap_collection.py``): how many, their seconds in all, and failures;
- ``cpu_ms_per_step``: CPU time of this process and everything below it (worker processes,
  Playwright's drivers, Chromium) while stepping, per environment step, by process kind: unlike
  the latencies, it hardly moves with other work on the machine; ``chromium_cpu_ms_per_step``:
  Chromium's share by process type (browser, renderer, network, zygote, ...);
  ``page_faults_per_step``: minor page faults per step by process kind (on a virtual machine each
  one of fresh memory can cost microseconds; the browser process's come from the captures'
  buffers, docs/benchmarks.md);
- ``cpu``, ``cores``, ``load_avg_before`` and ``load_avg`` (1/5/15-minute, before and after the run):
  figures from a loaded machine are not comparable with a quiet one's; ``host_speed_ms_before`` and
  ``host_speed_ms`` (before and after): one core's time for a fixed piece of work, since the same
  host, idle, runs up to 40 % slower in some hours than in others; ``bytecode``: whether the modules
  had their bytecode on disk (``with_bytecode`` of ``source_modules``) and the interpreter writes it
  (``writes``): a spawned worker without it compiles every module it imports (0.6 s more each; 100
  environments over two came up 1.0-1.7 s later).

``--worker-import module:function`` calls a function in every worker before its host starts, e.g.
one that switches a setting off, so that two variants run alternately from the same tree.

    .venv/bin/python benchmarks/rl_envs.py --json                      # 100 environments
    .venv/bin/python benchmarks/rl_envs.py --scaling 1,10,50,100 --json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.machine_info import bytecode_facts, host_speed_ms, machine_facts  # noqa: E402
from devices.clone_browser import descendant_pids  # noqa: E402
from devices.rl.browser import process_type  # noqa: E402
from devices.rl.errors import ErrorInfo  # noqa: E402
from devices.rl.vector import CloneVectorEnv  # noqa: E402

BACK = json.dumps({"type": "key", "key": "back"})
TICKS = os.sysconf("SC_CLK_TCK")


def process_kind(cmdline: str) -> str:
    """ "python" (this process and the workers), "driver" (Playwright's) or "chromium:<type>"
    (`process_type`: browser, renderer, gpu-process, zygote; utility processes as "network" or
    "utility"), from a process's /proc command line. Chromium's children rewrite theirs into one
    space-separated string."""
    argv = cmdline.replace("\0", " ").split()
    name = Path(argv[0]).name if argv else ""
    if "chrom" not in name:
        return "python" if "python" in name else "driver"
    kind = process_type(argv)
    if kind == "utility":
        sub = next((a.split("=", 1)[1] for a in argv if a.startswith("--utility-sub-type=")), "")
        kind = "network" if "NetworkService" in sub else "utility"
    return f"chromium:{kind}"


@dataclass(frozen=True)
class Usage:
    """CPU seconds and minor page faults of a kind of process (`process_kind`)."""

    cpu_s: float = 0.0
    faults: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.cpu_s + other.cpu_s, self.faults + other.faults)

    def __sub__(self, other: Usage) -> Usage:
        return Usage(self.cpu_s - other.cpu_s, self.faults - other.faults)


Counters = dict[str, Usage]


def process_counters() -> Counters:
    """`Usage` so far of this process and its descendants, by `process_kind`. Processes that exited
    are not counted."""
    out: Counters = {}
    for pid in [os.getpid(), *descendant_pids(os.getpid())]:
        try:
            fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
            argv = (Path("/proc") / str(pid) / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        kind = process_kind(argv)
        used = Usage((int(fields[11]) + int(fields[12])) / TICKS, int(fields[7]))
        out[kind] = out.get(kind, Usage()) + used
    return out


def plus(a: Counters, b: Counters) -> Counters:
    return {k: a.get(k, Usage()) + b.get(k, Usage()) for k in dict.fromkeys([*a, *b])}


def minus(a: Counters, b: Counters) -> Counters:
    return {k: a.get(k, Usage()) - b.get(k, Usage()) for k in dict.fromkeys([*a, *b])}


def cpu_seconds_by_kind(counters: Counters) -> dict[str, float]:
    """The CPU seconds of `counters` by "python", "driver" and "chromium" (all of its processes)."""
    out = {"python": 0.0, "driver": 0.0, "chromium": 0.0}
    for kind, used in counters.items():
        out[kind.split(":")[0]] += used.cpu_s
    return out


def per_step(used: Counters, steps: int) -> tuple[dict[str, float], dict[str, float]]:
    """Chromium's CPU ms by process type and every kind's minor page faults, per step."""
    cpu = {
        kind.split(":")[1]: round(u.cpu_s / steps * 1000, 1)
        for kind, u in sorted(used.items())
        if kind.startswith("chromium:")
    }
    faults = {kind: round(u.faults / steps, 1) for kind, u in sorted(used.items())}
    return cpu, faults


def worker_stats(venv: CloneVectorEnv) -> list[dict[str, Any]]:
    """Each live worker's `EnvHost.stats()`."""
    return [s for s in venv.pool.stats() if isinstance(s, dict)]


def chromium_pss(stats: list[dict[str, Any]]) -> float:
    """Summed PSS (MiB) of the workers' Chromium processes, from their stats."""
    return float(sum(s["chromium_pss_mib"] for s in stats))


def pack_and_task(pack: str | None, task: str | None) -> tuple[str, str | None, tuple[str, ...]]:
    """train_ticketing when its pack is there, else the toy clone's pack."""
    if pack:
        return pack, task, ()
    if (REPO / "taskpacks" / "train_ticketing" / "pack.yaml").exists():
        return "train_ticketing", task or "book-earliest-g-second", ()
    return str(REPO / "taskpacks" / "toy"), "buy-item", ()


def random_actions(rng: np.random.Generator, n: int) -> list[str]:
    out = []
    for _ in range(n):
        if rng.random() < 0.25:
            out.append(BACK)
        else:
            x, y = int(rng.integers(50, 950)), int(rng.integers(80, 950))
            out.append(json.dumps({"type": "click", "x": x, "y": y}))
    return out


def measure(n: int, args: argparse.Namespace) -> dict[str, Any]:
    pack, task, imports = pack_and_task(args.pack, args.task)
    imports = (*imports, *args.worker_import)
    rng = np.random.default_rng(args.seed)
    load_before = [round(x, 2) for x in os.getloadavg()]
    speed_before = host_speed_ms()
    t0 = time.perf_counter()
    venv = CloneVectorEnv(
        n,
        pack,
        task,
        workers=min(args.workers, n),
        imports=imports,
        short_side=args.short_side,
        max_steps=500,
        screen_cache=not args.no_screen_cache,
    )
    bringup = time.perf_counter() - t0
    try:
        c0, own0 = process_counters(), time.process_time()
        venv.reset(seed=args.seed)
        first_observation = time.perf_counter() - t0
        c1, own1 = process_counters(), time.process_time()
        first_reset_cpu = {k: round(v, 2) for k, v in cpu_seconds_by_kind(minus(c1, c0)).items()}
        first_reset_cpu["this_process"] = round(own1 - own0, 2)
        resets = []
        for i in range(args.resets):
            key = venv.keys[int(rng.integers(n))]
            t = time.perf_counter()
            [result] = venv.pool.reset([(key, args.seed + i, None)])
            resets.append(time.perf_counter() - t)
            if isinstance(result, ErrorInfo):
                raise result.to_exception()
        venv.reset(seed=args.seed)
        venv.step(random_actions(rng, n))  # warm-up
        steps = 0
        aborted = 0
        pss_samples: list[float] = []
        sampling = 0.0  # reading memory is not stepping: neither its time nor its CPU counts
        counters_before = process_counters()
        sampled: Counters = {}
        t = time.perf_counter()
        while time.perf_counter() - t < args.seconds:
            _, _, terminated, truncated, infos = venv.step(random_actions(rng, n))
            steps += n
            aborted += int(np.sum(infos.get("aborted", np.zeros(n, dtype=bool))))
            done = terminated | truncated
            if done.any():
                venv.reset(options={"reset_mask": done})
            if time.perf_counter() - t > args.seconds / 3:  # past the first collections
                s0, c0 = time.perf_counter(), process_counters()
                pss_samples.append(chromium_pss(worker_stats(venv)))
                # the workers read /proc for it, on their CPU
                sampled = plus(sampled, minus(process_counters(), c0))
                sampling += time.perf_counter() - s0
        elapsed = time.perf_counter() - t - sampling
        stepping = minus(minus(process_counters(), counters_before), sampled)
        cpu_per_step = {k: round(v / steps * 1000, 1) for k, v in cpu_seconds_by_kind(stepping).items()}
        chromium_cpu, faults_per_step = per_step(stepping, steps)
        stats = worker_stats(venv)
        pss = chromium_pss(stats)
        pss_samples.append(pss)
        cache = {
            k: sum(s["screen_cache"][k] for s in stats)
            for k in (
                "hits",
                "stored",
                "verified",
                "mismatches",
                "waited",
                "unchanged",
                "unchanged_verified",
                "unchanged_mismatches",
            )
        }
        collections = {
            k: sum(s["heap_collections"][k] for s in stats) for k in ("collections", "seconds", "failures")
        }
    finally:
        venv.close()
    ms = np.asarray(resets) * 1000
    return {
        **machine_facts(),
        "load_avg_before": load_before,
        "host_speed_ms_before": speed_before,
        "envs": n,
        "workers": min(args.workers, n),
        "short_side": args.short_side,
        "pack": pack,
        "task": task,
        "bringup_s": round(bringup, 2),
        "first_observation_s": round(first_observation, 2),
        "first_reset_cpu_s": first_reset_cpu,
        "reset_p50_ms": round(float(np.percentile(ms, 50)), 1),
        "reset_p95_ms": round(float(np.percentile(ms, 95)), 1),
        "screen_cache": not args.no_screen_cache,
        "screen_cache_counts": cache,
        "heap_collections": {**collections, "seconds": round(collections["seconds"], 2)},
        "steps_per_s": round(steps / elapsed, 1),
        "cpu_ms_per_step": {**cpu_per_step, "all": round(sum(cpu_per_step.values()), 1)},
        "chromium_cpu_ms_per_step": chromium_cpu,
        "page_faults_per_step": faults_per_step,
        "pss_per_env_mib": round(pss / n, 1),
        "pss_total_mib": round(pss, 1),
        "pss_per_env_mib_while_stepping": {
            "samples": len(pss_samples),
            "median": round(float(np.median(pss_samples)) / n, 1),
            "max": round(max(pss_samples) / n, 1),
        },
        "aborted_steps": aborted,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--envs", type=int, default=100)
    parser.add_argument("--scaling", default="", help="comma-separated environment counts, e.g. 1,10,50,100")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (one Chromium each)")
    parser.add_argument("--short-side", type=int, default=448)
    parser.add_argument("--resets", type=int, default=100, help="single-environment resets to time")
    parser.add_argument("--seconds", type=float, default=15.0, help="how long to step")
    parser.add_argument("--pack", default=None)
    parser.add_argument("--task", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--no-screen-cache",
        action="store_true",
        help="capture every reset's screen (EnvConfig.screen_cache off)",
    )
    parser.add_argument(
        "--worker-import",
        action="append",
        default=[],
        metavar="MODULE[:FUNCTION]",
        help="imported (and called) in every worker at start-up, e.g. to A/B one setting; repeatable",
    )
    parser.add_argument("--json", action="store_true", help="print JSON only")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    bytecode = bytecode_facts()
    if bytecode["with_bytecode"] < bytecode["source_modules"]:
        logging.warning(
            "%d of %d modules have no bytecode on disk: every worker compiles them from source, "
            "1.0-1.7 s more to bring 100 up on 2 cores; run once with PYTHONDONTWRITEBYTECODE unset",
            bytecode["source_modules"] - bytecode["with_bytecode"],
            bytecode["source_modules"],
        )
    counts = [int(c) for c in args.scaling.split(",") if c.strip()] or [args.envs]
    rows = []
    for n in counts:
        row = measure(n, args)
        rows.append(row)
        if not args.json:
            print(json.dumps(row), flush=True)
    if args.json:
        print(json.dumps(rows[0] if len(rows) == 1 else {**rows[-1], "scaling": rows}, indent=2))


if __name__ == "__main__":
    main()
