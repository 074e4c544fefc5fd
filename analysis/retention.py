"""Gain retention (docs/methods.md §1): how much of a clone-trained gain survives on the real app.

Three estimands, always named (§1):

- **R_signal**  — the signal stratum only (tasks whose clone gain was significant, stratum ``gain``),
                  the figure MobileGym publishes;
- **R_sample**  — every sampled task, unweighted: a design-dependent figure, shown only as such;
- **R_pop**     — Horvitz–Thompson over the population strata, W_h = N_h/N, with the
                  finite-population correction: the figure for the whole reproducible pack.

Each is a ratio of (stratum-weighted) means, so one routine, `ratio_of_means`, gives each its
Fieller, delta and task-cluster BCa intervals. The same routine gives R_JJ (the clone side judged
too, §3) and the slope through the origin β = Σ g^d g^s / Σ (g^s)².

R is reported only when it is estimable: a positive clone gain whose interval excludes 0
(Fieller's g < 1). Otherwise the point estimate, delta and bootstrap intervals are withheld and the
exact Fieller set and both gains with their intervals are reported instead.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from enum import StrEnum
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
    fieller_set,
    format_set,
    gain_bias,
    holm,
    mcnemar,
    sign_flip_test,
    stratified_means,
)
from realbench.errors import AnalysisError

log = logging.getLogger(__name__)


class NotIdentifiable(AnalysisError):
    """The data cannot identify this estimand (e.g. R_pop with a populated stratum never sampled)."""


RETENTION_COLUMNS = ("task", "stratum", "model", "env", "run", "success")
SIGNAL_STRATUM = "gain"
# Neighbours for collapsing strata, ordered by the clone gain they hold (§1: a stratum with fewer
# than 2 sampled tasks has no variance estimate). Other stratum names follow, alphabetically.
STRATUM_ORDER = ("gain", "mixed", "both-pass", "both-fail", "loss")
MIN_TASKS_PER_STRATUM = 2


class Estimand(StrEnum):
    SIGNAL = "signal"
    SAMPLE = "sample"
    POPULATION = "population"


ESTIMAND_LABELS = {Estimand.SIGNAL: "R_signal", Estimand.SAMPLE: "R_sample", Estimand.POPULATION: "R_pop"}
ESTIMAND_MEANING = {
    Estimand.SIGNAL: "signal stratum only (significant clone gain), as MobileGym reports",
    Estimand.SAMPLE: "all sampled tasks, unweighted (depends on the sampling design)",
    Estimand.POPULATION: "Horvitz–Thompson over the population strata (W_h = N_h/N)",
}


class BootstrapStatus(StrEnum):
    RAN = "ran"
    NOT_RUN = "not run"  # --resamples 0
    NOT_PRESENTED = "not presented"  # R not estimable: a bootstrap interval would look precise


def collapse_strata(sizes: dict[str, int], min_tasks: int = MIN_TASKS_PER_STRATUM) -> dict[str, str]:
    """Stratum → variance group. The rule: strata are ordered gain, mixed, both-pass, both-fail,
    loss (then other names alphabetically); while a group has fewer than ``min_tasks`` sampled
    tasks it joins the next group in that order (the previous one when it is last). A group is
    named by its members joined with '+'."""
    rank = {h: i for i, h in enumerate(STRATUM_ORDER)}
    order = sorted(sizes, key=lambda h: (rank.get(h, len(rank)), h))
    groups: list[list[str]] = [[h] for h in order]
    while len(groups) > 1:
        small = next((i for i, g in enumerate(groups) if sum(sizes[h] for h in g) < min_tasks), None)
        if small is None:
            break
        other = small + 1 if small + 1 < len(groups) else small - 1
        lo, hi = sorted((small, other))
        groups[lo : hi + 1] = [groups[lo] + groups[hi]]
    return {h: "+".join(g) for g in groups for h in g}


@dataclass(frozen=True)
class RatioEstimate:
    """A ratio of (stratum-weighted) means a/b with every interval METHODS §1 asks for.

    ``estimate`` is the raw ratio, kept for diagnostics; what may be quoted is ``value``, which is
    None when the ratio is not estimable (``reason`` says why).
    """

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
    fieller_set: list[tuple[float, float]]
    delta_ci: tuple[float, float] | None
    delta_reliable: bool
    se_linearised: float
    bootstrap: BootstrapResult | None
    bootstrap_status: str
    n_tasks: int
    reason: str | None = None
    degenerate: bool = False
    stratum_sizes: dict[str, int] = field(default_factory=dict)
    collapsed: dict[str, str] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    # Which of numerator / denominator had no variance across tasks and took the binomial floor.
    floored: tuple[str, ...] = ()

    @property
    def estimable(self) -> bool:
        """False when the ratio has no finite confidence set or no positive clone gain."""
        return self.reason is None

    @property
    def value(self) -> float | None:
        return self.estimate if self.estimable and math.isfinite(self.estimate) else None

    @property
    def bca_ci(self) -> tuple[float, float] | None:
        return None if self.bootstrap is None else self.bootstrap.bca_ci

    @property
    def percentile_ci(self) -> tuple[float, float] | None:
        return None if self.bootstrap is None else self.bootstrap.percentile_ci

    @property
    def fieller_set_text(self) -> str:
        return format_set(self.fieller_set)

    def weights_mean(self, values: np.ndarray, strata: np.ndarray) -> float:
        """Σ_h W_h·mean_h(values) with this estimate's stratum weights."""
        w = np.array([self.weights[str(h)] / self.stratum_sizes[str(h)] for h in strata])
        return float(w @ values)

    def to_dict(self) -> dict[str, Any]:
        out = as_result_dict(self)
        out["estimate"] = self.value
        out["estimable"] = self.estimable
        out["fieller_set"] = _json_pieces(self.fieller_set)
        out["fieller_set_text"] = self.fieller_set_text
        out["bca_ci"] = None if self.bca_ci is None else list(self.bca_ci)
        out["percentile_ci"] = None if self.percentile_ci is None else list(self.percentile_ci)
        return out


