"""Gain retention (METHODS.md §1): how much of a clone-trained gain survives on the real app.

All estimators here are ratios of (stratum-weighted) means of per-task quantities, so one routine,
`ratio_of_means`, gives each of them its Fieller, delta and task-cluster BCa intervals:

- R       = Ḡ_d / Ḡ_s on the sampled tasks (R_signal when the sample is the signal subset),
- R_pop   = Σ W_h ȳ^d_h / Σ W_h ȳ^s_h with W_h = N_h/N (finite-population corrected variance),
- R_JJ    = the same with the clone side judged by the judge too (§3: judge error on one side
            only lowers R),
- β       = Σ g^d g^s / Σ (g^s)² — the slope through the origin, a ratio of the means of g^d·g^s and
            (g^s)².
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import stats as sps

from analysis import stats
from analysis.columns import check_columns, parse_bool_column
from analysis.stats import (
    BootstrapResult,
    FloatArray,
    SignFlipResult,
    as_result_dict,
    cluster_bootstrap,
    delta_ci,
    fieller,
    fieller_g,
    mcnemar,
    sign_flip_test,
    stratified_means,
)
from realbench.errors import AnalysisError

log = logging.getLogger(__name__)


class NotIdentifiable(AnalysisError):
    """The data cannot identify this estimand (e.g. R_pop with a populated stratum never sampled)."""


RETENTION_COLUMNS = ("task", "stratum", "model", "env", "run", "success")


@dataclass(frozen=True)
class RatioEstimate:
    """A ratio of (stratum-weighted) means a/b with every interval METHODS §1 asks for."""

    label: str
    estimate: float
    numerator: float
    denominator: float
    v_aa: float
    v_bb: float
    v_ab: float
    q: float
    fieller_g: float
    fieller_ci: tuple[float, float] | None
    delta_ci: tuple[float, float]
    delta_reliable: bool
    se_linearised: float
    bootstrap: BootstrapResult | None
    n_tasks: int
    stratum_sizes: dict[str, int] = field(default_factory=dict)

    @property
    def estimable(self) -> bool:
        """False when Fieller's interval is unbounded (g ≥ 1): report the two means instead."""
        return self.fieller_ci is not None

    @property
    def bca_ci(self) -> tuple[float, float] | None:
        return None if self.bootstrap is None else self.bootstrap.bca_ci

    @property
    def percentile_ci(self) -> tuple[float, float] | None:
        return None if self.bootstrap is None else self.bootstrap.percentile_ci

    def to_dict(self) -> dict[str, Any]:
        out = as_result_dict(self)
        out["estimable"] = self.estimable
        out["bca_ci"] = None if self.bca_ci is None else list(self.bca_ci)
        out["percentile_ci"] = None if self.percentile_ci is None else list(self.percentile_ci)
        return out


def _stratum_variances(
    x: FloatArray, y: FloatArray, idx: np.ndarray, weights: FloatArray, population: FloatArray | None
) -> tuple[float, float, float]:
    """v_xx, v_yy, v_xy of the stratified means Σ W_h x̄_h: Σ W_h²(1 − f_h)·s²_h/n_h (§1).

    A stratum with one sampled task contributes no within-stratum variance estimate (0); the
    caller's bootstrap marks such designs unreliable.
    """
    v = np.zeros(3)
    for h in range(weights.size):
        sel = idx == h
        n_h = int(sel.sum())
        if n_h < 2:
            continue
        fpc = 1.0 - (n_h / population[h] if population is not None else 0.0)
        c = np.cov(np.vstack([x[sel], y[sel]]), ddof=1)
        v += weights[h] ** 2 * max(fpc, 0.0) / n_h * np.array([c[0, 0], c[1, 1], c[0, 1]])
    return float(v[0]), float(v[1]), float(v[2])


