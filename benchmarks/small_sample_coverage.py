"""Coverage of the Fieller set for R with few tasks: z against t quantiles.

The regime where the choice matters: 15 signal tasks and a clone gain about 2 standard errors from
zero. Two models of a study:

- ``binomial``: per task a base rate b ~ Beta(2, 5), a clone effect u ~ N(μ, 0.35) clipped so
  that b + u stays in [0, 1], a device share τ ~ Beta(8, 2) independent of u (so R = E[τ] = 0.8),
  and 3 Bernoulli runs per model and side: the shape of a real study's per-task rates.
- ``normal``: per-task gains (clone, device) bivariate normal, SD 0.25, correlation 0.5, means
  (μ_s, 0.8·μ_s) with μ_s = 2·SD/√n.

Each simulated study computes the exact Fieller set (bounded or not) with q = z (1.96) and with
q = t (n − 1 df; one stratum) and checks whether it holds the true R. No bootstrap: the figure is
the set's own coverage. The median |clone gain|/SE of the studies is printed beside it.

    .venv/bin/python benchmarks/small_sample_coverage.py [--studies 600] [--tasks 15] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.stats import Z95, fieller_set  # noqa: E402
from benchmarks.machine_info import machine_facts, machine_line  # noqa: E402

TRUE_R = 0.8
SIGMA = 0.25
RHO = 0.5
RUNS = 3


def _gains_normal(rng: np.random.Generator, n_tasks: int) -> tuple[np.ndarray, np.ndarray]:
    mu_s = 2.0 * SIGMA / math.sqrt(n_tasks)
    cov = SIGMA**2 * np.array([[1.0, RHO], [RHO, 1.0]])
    g = rng.multivariate_normal(np.array([mu_s, TRUE_R * mu_s]), cov, size=n_tasks)
    return g[:, 0], g[:, 1]


def _gains_binomial(rng: np.random.Generator, n_tasks: int, effect: float) -> tuple[np.ndarray, np.ndarray]:
    b = rng.beta(2, 5, n_tasks)
    gamma = np.clip(rng.normal(effect, 0.35, n_tasks), -b, 1 - b)
    tau = rng.beta(8, 2, n_tasks)
    p = {"sb": b, "sr": b + gamma, "db": b, "dr": b + tau * gamma}
    r = {k: rng.binomial(RUNS, v) / RUNS for k, v in p.items()}
    return r["sr"] - r["sb"], r["dr"] - r["db"]


def coverage(n_studies: int, n_tasks: int, model: str, effect: float, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    qs = {"z": Z95, "t": float(sps.t.ppf(0.975, n_tasks - 1))}
    hits = dict.fromkeys(qs, 0)
    z_gain = []
    for _ in range(n_studies):
        g_s, g_d = _gains_normal(rng, n_tasks) if model == "normal" else _gains_binomial(rng, n_tasks, effect)
        c = np.cov(np.column_stack([g_d, g_s]).T, ddof=1) / n_tasks
        a, b = float(g_d.mean()), float(g_s.mean())
        z_gain.append(abs(b) / math.sqrt(c[1, 1]) if c[1, 1] > 0 else math.inf)
        for name, q in qs.items():
            pieces = fieller_set(a, b, float(c[0, 0]), float(c[1, 1]), float(c[0, 1]), q)
            hits[name] += any(lo <= TRUE_R <= hi for lo, hi in pieces)
    out: dict[str, float] = {"median_gain_se": float(np.median(z_gain)), "q_t": qs["t"]}
    for name in qs:
        p = hits[name] / n_studies
        out[name] = p
        out[f"{name}_mc_se"] = math.sqrt(p * (1 - p) / n_studies)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--studies", type=int, default=600)
    ap.add_argument("--tasks", type=int, nargs="+", default=[15, 30])
    ap.add_argument("--effect", type=float, default=0.2, help="mean clone effect of the binomial model")
    ap.add_argument("--seed", type=int, default=20261203)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    for model in ("binomial", "normal"):
        for n in args.tasks:
            res = coverage(args.studies, n, model, args.effect, args.seed + n)
            rows.append({"model": model, "tasks": n, **res})
    if args.json:
        print(json.dumps({"machine": machine_facts(), "studies": args.studies, "rows": rows}, indent=2))
        return
    print(f"Fieller-set coverage of R = {TRUE_R} (nominal 95 %), {args.studies} studies per row")
    print(f"machine: {machine_line()}")
    for r in rows:
        print(
            f"  {r['model']:<8} {r['tasks']:>3} tasks, median clone gain {r['median_gain_se']:.1f} SE: "
            f"z {100 * r['z']:.1f} % ± {100 * r['z_mc_se']:.1f}   "
            f"t({r['tasks'] - 1} df, q = {r['q_t']:.3f}) {100 * r['t']:.1f} % ± {100 * r['t_mc_se']:.1f}"
        )


if __name__ == "__main__":
    main()