def _json_pieces(pieces: list[tuple[float, float]]) -> list[list[float | None]]:
    """Intervals for JSON: an infinite end is null (JSON has no ∞); ``fieller_set_text`` has ∞."""
    return [[lo if math.isfinite(lo) else None, hi if math.isfinite(hi) else None] for lo, hi in pieces]


def _not_estimable_reason(a: float, b: float, g: float, q: float) -> str | None:
    if b < 0:
        what = (
            "a ratio of losses is not retention" if a < 0 else "a negative clone gain has nothing to retain"
        )
        return f"not estimable: the clone gain is negative ({b:+.3f}): {what}"
    if b == 0:
        return "not estimable: the clone gain is zero: there is no gain to retain"
    if g >= 1:
        return (
            f"not estimable: the clone gain's {stats_level(q)} interval includes 0 (Fieller's g = {g:.2f} ≥ 1), "
            "so the ratio's confidence set is unbounded; read the two gains separately"
        )
    return None


def stats_level(q: float) -> str:
    """The confidence level a two-sided quantile q stands for (95% for 1.96)."""
    return f"{100 * (2 * sps.norm.cdf(q) - 1):.0f}%" if q < 5 else "confidence"


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
    binomial_var: tuple[ArrayLike, ArrayLike] | None = None,
) -> RatioEstimate:
    """Ratio of stratum-weighted means of two per-task arrays, with Fieller, delta and BCa intervals.

    ``binomial_var``: per-task sampling variances of the numerator and the denominator (from each
    task's runs). A mean whose between-task variance comes out below Σ w_i²·var_i — every task at a
    boundary, say base 0/3 and trained 3/3 everywhere — takes that as its variance (a floor), and
    ``floored`` names it: zero spread across tasks is no evidence that the gain is known exactly.

    Without ``population`` the weights are the sample shares n_h/n (no finite-population
    correction); with it, W_h = N_h/N and f_h = n_h/N_h (R_pop). Strata with fewer than 2 sampled
    tasks are collapsed with a neighbour for the variance (`collapse_strata`); the point estimate
    keeps every stratum's weight. ``n_resamples=0`` skips the bootstrap.
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
    size_of = {str(h): int(s) for h, s in zip(names, sizes, strict=True)}
    pop_of: dict[str, float] | None = None
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
        pop_of = {str(h): float(population[str(h)]) for h in names}
        if any(pop_of[h] < size_of[h] for h in size_of):
            raise AnalysisError("a stratum has more sampled tasks than its population size")
        total = sum(pop_of.values())
        weight_of = {h: pop_of[h] / total for h in size_of}
    else:
        weight_of = {h: size_of[h] / n for h in size_of}
    # Each task's weight in the estimator: W_h / n_h (Horvitz–Thompson with the stratum's share).
    w_i = np.array([weight_of[str(h)] / size_of[str(h)] for h in labels])
    a = float(np.sum(w_i * a_i))
    b = float(np.sum(w_i * b_i))
    # A stratum taken whole (n_h = N_h) contributes no sampling variance (f_h = 1) and needs no
    # partner for one: only the strata actually sampled are collapsed.
    whole = {h for h in size_of if pop_of is not None and size_of[h] >= pop_of[h]}
    sampled = {h: k for h, k in size_of.items() if h not in whole}
    group_of = collapse_strata(sampled)
    if any(sum(sampled[m] for m in g.split("+")) < MIN_TASKS_PER_STRATUM for g in group_of.values()):
        group_of = collapse_strata(size_of)  # a lone small sampled stratum still needs a partner
    else:
        group_of.update({h: h for h in whole})
    collapsed = {
        h: "+".join(m for m in group_of[h].split("+") if m != h)
        for h in size_of
        if size_of[h] < MIN_TASKS_PER_STRATUM and "+" in group_of[h]
    }
    groups = np.asarray([group_of[str(h)] for h in labels])
    g_names, g_inverse = np.unique(groups, return_inverse=True)
    g_idx = g_inverse.astype(np.int64)
    g_sizes = np.bincount(g_idx)
    # u_i = n_g · w_i · y_i: a group's mean of u is its share of the estimate, so the group's
    # variance is (1 − f_g)·s²(u)/n_g — W_h²(1 − f_h)s²_h/n_h when the group is one stratum (§1),
    # and the collapsed-strata estimator (conservative) when it joins several.
    u: FloatArray = (np.column_stack([a_i, b_i]) * (w_i * g_sizes[g_idx])[:, None]).astype(float)
    v = np.zeros(3)
    for k, gname in enumerate(g_names):
        sel = g_idx == k
        n_g = int(sel.sum())
        if n_g < 2:
            continue
        fpc = 1.0
        if pop_of is not None:
            big_n = sum(pop_of[h] for h in str(gname).split("+"))
            fpc = max(1.0 - n_g / big_n, 0.0)
        c = np.cov(u[sel].T, ddof=1)
        v += fpc / n_g * np.array([c[0, 0], c[1, 1], c[0, 1]])
    v_aa, v_bb, v_ab = (float(x) for x in v)
    # Judged on the tasks' spread, before any floor: zero spread is what the warning must name.
    degenerate = max(v_aa, v_bb) <= 1e-15
    floored: list[str] = []
    if binomial_var is not None:
        # No task-level FPC here: a stratum taken whole (f_h = 1) has no sampling variance between
        # tasks, but its tasks' runs still do.
        floor_a = float(np.sum(w_i**2 * np.asarray(binomial_var[0], dtype=float)))
        floor_b = float(np.sum(w_i**2 * np.asarray(binomial_var[1], dtype=float)))
        if v_aa < floor_a:
            v_aa, floored = floor_a, [*floored, "numerator"]
        if v_bb < floor_b:
            v_bb, floored = floor_b, [*floored, "denominator"]
    estimate = a / b if b != 0 else float("nan")
    g = fieller_g(b, v_bb, q)
    reason = _not_estimable_reason(a, b, g, q)
    f_ci = fieller(a, b, v_aa, v_bb, v_ab, q) if reason is None else None
    pieces = fieller_set(a, b, v_aa, v_bb, v_ab, q)
    se_lin = (
        (math.sqrt(max(v_aa - 2 * estimate * v_ab + estimate**2 * v_bb, 0.0)) / abs(b))
        if b != 0
        else math.inf
    )
    boot = None
    if reason is not None or degenerate:
        # Every resample of identical tasks is the same ratio: a point shown as an interval.
        status = BootstrapStatus.NOT_PRESENTED
    elif n_resamples <= 0:
        status = BootstrapStatus.NOT_RUN
    else:
        status = BootstrapStatus.RAN
        if rng is None:
            raise AnalysisError("ratio_of_means needs a seeded rng for the bootstrap")

        def statistic(counts: FloatArray) -> FloatArray:
            means = stratified_means(counts, u, g_idx, np.ones(g_names.size))
            with np.errstate(invalid="ignore", divide="ignore"):
                return means[:, 0] / means[:, 1]

        boot = cluster_bootstrap(
            statistic, n, strata=groups.tolist(), n_resamples=n_resamples, alpha=alpha, rng=rng
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
        fieller_set=pieces,
        delta_ci=delta_ci(a, b, v_aa, v_bb, v_ab, q) if reason is None else None,
        delta_reliable=g < 0.1,
        se_linearised=se_lin,
        bootstrap=boot,
        bootstrap_status=status.value,
        n_tasks=n,
        reason=reason,
        degenerate=degenerate,
        stratum_sizes=size_of,
        collapsed=collapsed,
        weights=weight_of,
        floored=tuple(floored),
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


def _mean_ci(mean: float, var: float, q: float, n: int) -> MeanWithCI:
    se = math.sqrt(max(var, 0.0))
    return MeanWithCI(mean, (mean - q * se, mean + q * se), se, n)


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
class SubgroupTest:
    """Device gain > 0 within one stratum or app (sign-flip), with its Holm-adjusted p (§4)."""

    by: str
    group: str
    n_tasks: int
    mean_gain_real: float
    p_value: float
    p_holm: float

    def to_dict(self) -> dict[str, Any]:
        return as_result_dict(self)


@dataclass(frozen=True)
class EstimandResult:
    """One named estimand: its ratio (or why there is none), its own gains and paired tests."""

    estimand: Estimand
    ratio: RatioEstimate | None
    gain_clone: MeanWithCI | None
    gain_real: MeanWithCI | None
    transfer_gap: MeanWithCI | None
    tests: list[PairedTest]
    n_tasks: int
    reason: str | None = None
    # env → model → success rate, weighted as the estimand weights tasks
    success_rates: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return ESTIMAND_LABELS[self.estimand]

    @property
    def value(self) -> float | None:
        return None if self.ratio is None else self.ratio.value

    @property
    def estimable(self) -> bool:
        return self.ratio is not None and self.ratio.estimable

    @property
    def why_not(self) -> str | None:
        return self.reason if self.ratio is None else self.ratio.reason

    def to_dict(self) -> dict[str, Any]:
        r = self.ratio
        return {
            "estimand": self.estimand.value,
            "label": self.label,
            "meaning": ESTIMAND_MEANING[self.estimand],
            "value": self.value,
            "estimable": self.estimable,
            "reason": self.why_not,
            "n_tasks": self.n_tasks,
            "fieller_ci": None if r is None or r.fieller_ci is None else list(r.fieller_ci),
            "fieller_set": None if r is None else _json_pieces(r.fieller_set),
            "fieller_set_text": None if r is None else r.fieller_set_text,
            "delta_ci": None if r is None or r.delta_ci is None else list(r.delta_ci),
            "bca_ci": None if r is None or r.bca_ci is None else list(r.bca_ci),
            "percentile_ci": None if r is None or r.percentile_ci is None else list(r.percentile_ci),
            "bootstrap": None if r is None else r.bootstrap_status,
            "collapsed": {} if r is None else r.collapsed,
            "gain_clone": None if self.gain_clone is None else self.gain_clone.to_dict(),
            "gain_real": None if self.gain_real is None else self.gain_real.to_dict(),
            "transfer_gap": None if self.transfer_gap is None else self.transfer_gap.to_dict(),
            "tests": [t.to_dict() for t in self.tests],
            "success_rates": self.success_rates,
            "detail": None if r is None else r.to_dict(),
        }


@dataclass(frozen=True)
class DroppedTask:
    """A task left out of the paired analysis, and the (env, model) cells it lacked."""

    task: str
    stratum: str
    missing: list[str]

    def to_dict(self) -> dict[str, Any]:
        return as_result_dict(self)


@dataclass(frozen=True)
class RetentionResult:
    base: str
    trained: str
    clone_env: str
    real_env: str
    n_tasks: int
    dropped: list[DroppedTask]
    strata_after_drop: dict[str, dict[str, int]]
    success_rates: dict[str, dict[str, float]]
    headline: Estimand
    estimands: dict[Estimand, EstimandResult]
    slope: RatioEstimate
    retention_jj: RatioEstimate | None
    subgroup_tests: list[SubgroupTest]
    per_task: pd.DataFrame = field(repr=False)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    judge_correction: JudgeCorrection | None = None
    # Why the judge-corrected R was refused ("" when it was computed or no verdicts were given).
    judge_correction_refused: str = ""

    @property
    def dropped_tasks(self) -> list[str]:
        return [d.task for d in self.dropped]

    @property
    def main(self) -> EstimandResult:
        return self.estimands[self.headline]

    @property
    def retention(self) -> RatioEstimate:
        """The headline estimand's ratio (R_sample is always computed, so there is one)."""
        r = self.main.ratio
        return r if r is not None else self.sample.ratio  # type: ignore[return-value]

    @property
    def sample(self) -> EstimandResult:
        return self.estimands[Estimand.SAMPLE]

    @property
    def retention_pop(self) -> RatioEstimate | None:
        e = self.estimands.get(Estimand.POPULATION)
        return None if e is None else e.ratio

    @property
    def retention_signal(self) -> RatioEstimate | None:
        e = self.estimands.get(Estimand.SIGNAL)
        return None if e is None else e.ratio

    @property
    def gain_clone(self) -> MeanWithCI:
        return self.main.gain_clone or self.sample.gain_clone  # type: ignore[return-value]

    @property
    def gain_real(self) -> MeanWithCI:
        return self.main.gain_real or self.sample.gain_real  # type: ignore[return-value]

    @property
    def transfer_gap(self) -> MeanWithCI:
        return self.main.transfer_gap or self.sample.transfer_gap  # type: ignore[return-value]

    @property
    def tests(self) -> list[PairedTest]:
        return self.main.tests or self.sample.tests

    @property
    def headline_rates(self) -> dict[str, dict[str, float]]:
        """Success rates weighted as the headline estimand weights tasks (its gains' terms)."""
        return self.main.success_rates or self.sample.success_rates or self.success_rates

    def to_dict(self) -> dict[str, Any]:
        main = self.main.to_dict()
        pop = self.estimands.get(Estimand.POPULATION)
        return {
            "base": self.base,
            "trained": self.trained,
            "clone_env": self.clone_env,
            "real_env": self.real_env,
            "n_tasks": self.n_tasks,
            "estimand": self.headline.value,
            "retention": main["value"],
            "estimable": main["estimable"],
            "reason": main["reason"],
            "fieller_ci": main["fieller_ci"],
            "fieller_set": main["fieller_set"],
            "fieller_set_text": main["fieller_set_text"],
            "delta_ci": main["delta_ci"],
            "bca_ci": main["bca_ci"],
            "percentile_ci": main["percentile_ci"],
            "bootstrap": main["bootstrap"],
            "retention_detail": main["detail"],
            "gain_clone": main["gain_clone"],
            "gain_real": main["gain_real"],
            "transfer_gap": main["transfer_gap"],
            "tests": main["tests"],
            "estimands": {e.value: r.to_dict() for e, r in self.estimands.items()},
            "retention_pop": None if pop is None else pop.value,
            "retention_pop_detail": None if pop is None or pop.ratio is None else pop.ratio.to_dict(),
            "retention_jj": None if self.retention_jj is None else self.retention_jj.value,
            "retention_jj_detail": None if self.retention_jj is None else self.retention_jj.to_dict(),
            "slope": self.slope.to_dict(),
            "subgroup_tests": [t.to_dict() for t in self.subgroup_tests],
            "judge_correction": None if self.judge_correction is None else self.judge_correction.to_dict(),
            "judge_correction_estimable": (
                False if self.judge_correction_refused else (None if self.judge_correction is None else True)
            ),
            "judge_correction_reason": self.judge_correction_refused,
            "success_rates": self.success_rates,
            "dropped_tasks": self.dropped_tasks,
            "dropped": [d.to_dict() for d in self.dropped],
            "strata_after_drop": self.strata_after_drop,
            "warnings": self.warnings,
            "notes": self.notes,
        }