def ratio_of_means(
    numerator: ArrayLike,
    denominator: ArrayLike,
    *,
    strata: ArrayLike | None = None,
    population: dict[str, int] | None = None,
    label: str = "R",
    q: float = stats.Z95,
    n_resamples: int = 10_000,
    rng: np.random.Generator | None = None,
    alpha: float = 0.05,
) -> RatioEstimate:
    """Ratio of stratum-weighted means of two per-task arrays, with Fieller, delta and BCa intervals.

    Without ``population`` the weights are the sample shares n_h/n (R on the sampled tasks, no
    finite-population correction); with it, W_h = N_h/N and f_h = n_h/N_h (R_pop). ``n_resamples=0``
    skips the bootstrap.
    """
    a_i = np.asarray(numerator, dtype=float)
    b_i = np.asarray(denominator, dtype=float)
    if a_i.shape != b_i.shape or a_i.ndim != 1:
        raise AnalysisError("ratio_of_means: numerator and denominator must be 1-D and equally long")
    n = a_i.size
    if n < 2:
        raise AnalysisError("ratio_of_means needs at least 2 tasks", hint="select more tasks")
    labels = np.asarray(["all"] * n if strata is None else [str(s) for s in np.asarray(strata)])
    names, idx = np.unique(labels, return_inverse=True)
    sizes = np.bincount(idx)
    pop_arr: FloatArray | None = None
    if population is not None:
        missing = [str(h) for h in names if str(h) not in population]
        if missing:
            raise AnalysisError(
                f"population sizes missing for strata {missing}",
                hint="pass --population with every stratum sampled",
            )
        unsampled = [h for h, v in population.items() if v > 0 and h not in set(names.tolist())]
        if unsampled:
            raise NotIdentifiable(
                f"strata {unsampled} have population tasks but none sampled: R_pop is not identifiable",
                hint="sample at least 2 tasks from every stratum",
            )
        pop_arr = np.array([float(population[str(h)]) for h in names])
        if np.any(pop_arr < sizes):
            raise AnalysisError("a stratum has more sampled tasks than its population size")
        weights = pop_arr / pop_arr.sum()
    else:
        weights = sizes / n
    ones = np.ones((1, n))
    a = float(stratified_means(ones, a_i, idx, weights)[0])
    b = float(stratified_means(ones, b_i, idx, weights)[0])
    v_aa, v_bb, v_ab = _stratum_variances(a_i, b_i, idx, weights, pop_arr)
    estimate = a / b if b != 0 else float("nan")
    g = fieller_g(b, v_bb, q)
    f_ci = fieller(a, b, v_aa, v_bb, v_ab, q)
    d_ci = delta_ci(a, b, v_aa, v_bb, v_ab, q)
    se_lin = (
        (math.sqrt(max(v_aa - 2 * estimate * v_ab + estimate**2 * v_bb, 0.0)) / abs(b))
        if b != 0
        else math.inf
    )
    boot = None
    if n_resamples > 0:
        if rng is None:
            raise AnalysisError("ratio_of_means needs a seeded rng for the bootstrap")
        stacked = np.column_stack([a_i, b_i])

        def statistic(counts: FloatArray) -> FloatArray:
            means = stratified_means(counts, stacked, idx, weights)
            with np.errstate(invalid="ignore", divide="ignore"):
                return means[:, 0] / means[:, 1]

        boot = cluster_bootstrap(
            statistic, n, strata=labels.tolist(), n_resamples=n_resamples, alpha=alpha, rng=rng
        )
    return RatioEstimate(
        label=label,
        estimate=estimate,
        numerator=a,
        denominator=b,
        v_aa=v_aa,
        v_bb=v_bb,
        v_ab=v_ab,
        q=q,
        fieller_g=g,
        fieller_ci=f_ci,
        delta_ci=d_ci,
        delta_reliable=g < 0.1,
        se_linearised=se_lin,
        bootstrap=boot,
        n_tasks=n,
        stratum_sizes={str(h): int(s) for h, s in zip(names, sizes, strict=True)},
    )


# --------------------------------------------------------------------------------------------
# From a tidy table


@dataclass(frozen=True)
class MeanWithCI:
    mean: float
    ci: tuple[float, float]
    se: float
    n_tasks: int

    def to_dict(self) -> dict[str, Any]:
        return as_result_dict(self)


@dataclass(frozen=True)
class PairedTest:
    """Test of 'trained beats base' in one environment (McNemar for one run per task, else sign-flip)."""

    env: str
    method: str
    p_value: float
    statistic: float
    discordant_b: int | None = None
    discordant_c: int | None = None
    detail: SignFlipResult | None = None

    def to_dict(self) -> dict[str, Any]:
        return as_result_dict(self)


