"""Simulation studies: the intervals cover a known true retention, and Rogan–Gladen removes judge bias.

The coverage study uses 1 000 bootstrap resamples per simulated study instead of the 10⁴ the
commands use: coverage of a 95 % interval is insensitive to that, and it keeps the study fast.
"""

from __future__ import annotations

import numpy as np
import pytest

from analysis.retention import ratio_of_means, retention_from_table
from analysis.stats import rogan_gladen, rogan_gladen_variance
from tests.analysis_fixtures import judged_table

N_STUDIES = 500
N_TASKS = 60
RUNS = 3
TRUE_R = 0.8


def simulate_gains(
    rng: np.random.Generator, n_studies: int, n_tasks: int, m: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per-task observed gains (clone, device) of many studies with true retention TRUE_R.

    Base success b ~ Beta(2, 5) on both sides; clone gain γ = u(1 − b), u ~ Beta(2, 2); the device
    keeps a task-specific fraction τ ~ Beta(8, 2) (mean 0.8) of it, independent of γ, so
    E[g_d]/E[g_s] = E[τ] = 0.8 exactly. Outcomes are m Bernoulli runs per task, model and side.
    """
    shape = (n_studies, n_tasks)
    b = rng.beta(2, 5, shape)
    gamma = rng.beta(2, 2, shape) * (1 - b)
    tau = rng.beta(8, 2, shape)
    p = {"sb": b, "sr": b + gamma, "db": b, "dr": b + tau * gamma}
    rate = {k: rng.binomial(m, v) / m for k, v in p.items()}
    return rate["sr"] - rate["sb"], rate["dr"] - rate["db"]


@pytest.mark.slow
def test_fieller_and_bca_cover_true_retention():
    rng = np.random.default_rng(20261130)
    g_s, g_d = simulate_gains(rng, N_STUDIES, N_TASKS, RUNS)
    fieller_hits = fieller_n = bca_hits = bca_n = 0
    boot_rng = np.random.default_rng(7)
    for i in range(N_STUDIES):
        est = ratio_of_means(g_d[i], g_s[i], n_resamples=1000, rng=boot_rng)
        if est.fieller_ci is not None:
            fieller_n += 1
            fieller_hits += est.fieller_ci[0] <= TRUE_R <= est.fieller_ci[1]
        if est.bca_ci is not None:
            bca_n += 1
            bca_hits += est.bca_ci[0] <= TRUE_R <= est.bca_ci[1]
    assert fieller_n >= 0.9 * N_STUDIES and bca_n >= 0.9 * N_STUDIES
    fieller_cov = fieller_hits / fieller_n
    bca_cov = bca_hits / bca_n
    assert fieller_cov >= 0.93, fieller_cov
    assert bca_cov >= 0.93, bca_cov
    # Not trivially wide: a 95 % interval must miss sometimes.
    assert fieller_cov < 0.995 and bca_cov < 0.995


@pytest.mark.slow
def test_rogan_gladen_removes_simulated_judge_bias():
    rng = np.random.default_rng(5)
    true_p, se, sp = 0.6, 0.8, 0.95
    n_judged, n_val = 400, 300
    # Judged device episodes: the judge sees the truth through its Se/Sp.
    truth = rng.random((N_STUDIES, n_judged)) < true_p
    verdict = np.where(truth, rng.random(truth.shape) < se, rng.random(truth.shape) > sp)
    q = verdict.mean(axis=1)
    # An independent validation set with ground truth estimates Se and Sp.
    v_truth = rng.random((N_STUDIES, n_val)) < 0.5
    v_verdict = np.where(v_truth, rng.random(v_truth.shape) < se, rng.random(v_truth.shape) > sp)
    n_pos = v_truth.sum(axis=1)
    n_neg = n_val - n_pos
    se_hat = (v_truth & v_verdict).sum(axis=1) / n_pos
    sp_hat = (~v_truth & ~v_verdict).sum(axis=1) / n_neg
    corrected = rogan_gladen(q, se_hat, sp_hat)
    raw_bias = q.mean() - true_p
    corrected_bias = corrected.mean() - true_p
    assert raw_bias == pytest.approx(-0.10, abs=0.01)  # 0.6·0.8 + 0.4·0.05 − 0.6
    assert abs(corrected_bias) < 0.01
    # The variance formula matches the spread of the corrected estimates.
    var = rogan_gladen_variance(q, se_hat, sp_hat, n_judged, n_pos, n_neg)
    assert np.mean(var) == pytest.approx(np.var(corrected, ddof=1), rel=0.25)
    # Coverage of the normal interval built from it.
    half = 1.96 * np.sqrt(var)
    coverage = np.mean((corrected - half <= true_p) & (true_p <= corrected + half))
    assert coverage >= 0.93


@pytest.mark.slow
def test_judge_error_on_one_side_lowers_measured_retention():
    """§3: with the verifier on the clone and an imperfect judge on the device, the observed device
    gain is (Se + Sp − 1) × the true one, so R drops; judging the clone side too (R_JJ) cancels it."""
    rng = np.random.default_rng(11)
    se, sp, n_tasks, m = 0.85, 0.9, 1500, 2
    b = rng.beta(2, 5, n_tasks)
    gamma = rng.beta(2, 2, n_tasks) * (1 - b)
    tau = rng.beta(8, 2, n_tasks)
    p = {
        ("base", "clone"): b,
        ("trained", "clone"): b + gamma,
        ("base", "real"): b,
        ("trained", "real"): b + tau * gamma,
    }
    table = judged_table(rng, p, se, sp, m, real_scored_by_judge=True)
    res = retention_from_table(table, base="base", trained="trained", n_resamples=0)
    assert res.retention.estimate == pytest.approx((se + sp - 1) * TRUE_R, abs=0.06)
    assert res.retention_jj is not None
    assert res.retention_jj.estimate == pytest.approx(TRUE_R, abs=0.07)
    assert res.retention_jj.fieller_ci[0] <= TRUE_R <= res.retention_jj.fieller_ci[1]


@pytest.mark.slow
def test_t_covers_where_z_falls_short_with_few_tasks():
    """benchmarks/small_sample_coverage.py's regime: 15 tasks, clone gain about 2 SE from zero."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks.small_sample_coverage import coverage

    res = coverage(1500, 15, "binomial", 0.2, seed=11)
    assert res["t"] >= 0.94, res
    assert res["t"] > res["z"], res