@dataclass(frozen=True)
class JudgeCorrection:
    """R with the device side scored by the judge, and with its rates Rogan–Gladen corrected (§3).

    Se/Sp are per model, from episodes that have both ground truth and the judge's verdict (the
    device side where it has both outcomes, else the clone side, whose verifier is ground truth).
    The corrected interval treats Se/Sp as known: it is narrower than the whole uncertainty.
    """

    estimand: str
    se: dict[str, float]
    sp: dict[str, float]
    source: str
    judged: RatioEstimate
    corrected: RatioEstimate
    gain_real_judged: MeanWithCI
    gain_real_corrected: MeanWithCI
    bias_in_gain: float  # judged − corrected device gain, as measured
    bias_formula: float  # METHODS §3: Σ arms FPR_M(1 − p_M) − FNR_M·p_M at the corrected rates
    n_tasks: int
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = as_result_dict(self)
        out["judged"] = self.judged.to_dict()
        out["corrected"] = self.corrected.to_dict()
        return out


@dataclass(frozen=True)
class PerTaskRates:
    """Per-task success rates p̂[env, model] over the tasks with all four cells, and what was dropped."""

    frame: pd.DataFrame
    dropped: list[DroppedTask]
    strata_after_drop: dict[str, dict[str, int]]


def per_task_rates(
    df: pd.DataFrame, base: str, trained: str, clone_env: str, real_env: str, value: str = "success"
) -> tuple[pd.DataFrame, list[str]]:
    """Per-task success rates p̂[env, model] (wide) over the tasks that have all four cells, and
    the ids of the tasks dropped for missing cells (`paired_rates` says which cells and what the
    drop did to the strata)."""
    r = paired_rates(df, base, trained, clone_env, real_env, value)
    return r.frame, [d.task for d in r.dropped]