@dataclass(frozen=True)
class RetentionResult:
    base: str
    trained: str
    clone_env: str
    real_env: str
    n_tasks: int
    dropped_tasks: list[str]
    success_rates: dict[str, dict[str, float]]
    gain_clone: MeanWithCI
    gain_real: MeanWithCI
    transfer_gap: MeanWithCI
    retention: RatioEstimate
    slope: RatioEstimate
    retention_pop: RatioEstimate | None
    retention_jj: RatioEstimate | None
    tests: list[PairedTest]
    per_task: pd.DataFrame = field(repr=False)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        r = self.retention
        return {
            "base": self.base,
            "trained": self.trained,
            "clone_env": self.clone_env,
            "real_env": self.real_env,
            "n_tasks": self.n_tasks,
            "dropped_tasks": self.dropped_tasks,
            "success_rates": self.success_rates,
            "gain_clone": self.gain_clone.to_dict(),
            "gain_real": self.gain_real.to_dict(),
            "transfer_gap": self.transfer_gap.to_dict(),
            "retention": _finite(r.estimate),
            "estimable": r.estimable,
            "fieller_ci": None if r.fieller_ci is None else list(r.fieller_ci),
            "delta_ci": list(r.delta_ci),
            "bca_ci": None if r.bca_ci is None else list(r.bca_ci),
            "percentile_ci": None if r.percentile_ci is None else list(r.percentile_ci),
            "retention_detail": r.to_dict(),
            "slope": self.slope.to_dict(),
            "retention_pop": None if self.retention_pop is None else _finite(self.retention_pop.estimate),
            "retention_pop_detail": None if self.retention_pop is None else self.retention_pop.to_dict(),
            "retention_jj": None if self.retention_jj is None else _finite(self.retention_jj.estimate),
            "retention_jj_detail": None if self.retention_jj is None else self.retention_jj.to_dict(),
            "tests": [t.to_dict() for t in self.tests],
            "notes": self.notes,
        }


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _mean_ci(x: FloatArray, var: float, q: float) -> MeanWithCI:
    m = float(x.mean()) if x.size else float("nan")
    se = math.sqrt(max(var, 0.0))
    return MeanWithCI(m, (m - q * se, m + q * se), se, int(x.size))


def per_task_rates(
    df: pd.DataFrame, base: str, trained: str, clone_env: str, real_env: str, value: str = "success"
) -> tuple[pd.DataFrame, list[str]]:
    """Per-task success rates p̂[env, model] (wide) over the tasks that have all four cells.

    Returns the wide frame (index task; columns rate_/n_ per env×model, stratum) and the task ids
    dropped for missing cells.
    """
    sub = df[df["model"].isin([base, trained]) & df["env"].isin([clone_env, real_env])].copy()
    sub[value] = parse_bool_column(sub[value])
    sub = sub[sub[value].notna()]
    if sub.empty:
        raise AnalysisError(
            f"no rows for models {base!r}/{trained!r} in envs {clone_env!r}/{real_env!r}",
            hint=f"models present: {sorted(df['model'].astype(str).unique())}, envs: {sorted(df['env'].astype(str).unique())}",
        )
    for e in (clone_env, real_env):
        for m in (base, trained):
            if not ((sub["env"] == e) & (sub["model"] == m)).any():
                raise AnalysisError(
                    f"no scored episodes of model {m!r} in env {e!r}",
                    hint=f"envs present: {sorted(df['env'].astype(str).unique())}; was a clone store given as "
                    "--real (or the other way round)? --clone-env/--real-env name the env values",
                )
    sub[value] = sub[value].astype(bool).astype(float)
    grouped = sub.groupby(["task", "env", "model"], observed=True)[value].agg(["mean", "size"])
    wide = grouped.unstack(["env", "model"])
    cells = [(e, m) for e in (clone_env, real_env) for m in (base, trained)]
    have = pd.Series(True, index=wide.index)
    for e, m in cells:
        have &= wide.get(("size", e, m), pd.Series(np.nan, index=wide.index)).notna()
    dropped = sorted(str(t) for t in wide.index[~have])
    if dropped:
        log.warning(
            "dropping %d task(s) without runs of both models in both environments: %s", len(dropped), dropped
        )
    wide = wide[have]
    out = pd.DataFrame(index=wide.index)
    for e, m in cells:
        tag = f"{'s' if e == clone_env else 'd'}_{'r' if m == trained else 'b'}"
        out[f"p_{tag}"] = wide[("mean", e, m)].astype(float)
        out[f"n_{tag}"] = wide[("size", e, m)].astype(int)
    strata = sub.groupby("task")["stratum"].agg(lambda s: s.astype(str).iloc[0]) if "stratum" in sub else None
    out["stratum"] = strata.reindex(out.index) if strata is not None else "all"
    out["g_s"] = out["p_s_r"] - out["p_s_b"]
    out["g_d"] = out["p_d_r"] - out["p_d_b"]
    return out, dropped


