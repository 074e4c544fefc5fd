"""Benchmark of the analysis statistics: a 10⁴-resample BCa retention interval.

Data: 500 tasks × 2 models × 2 environments × 3 runs (6 000 episodes, synthetic outcomes with a
known retention of 0.8). The timed call is the whole `ratio_of_means` (Fieller, delta, 10⁴
task-cluster resamples, jackknife acceleration) on the per-task gains, plus — reported separately
— the full `retention_from_table` (which adds the slope estimator, per-task aggregation and two
sign-flip tests with 10⁵ flips each).

    .venv/bin/python benchmarks/analysis.py [--json] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

# This script shares its name with the package it measures: drop its own folder from the import
# path so `analysis` resolves to the package.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from analysis.retention import per_task_rates, ratio_of_means, retention_from_table  # noqa: E402


def synthetic_table(n_tasks: int = 500, runs: int = 3, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    b = rng.beta(2, 5, n_tasks)
    gamma = rng.beta(2, 2, n_tasks) * (1 - b)
    tau = rng.beta(8, 2, n_tasks)
    probs = {
        ("base", "clone"): b,
        ("trained", "clone"): b + gamma,
        ("base", "real"): b,
        ("trained", "real"): b + tau * gamma,
    }
    frames = []
    tasks = np.array([f"task{i:04d}" for i in range(n_tasks)])
    for (model, env), p in probs.items():
        ok = rng.random((runs, n_tasks)) < p
        frames.append(
            pd.DataFrame(
                {
                    "task": np.tile(tasks, runs),
                    "stratum": np.tile(np.where(gamma > 0.25, "gain", "mixed"), runs),
                    "model": model,
                    "env": env,
                    "run": np.repeat(np.arange(runs), n_tasks),
                    "success": ok.ravel(),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    table = synthetic_table()
    per_task, _ = per_task_rates(table, "base", "trained", "clone", "real")
    g_d, g_s = per_task["g_d"].to_numpy(), per_task["g_s"].to_numpy()
    strata = per_task["stratum"].to_numpy()
    times, full = [], []
    est = None
    for i in range(args.repeats):
        t0 = time.perf_counter()
        est = ratio_of_means(g_d, g_s, strata=strata, n_resamples=10_000, rng=np.random.default_rng(i))
        times.append(time.perf_counter() - t0)
    for i in range(max(1, args.repeats // 2)):
        t0 = time.perf_counter()
        retention_from_table(table, base="base", trained="trained", n_resamples=10_000, seed=i)
        full.append(time.perf_counter() - t0)
    assert est is not None
    result = {
        "bootstrap_10k_500_tasks_s": round(statistics.median(times), 4),
        "bootstrap_10k_500_tasks_s_all": [round(t, 4) for t in times],
        "retention_from_table_500_tasks_s": round(statistics.median(full), 4),
        "episodes": len(table),
        "tasks": int(per_task.shape[0]),
        "retention": round(est.estimate, 4),
        "bca_ci": [round(x, 4) for x in est.bca_ci] if est.bca_ci else None,
        "python": platform.python_version(),
        "numpy": np.__version__,
    }
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k}: {v}")


if __name__ == "__main__":
    main()