def paired_rates(
    df: pd.DataFrame, base: str, trained: str, clone_env: str, real_env: str, value: str = "success"
) -> PerTaskRates:
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
    missing_of: dict[str, list[str]] = {}
    for e, m in cells:
        present = wide.get(("size", e, m), pd.Series(np.nan, index=wide.index)).notna()
        have &= present
        for t in wide.index[~present]:
            missing_of.setdefault(str(t), []).append(f"{e}/{m}")
    strata_all = (
        sub.groupby("task")["stratum"].agg(lambda s: s.astype(str).iloc[0])
        if "stratum" in sub
        else pd.Series("all", index=wide.index)
    )
    dropped = [
        DroppedTask(str(t), str(strata_all.get(t, "all")), missing_of[str(t)])
        for t in sorted(wide.index[~have], key=str)
    ]
    if dropped:
        log.info(
            "%d task(s) lack runs of both models on both sides: %s", len(dropped), [d.task for d in dropped]
        )
    wide = wide[have]
    out = pd.DataFrame(index=wide.index)
    for e, m in cells:
        tag = f"{'s' if e == clone_env else 'd'}_{'r' if m == trained else 'b'}"
        out[f"p_{tag}"] = wide[("mean", e, m)].astype(float)
        out[f"n_{tag}"] = wide[("size", e, m)].astype(int)
    out["stratum"] = strata_all.reindex(out.index).fillna("all").astype(str)
    if "app" in sub:
        out["app"] = sub.groupby("task")["app"].agg(lambda s: s.astype(str).iloc[0]).reindex(out.index)
    out["g_s"] = out["p_s_r"] - out["p_s_b"]
    out["g_d"] = out["p_d_r"] - out["p_d_b"]
    before = strata_all.value_counts().to_dict()
    after = out["stratum"].value_counts().to_dict()
    effect = {
        str(h): {"before": int(n), "after": int(after.get(h, 0))}
        for h, n in sorted(before.items(), key=lambda kv: str(kv[0]))
    }
    return PerTaskRates(out, dropped, effect)