def _paired_test(per_task: pd.DataFrame, side: str, env: str, rng: np.random.Generator) -> PairedTest:
    one_run = bool((per_task[f"n_{side}_b"] == 1).all() and (per_task[f"n_{side}_r"] == 1).all())
    if one_run:
        r = per_task[f"p_{side}_r"].to_numpy() > 0.5
        b = per_task[f"p_{side}_b"].to_numpy() > 0.5
        n10 = int(np.sum(r & ~b))
        n01 = int(np.sum(~r & b))
        return PairedTest(env, "mcnemar-exact", mcnemar(n10, n01), float(n10 - n01), n10, n01)
    d = per_task[f"g_{side}"].to_numpy()
    res = sign_flip_test(d, strata=per_task["stratum"].tolist(), rng=rng)
    return PairedTest(env, "sign-flip", res.p_value, res.statistic, detail=res)


def retention_from_table(
    df: pd.DataFrame,
    *,
    base: str,
    trained: str,
    clone_env: str = "clone",
    real_env: str = "real",
    population: dict[str, int] | None = None,
    n_resamples: int = 10_000,
    seed: int = 0,
    q: float = stats.Z95,
) -> RetentionResult:
    """Every §1 estimator from a tidy table with columns task, stratum, model, env, run, success
    (+ optional ``judged``: the judge's verdict, which gives R_JJ when clone rows have it)."""
    check_columns(df, RETENTION_COLUMNS, "retention")
    rng = np.random.default_rng(seed)
    per_task, dropped = per_task_rates(df, base, trained, clone_env, real_env)
    n = len(per_task)
    if n < 2:
        raise AnalysisError(
            f"only {n} task(s) have runs of both models on both sides",
            hint="retention needs at least 2 paired tasks",
        )
    g_s = per_task["g_s"].to_numpy()
    g_d = per_task["g_d"].to_numpy()
    strata = per_task["stratum"].astype(str).to_numpy()
    r = ratio_of_means(g_d, g_s, strata=strata, label="R", q=q, n_resamples=n_resamples, rng=rng)
    slope = ratio_of_means(
        g_d * g_s, g_s * g_s, strata=strata, label="slope", q=q, n_resamples=n_resamples, rng=rng
    )
    notes: list[str] = []
    r_pop = None
    if population:
        try:
            r_pop = ratio_of_means(
                g_d,
                g_s,
                strata=strata,
                population=population,
                label="R_pop",
                q=q,
                n_resamples=n_resamples,
                rng=rng,
            )
        except NotIdentifiable as exc:
            # R still stands; say why R_pop is missing instead of failing the whole analysis.
            log.warning("R_pop not reported: %s", exc.message)
            notes.append(f"R_pop not reported: {exc.message}")
    r_jj = None
    if "judged" in df.columns:
        # Both sides judged: where the device side has ground truth too (virtual phones, labels),
        # the judge's verdict is still the one used, so R_JJ isolates the judge's own effect.
        judged = df.assign(success=df["judged"])
        on_real = judged["env"] == real_env
        judged.loc[on_real & judged["success"].isna(), "success"] = df.loc[
            on_real & judged["success"].isna(), "success"
        ]
        has_clone_judged = judged.loc[judged["env"] == clone_env, "success"].notna().any()
        if has_clone_judged:
            pj, _ = per_task_rates(judged, base, trained, clone_env, real_env)
            if len(pj) >= 2:
                r_jj = ratio_of_means(
                    pj["g_d"].to_numpy(),
                    pj["g_s"].to_numpy(),
                    strata=pj["stratum"].astype(str).to_numpy(),
                    label="R_JJ",
                    q=q,
                    n_resamples=n_resamples,
                    rng=rng,
                )
    gap = g_s - g_d
    rates = {
        env: {
            base: float(per_task[f"p_{side}_b"].mean()),
            trained: float(per_task[f"p_{side}_r"].mean()),
        }
        for env, side in ((clone_env, "s"), (real_env, "d"))
    }
    tests = [_paired_test(per_task, "s", clone_env, rng), _paired_test(per_task, "d", real_env, rng)]
    return RetentionResult(
        base=base,
        trained=trained,
        clone_env=clone_env,
        real_env=real_env,
        n_tasks=n,
        dropped_tasks=dropped,
        success_rates=rates,
        gain_clone=_mean_ci(g_s, r.v_bb, q),
        gain_real=_mean_ci(g_d, r.v_aa, q),
        transfer_gap=_mean_ci(gap, r.v_aa + r.v_bb - 2 * r.v_ab, q),
        retention=r,
        slope=slope,
        retention_pop=r_pop,
        retention_jj=r_jj,
        tests=tests,
        per_task=per_task,
        notes=notes,
    )


def t_quantile(n_tasks: int, alpha: float = 0.05) -> float:
    """t quantile with n − 1 df, the small-sample alternative to z for Fieller's q (§1)."""
    return float(sps.t.ppf(1 - alpha / 2, max(n_tasks - 1, 1)))