def _paired_test(
    per_task: pd.DataFrame,
    side: str,
    env: str,
    rng: np.random.Generator,
    stratum_weights: dict[str, float] | None = None,
) -> PairedTest:
    d = per_task[f"g_{side}"].to_numpy()
    if stratum_weights is not None:
        # Under stratified sampling the statistic is Σ_h W_h·mean_h(d), flips within strata (§4).
        res = sign_flip_test(d, strata=per_task["stratum"].tolist(), stratum_weights=stratum_weights, rng=rng)
        return PairedTest(env, "sign-flip (W_h-weighted)", res.p_value, res.statistic, detail=res)
    one_run = bool((per_task[f"n_{side}_b"] == 1).all() and (per_task[f"n_{side}_r"] == 1).all())
    if one_run:
        r = per_task[f"p_{side}_r"].to_numpy() > 0.5
        b = per_task[f"p_{side}_b"].to_numpy() > 0.5
        n10 = int(np.sum(r & ~b))
        n01 = int(np.sum(~r & b))
        return PairedTest(env, "mcnemar-exact", mcnemar(n10, n01), float(n10 - n01), n10, n01)
    res = sign_flip_test(d, strata=per_task["stratum"].tolist(), rng=rng)
    return PairedTest(env, "sign-flip", res.p_value, res.statistic, detail=res)


# Below this many tasks the default quantile is t: with 15 signal tasks and a clone gain about 2 SE
# from zero, z's Fieller set covers 91–92 % where t covers 94–95 % (docs/analysis.md).
T_BELOW_TASKS = 30


def gain_binomial_var(per_task: pd.DataFrame, side: str) -> np.ndarray:
    """Per task, the sampling variance of its gain from its runs alone: Σ arms p̃(1 − p̃)/n with the
    continuity-adjusted p̃ = (k + ½)/(n + 1), so a task at 0/n or n/n still has some."""
    out = np.zeros(len(per_task))
    for arm in ("r", "b"):
        p = per_task[f"p_{side}_{arm}"].to_numpy(float)
        n = per_task[f"n_{side}_{arm}"].to_numpy(float)
        p_adj = (p * n + 0.5) / (n + 1)
        out += p_adj * (1 - p_adj) / n
    return out


def _quantile(kind: str, n_tasks: int, n_strata: int = 1) -> float:
    """Fieller's q. ``auto``: t with n − H df (H strata) below T_BELOW_TASKS tasks, else z."""
    if kind == "z":
        return stats.Z95
    if kind == "t":
        return t_quantile(n_tasks)
    if kind == "auto":
        if n_tasks >= T_BELOW_TASKS:
            return stats.Z95
        return float(sps.t.ppf(0.975, max(n_tasks - max(n_strata, 1), 1)))
    raise AnalysisError(f"unknown quantile {kind!r}", hint="auto, z or t")


def quantile_note(kind: str) -> str:
    """How the interval quantile was chosen, in words."""
    if kind == "z":
        return "Fieller's q: z (normal), as asked"
    if kind == "t":
        return "Fieller's q: t with n − 1 df, as asked"
    return (
        f"Fieller's q: t with n − H df for an estimand of fewer than {T_BELOW_TASKS} tasks (n tasks in "
        f"H strata), z from {T_BELOW_TASKS} tasks on: z under-covers with few tasks (docs/analysis.md)"
    )


def _estimand(
    kind: Estimand,
    per_task: pd.DataFrame,
    *,
    clone_env: str,
    real_env: str,
    population: dict[str, int] | None,
    quantile: str,
    n_resamples: int,
    rng: np.random.Generator,
) -> EstimandResult:
    n = len(per_task)
    if n < 2:
        why = (
            f"needs at least 2 tasks in the signal stratum ({SIGNAL_STRATUM!r}); {n} paired"
            if kind is Estimand.SIGNAL
            else f"needs at least 2 paired tasks; {n} here"
        )
        return EstimandResult(kind, None, None, None, None, [], n, f"not computed: {why}")
    strata = per_task["stratum"].astype(str).to_numpy()
    q = _quantile(quantile, n, len(set(strata)))
    g_s = per_task["g_s"].to_numpy()
    g_d = per_task["g_d"].to_numpy()
    label = ESTIMAND_LABELS[kind]
    ratio = ratio_of_means(
        g_d,
        g_s,
        strata=strata,
        population=population if kind is Estimand.POPULATION else None,
        label=label,
        q=q,
        n_resamples=n_resamples,
        rng=rng,
        binomial_var=(gain_binomial_var(per_task, "d"), gain_binomial_var(per_task, "s")),
    )
    weights = ratio.weights if kind is Estimand.POPULATION else None
    w_i = np.array([ratio.weights[h] / ratio.stratum_sizes[h] for h in strata])
    names = per_task.attrs.get("models", ("base", "trained"))
    rates = {
        env: {names[0]: float(w_i @ per_task[f"p_{side}_b"]), names[1]: float(w_i @ per_task[f"p_{side}_r"])}
        for env, side in ((clone_env, "s"), (real_env, "d"))
    }
    tests = [
        _paired_test(per_task, "s", clone_env, rng, weights),
        _paired_test(per_task, "d", real_env, rng, weights),
    ]
    return EstimandResult(
        kind,
        ratio,
        _mean_ci(ratio.denominator, ratio.v_bb, q, n),
        _mean_ci(ratio.numerator, ratio.v_aa, q, n),
        _mean_ci(ratio.denominator - ratio.numerator, ratio.v_aa + ratio.v_bb - 2 * ratio.v_ab, q, n),
        tests,
        n,
        success_rates=rates,
    )


def _subgroup_tests(per_task: pd.DataFrame, rng: np.random.Generator) -> list[SubgroupTest]:
    """Device gain > 0 per stratum and per app (sign-flip, two-sided), Holm across all of them."""
    rows: list[tuple[str, str, int, float, float]] = []
    for by in ("stratum", "app"):
        if by not in per_task or per_task[by].nunique() < 2:
            continue
        for group, g in per_task.groupby(by, sort=True):
            if len(g) < 2:
                continue
            d = g["g_d"].to_numpy()
            res = sign_flip_test(d, rng=rng)
            rows.append((by, str(group), len(g), float(d.mean()), res.p_value))
    if not rows:
        return []
    adjusted = holm([r[4] for r in rows])
    return [SubgroupTest(*r, float(p)) for r, p in zip(rows, adjusted, strict=True)]


def _warnings(
    estimands: dict[Estimand, EstimandResult],
    slope_source: pd.DataFrame,
    tasks_needed: int | None,
) -> list[str]:
    out: list[str] = []
    for e in estimands.values():
        r = e.ratio
        if r is None:
            continue
        name = e.label
        if r.denominator < 0:
            out.append(
                f"{name}: negative gains (mean clone gain {r.denominator:+.3f}): a ratio of losses is not retention"
            )
        elif r.numerator < 0:
            out.append(
                f"{name}: negative device gain ({r.numerator:+.3f}): the trained model does worse on the device"
            )
        for part in r.floored:
            gain = "device" if part == "numerator" else "clone"
            out.append(
                f"{name}: the {gain} gain does not vary across tasks (every task at a boundary, e.g. "
                f"base 0/n and trained n/n): its variance is floored at the runs' binomial variance "
                "(continuity-adjusted), not taken as 0"
            )
        if r.degenerate:
            out.append(
                f"{name}: degenerate variance — every task has the same gains (identical tasks or all ties)"
                + (
                    ", so the intervals rest on the runs' binomial floor alone; add tasks or repeats"
                    if r.floored
                    else ", so the intervals have zero width and are not meaningful; add tasks or repeats"
                )
            )
        if r.collapsed:
            joined = ", ".join(
                f"{h} ({r.stratum_sizes[h]} sampled task) collapsed with {nb}"
                for h, nb in r.collapsed.items()
            )
            out.append(f"{name}: strata {joined} — a stratum needs ≥ 2 sampled tasks for a variance")
        b = r.bootstrap
        if b is not None and not b.reliable:
            out.append(f"{name}: bootstrap unreliable — {b.note}")
        if b is not None and b.n_undefined > 0.01 * b.n_resamples:
            out.append(
                f"{name}: bootstrap unreliable — {b.n_undefined} of {b.n_resamples} resamples had a zero clone gain"
            )
    n = len(slope_source)
    if tasks_needed is not None and n < tasks_needed:
        out.append(
            f"fewer tasks than the power analysis asked for: {n} paired tasks, {tasks_needed} needed for 80% power"
        )
    return list(dict.fromkeys(out))


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
    quantile: str = "auto",
    tasks_needed: int | None = None,
    borrow_from: str | None = None,
) -> RetentionResult:
    """Every §1 estimator from a tidy table with columns task, stratum, model, env, run, success
    (+ optional ``judged``: the judge's verdict, which gives R_JJ when clone rows have it; + optional
    ``app`` for per-app tests).

    The headline estimand is R_pop when ``population`` is given (and identifiable), else R_signal
    when the table has a signal stratum, else R_sample — a choice by design, never by result.
    ``quantile`` is Fieller's q: ``auto`` (t with n − H df below 30 tasks, else z), ``z`` or ``t``
    (n − 1 df). ``borrow_from``: a side whose Se/Sp may stand in for the judge correction where the
    device side has no ground truth with both outcomes (never done unless asked).
    ``tasks_needed`` (from the selection's power analysis) warns when fewer tasks were run.
    """
    check_columns(df, RETENTION_COLUMNS, "retention")
    rng = np.random.default_rng(seed)
    rates = paired_rates(df, base, trained, clone_env, real_env)
    per_task = rates.frame
    per_task.attrs["models"] = (base, trained)
    n = len(per_task)
    if n < 2:
        raise AnalysisError(
            f"only {n} task(s) have runs of both models on both sides",
            hint="retention needs at least 2 paired tasks",
        )
    notes: list[str] = []
    common = dict(clone_env=clone_env, real_env=real_env, quantile=quantile, n_resamples=n_resamples, rng=rng)
    estimands: dict[Estimand, EstimandResult] = {}
    signal_tasks = per_task[per_task["stratum"] == SIGNAL_STRATUM]
    has_signal = len(signal_tasks) > 0
    if has_signal:
        estimands[Estimand.SIGNAL] = _estimand(Estimand.SIGNAL, signal_tasks, population=None, **common)  # type: ignore[arg-type]
    else:
        estimands[Estimand.SIGNAL] = EstimandResult(
            Estimand.SIGNAL,
            None,
            None,
            None,
            None,
            [],
            0,
            f"not computed: no task is in the signal stratum ({SIGNAL_STRATUM!r}); give strata with --tasks",
        )
    estimands[Estimand.SAMPLE] = _estimand(Estimand.SAMPLE, per_task, population=None, **common)  # type: ignore[arg-type]
    headline = Estimand.SIGNAL if has_signal and len(signal_tasks) >= 2 else Estimand.SAMPLE
    if population:
        try:
            estimands[Estimand.POPULATION] = _estimand(
                Estimand.POPULATION,
                per_task,
                population=population,
                **common,  # type: ignore[arg-type]
            )
            headline = Estimand.POPULATION
        except NotIdentifiable as exc:
            # The other estimands still stand; say why R_pop is missing instead of failing.
            log.warning("R_pop not reported: %s", exc.message)
            notes.append(f"R_pop not reported: {exc.message}")
            estimands[Estimand.POPULATION] = EstimandResult(
                Estimand.POPULATION, None, None, None, None, [], n, f"not identifiable: {exc.message}"
            )
    g_s = per_task["g_s"].to_numpy()
    g_d = per_task["g_d"].to_numpy()
    strata = per_task["stratum"].astype(str).to_numpy()
    q = _quantile(quantile, n, len(set(strata)))
    notes.append(quantile_note(quantile))
    slope = ratio_of_means(
        g_d * g_s, g_s * g_s, strata=strata, label="slope", q=q, n_resamples=n_resamples, rng=rng
    )
    r_jj = _retention_jj(df, base, trained, clone_env, real_env, q, n_resamples, rng)
    success = {
        env: {
            base: float(per_task[f"p_{side}_b"].mean()),
            trained: float(per_task[f"p_{side}_r"].mean()),
        }
        for env, side in ((clone_env, "s"), (real_env, "d"))
    }
    warnings = _warnings(estimands, per_task, tasks_needed)
    if rates.dropped:
        warnings.append(
            f"{len(rates.dropped)} task(s) dropped for lacking runs of both models on both sides: "
            + ", ".join(d.task for d in rates.dropped[:10])
            + (" …" if len(rates.dropped) > 10 else "")
        )
    correction = None
    refused = ""
    if "judged" in df.columns:
        try:
            correction = _judge_correction(
                df,
                per_task,
                estimands[headline],
                base,
                trained,
                clone_env,
                real_env,
                population,
                q,
                n_resamples,
                rng,
                borrow_from,
            )
        except AnalysisError as exc:
            notes.append(f"judge-corrected retention not computed: {exc.message}")
            warnings.append(f"judge-corrected retention not estimable: {exc.message}")
            refused = exc.message
    return RetentionResult(
        judge_correction=correction,
        judge_correction_refused=refused,
        base=base,
        trained=trained,
        clone_env=clone_env,
        real_env=real_env,
        n_tasks=n,
        dropped=rates.dropped,
        strata_after_drop=rates.strata_after_drop,
        success_rates=success,
        headline=headline,
        estimands=estimands,
        slope=slope,
        retention_jj=r_jj,
        subgroup_tests=_subgroup_tests(per_task, rng),
        per_task=per_task,
        warnings=warnings,
        notes=notes,
    )


def _retention_jj(
    df: pd.DataFrame,
    base: str,
    trained: str,
    clone_env: str,
    real_env: str,
    q: float,
    n_resamples: int,
    rng: np.random.Generator,
) -> RatioEstimate | None:
    """R with both sides scored by the judge (§3: judge error on one side only lowers R)."""
    if "judged" not in df.columns:
        return None
    # Where the device side has ground truth too (virtual phones, labels), the judge's verdict is
    # still the one used, so R_JJ isolates the judge's own effect.
    judged = df.assign(success=df["judged"])
    on_real = judged["env"] == real_env
    judged.loc[on_real & judged["success"].isna(), "success"] = df.loc[
        on_real & judged["success"].isna(), "success"
    ]
    if not judged.loc[judged["env"] == clone_env, "success"].notna().any():
        return None
    pj = paired_rates(judged, base, trained, clone_env, real_env).frame
    if len(pj) < 2:
        return None
    return ratio_of_means(
        pj["g_d"].to_numpy(),
        pj["g_s"].to_numpy(),
        strata=pj["stratum"].astype(str).to_numpy(),
        label="R_JJ",
        q=q,
        n_resamples=n_resamples,
        rng=rng,
    )


@dataclass(frozen=True)
class _SeSp:
    se: float
    sp: float
    n_pos: int
    n_neg: int

    def youden_lower(self, z: float = stats.Z95) -> float:
        """Lower confidence bound of Se + Sp − 1 (binomial variances of the two rates)."""
        return stats.youden_lower_bound(self.se, self.sp, self.n_pos, self.n_neg, z)


def _se_sp(rows: pd.DataFrame) -> _SeSp | None:
    truth = rows["truth"].astype(bool).to_numpy()
    judged = rows["judged"].astype(bool).to_numpy()
    if truth.all() or not truth.any():
        return None
    return _SeSp(
        float(judged[truth].mean()), float((~judged[~truth]).mean()), int(truth.sum()), int((~truth).sum())
    )


def _judge_correction(
    df: pd.DataFrame,
    per_task: pd.DataFrame,
    headline: EstimandResult,
    base: str,
    trained: str,
    clone_env: str,
    real_env: str,
    population: dict[str, int] | None,
    q: float,
    n_resamples: int,
    rng: np.random.Generator,
    borrow_from: str | None = None,
) -> JudgeCorrection | None:
    rows = df[df["model"].isin([base, trained])].copy()
    rows["judged"] = parse_bool_column(rows["judged"])
    rows["truth"] = parse_bool_column(rows["success"])
    if "success_source" in rows.columns:
        # A success that is itself the judge's verdict is no ground truth for the judge.
        rows.loc[rows["success_source"].astype(str) == "judge", "truth"] = None
    real = rows[(rows["env"] == real_env) & rows["judged"].notna()]
    if real.empty:
        return None
    validation = rows.dropna(subset=["truth", "judged"])
    se: dict[str, float] = {}
    sp: dict[str, float] = {}
    sources = []
    for model in (base, trained):
        here = validation[validation["model"] == model]
        got = _se_sp(here[here["env"] == real_env])
        where = real_env
        if got is None and borrow_from:
            # Only when asked: the judge's error on the device is the sim-to-real gap itself.
            got = _se_sp(here[here["env"] == borrow_from])
            where = f"{borrow_from} (borrowed, --borrow-from {borrow_from})"
        if got is None:
            raise AnalysisError(
                f"no {real_env} episodes of {model} with ground truth of both outcomes beside the judge's "
                f"verdict: Se/Sp are not identified on {real_env} (label some, or --borrow-from {clone_env})"
            )
        lower = got.youden_lower()
        if lower <= 0:
            raise AnalysisError(
                f"the judge is not shown to beat chance for {model} on {where}: Se + Sp − 1 = "
                f"{got.se + got.sp - 1:.3f}, its 95% lower bound {lower:.3f} ≤ 0"
            )
        se[model], sp[model] = got.se, got.sp
        sources.append(f"{model}: {where}")
    q_rates = (
        real.assign(judged=real["judged"].astype(float))
        .groupby(["task", "model"])["judged"]
        .mean()
        .unstack("model")
    )
    tasks = [t for t in per_task.index if t in q_rates.index and q_rates.loc[t].notna().all()]
    if headline.estimand is Estimand.SIGNAL:
        tasks = [t for t in tasks if per_task.loc[t, "stratum"] == SIGNAL_STRATUM]
    if len(tasks) < 2:
        return None
    pt = per_task.loc[tasks]
    qb = q_rates.loc[tasks, base].to_numpy(float)
    qr = q_rates.loc[tasks, trained].to_numpy(float)

    def corrected(qv: np.ndarray, model: str) -> np.ndarray:
        # Per task and unclipped: the mean of the corrected rates is the corrected mean (linear).
        return (qv + sp[model] - 1) / (se[model] + sp[model] - 1)

    g_judged = qr - qb
    g_corr = corrected(qr, trained) - corrected(qb, base)
    strata = pt["stratum"].astype(str).to_numpy()
    pop = population if headline.estimand is Estimand.POPULATION else None
    r_j = ratio_of_means(
        g_judged,
        pt["g_s"].to_numpy(),
        strata=strata,
        population=pop,
        label="R (device judged)",
        q=q,
        n_resamples=n_resamples,
        rng=rng,
    )
    r_c = ratio_of_means(
        g_corr,
        pt["g_s"].to_numpy(),
        strata=strata,
        population=pop,
        label="R (judge-corrected)",
        q=q,
        n_resamples=n_resamples,
        rng=rng,
    )
    p_b = float(np.clip(r_c.weights_mean(corrected(qb, base), strata), 0, 1))
    p_r = float(np.clip(r_c.weights_mean(corrected(qr, trained), strata), 0, 1))
    formula = gain_bias(p_b, p_r, (1 - sp[base], 1 - sp[trained]), (1 - se[base], 1 - se[trained]))
    n = len(tasks)
    return JudgeCorrection(
        estimand=headline.estimand.value,
        se=se,
        sp=sp,
        source="; ".join(sources),
        judged=r_j,
        corrected=r_c,
        gain_real_judged=_mean_ci(r_j.numerator, r_j.v_aa, q, n),
        gain_real_corrected=_mean_ci(r_c.numerator, r_c.v_aa, q, n),
        bias_in_gain=r_j.numerator - r_c.numerator,
        bias_formula=formula,
        n_tasks=n,
        note="Se/Sp treated as known: the corrected interval leaves out their uncertainty",
    )


def t_quantile(n_tasks: int, alpha: float = 0.05) -> float:
    """t quantile with n − 1 df, the small-sample alternative to z for Fieller's q (§1)."""
    return float(sps.t.ppf(1 - alpha / 2, max(n_tasks - 1, 1)))
