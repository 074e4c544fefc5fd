"""Judge audit and correction (docs/methods.md §3).

Input: a tidy table with one row per (episode, judge): ``task, model, judge, truth, verdict,
steps`` (+ optional ``app`` and ``episode``). ``truth`` is ground truth (clone verifier or human
label) and may be missing for unlabelled device episodes; those rows still count towards the judged
success rate q̂ that the correction adjusts. ``verdict`` missing means the judge abstained.

Runs of one task are correlated (§3). Each metric (Se, Sp, FPR, FNR, PPV, NPV, accuracy) gets its
own design effect — 1 + (m̄ − 1)·ICC of that metric's indicator over the tasks in its denominator —
and a Wilson interval on n/deff, plus a task-cluster bootstrap percentile interval beside it. The
Rogan–Gladen standard error uses the same effective sizes. When an indicator has no variance at all
(e.g. every positive called positive) its ICC cannot be estimated and the design effect is taken as
m̄, the number of runs per task: the interval is then as wide as the number of tasks allows.
"""

from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from analysis.columns import check_columns, parse_bool_column
from analysis.stats import (
    as_result_dict,
    cohen_kappa,
    double_sampling,
    double_sampling_variance,
    icc,
    pabak,
    raw_agreement,
    resample_counts,
    rogan_gladen,
    rogan_gladen_variance,
    wilson,
    youden_lower_bound,
)
from realbench.errors import AnalysisError

log = logging.getLogger(__name__)

AUDIT_COLUMNS = ("task", "model", "judge", "truth", "verdict", "steps")


@dataclass(frozen=True)
class Rate:
    """A proportion k/n with a Wilson interval on the effective sample size n/deff and, where the
    episodes' tasks are known, a task-cluster bootstrap percentile interval."""

    value: float | None
    k: int
    n: int
    ci: tuple[float, float] | None
    design_effect: float = 1.0
    n_tasks: int | None = None
    bootstrap_ci: tuple[float, float] | None = None

    @property
    def n_eff(self) -> float:
        return self.n / self.design_effect if self.n else 0.0

    def to_dict(self) -> dict[str, Any]:
        return as_result_dict(self)


def _rate(k: int, n: int, deff: float, z: float = 1.96) -> Rate:
    if n == 0:
        return Rate(None, 0, 0, None)
    lo, hi = wilson(k / deff, n / deff, z)
    return Rate(k / n, int(k), int(n), (float(lo), float(hi)), deff)


def indicator_design_effect(tasks: np.ndarray, hits: np.ndarray) -> float:
    """1 + (m̄ − 1)·ICC of a 0/1 indicator over tasks; m̄ when the indicator never varies (its ICC
    cannot be estimated: assume full clustering rather than none); 1 with one run per task."""
    if hits.size == 0:
        return 1.0
    df = pd.DataFrame({"task": tasks, "e": hits.astype(float)})
    sizes = df.groupby("task")["e"].size()
    m_bar = float(sizes.mean())
    if m_bar <= 1.0:
        return 1.0
    if float(df["e"].var(ddof=0)) == 0.0:
        return m_bar
    g = df.groupby("task")["e"].agg(["mean", "size"])
    g = g[g["size"] >= 2]
    if len(g) < 2:
        return m_bar
    res = icc(g["mean"].to_numpy(), g["size"].to_numpy())
    return max(1.0, 1.0 + (m_bar - 1.0) * res.icc)


def kish_n(weights: np.ndarray) -> float:
    """Kish's effective size (Σw)²/Σw² of a weighted sample: n when the weights are equal."""
    w = np.asarray(weights, dtype=float)
    s2 = float(np.sum(w * w))
    return float(np.sum(w)) ** 2 / s2 if s2 > 0 else 0.0


def clustered_rate(
    tasks: np.ndarray,
    hits: np.ndarray,
    rng: np.random.Generator | None = None,
    n_resamples: int = 2000,
    z: float = 1.96,
    weights: np.ndarray | None = None,
) -> Rate:
    """k/n over episodes grouped in tasks: Wilson on n/deff (this indicator's own design effect)
    and a task-cluster bootstrap percentile interval (tasks resampled, a task's runs together).

    With ``weights`` (inverse inclusion probabilities of the labels' sampling design) the value is
    the Hájek ratio Σw·hit/Σw, and the Wilson interval is taken on Kish's effective size divided
    by the design effect; ``k`` and ``n`` stay the raw labelled counts."""
    hits = hits.astype(bool)
    n = int(hits.size)
    if n == 0:
        return Rate(None, 0, 0, None)
    k = int(hits.sum())
    deff = indicator_design_effect(tasks, hits)
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    if weights is None:
        base = _rate(k, n, deff, z)
    else:
        value = float(np.sum(w * hits) / np.sum(w))
        n_eff = kish_n(w) / deff
        lo, hi = wilson(value * n_eff, n_eff, z)
        if k == 0:
            lo = 0.0
        if k == n:
            hi = 1.0
        base = Rate(value, k, n, (float(lo), float(hi)), n / n_eff if n_eff else deff)
    uniq, inv = np.unique(tasks.astype(str), return_inverse=True)
    boot = None
    # A proportion at 0 or 1 resamples to itself: a [0, 0] or [1, 1] interval would look certain.
    if rng is not None and uniq.size >= 2 and n_resamples > 0 and 0 < k < n:
        per_task_k = np.bincount(inv, weights=w * hits.astype(float), minlength=uniq.size)
        per_task_n = np.bincount(inv, weights=w, minlength=uniq.size).astype(float)
        counts = resample_counts(np.zeros(uniq.size, dtype=np.int64), n_resamples, rng)
        with np.errstate(invalid="ignore", divide="ignore"):
            values = (counts @ per_task_k) / (counts @ per_task_n)
        values = values[np.isfinite(values)]
        if values.size:
            boot = (float(np.quantile(values, 0.025)), float(np.quantile(values, 0.975)))
    return Rate(base.value, k, n, base.ci, base.design_effect, int(uniq.size), boot)


@dataclass(frozen=True)
class Confusion:
    tp: int
    fp: int
    tn: int
    fn: int

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.tn + self.fn

    def to_dict(self) -> dict[str, Any]:
        return as_result_dict(self)


def _confusion(truth: np.ndarray, verdict: np.ndarray) -> Confusion:
    t = truth.astype(bool)
    v = verdict.astype(bool)
    return Confusion(int(np.sum(t & v)), int(np.sum(~t & v)), int(np.sum(~t & ~v)), int(np.sum(t & ~v)))


@dataclass(frozen=True)
class JudgeMetrics:
    confusion: Confusion
    se: Rate
    sp: Rate
    fpr: Rate
    fnr: Rate
    ppv: Rate
    npv: Rate
    accuracy: Rate
    f1: float | None

    def to_dict(self) -> dict[str, Any]:
        return as_result_dict(self)


def judge_metrics(
    truth: np.ndarray,
    verdict: np.ndarray,
    deff: float = 1.0,
    *,
    tasks: np.ndarray | None = None,
    rng: np.random.Generator | None = None,
    n_resamples: int = 2000,
    weights: np.ndarray | None = None,
) -> JudgeMetrics:
    """Se, Sp, FPR, FNR, PPV, NPV and accuracy with Wilson intervals. With ``tasks`` each metric
    has its own design effect and a task-cluster bootstrap interval; without, Wilson on n/deff.
    With ``weights`` (labels drawn by judge verdict: each label weighs N_h/n_h of its side ×
    verdict stratum) every rate is the weighted one, so Se = PPV·q/p and Sp = NPV·(1 − q)/(1 − p)
    within a stratum; the confusion counts stay raw (what was labelled)."""
    c = _confusion(truth, verdict)
    if tasks is None and weights is not None:
        tasks = np.arange(truth.size).astype(str)
    if tasks is not None:
        t = truth.astype(bool)
        v = verdict.astype(bool)
        task_ids = tasks

        def cr(mask: np.ndarray, hit: np.ndarray) -> Rate:
            w = None if weights is None else np.asarray(weights, dtype=float)[mask]
            return clustered_rate(task_ids[mask], hit[mask], rng, n_resamples, weights=w)

        if weights is None:
            f1c = 2 * c.tp / (2 * c.tp + c.fp + c.fn) if (2 * c.tp + c.fp + c.fn) else None
        else:
            w_all = np.asarray(weights, dtype=float)
            tp, fp, fn = (float(np.sum(w_all[m])) for m in (t & v, ~t & v, t & ~v))
            f1c = 2 * tp / (2 * tp + fp + fn) if (2 * tp + fp + fn) else None
        every = np.ones(t.size, dtype=bool)
        return JudgeMetrics(
            confusion=c,
            se=cr(t, v),
            sp=cr(~t, ~v),
            fpr=cr(~t, v),
            fnr=cr(t, ~v),
            ppv=cr(v, t),
            npv=cr(~v, ~t),
            accuracy=cr(every, t == v),
            f1=f1c,
        )
    f1 = 2 * c.tp / (2 * c.tp + c.fp + c.fn) if (2 * c.tp + c.fp + c.fn) else None
    return JudgeMetrics(
        confusion=c,
        se=_rate(c.tp, c.tp + c.fn, deff),
        sp=_rate(c.tn, c.tn + c.fp, deff),
        fpr=_rate(c.fp, c.tn + c.fp, deff),
        fnr=_rate(c.fn, c.tp + c.fn, deff),
        ppv=_rate(c.tp, c.tp + c.fp, deff),
        npv=_rate(c.tn, c.tn + c.fn, deff),
        accuracy=_rate(c.tp + c.tn, c.n, deff),
        f1=f1,
    )


@dataclass(frozen=True)
class GroupError:
    """Judge error within one group (a model, a length tercile or an app)."""

    by: str
    group: str
    error: Rate
    fpr: Rate
    fnr: Rate

    def to_dict(self) -> dict[str, Any]:
        return as_result_dict(self)


@dataclass(frozen=True)
class CorrectedRate:
    """A judged success rate q̂ on one side for one model, and its correction (Rogan–Gladen, or
    double sampling when the labels were drawn by judge verdict)."""

    judge: str
    model: str
    side: str
    n_judged: int
    judged_rate: float
    corrected_rate: float | None
    corrected_se: float | None
    method: str
    se_used: float | None
    sp_used: float | None
    true_rate_labelled: float | None
    n_tasks: int = 0
    design_effect: float = 1.0
    note: str = ""
    # What the data identifies when the corrected rate is refused: the interval every value of the
    # missing quantity allows (None when not even that is known).
    bounds: tuple[float, float] | None = None
    clipped: bool = False  # the estimator's raw value fell outside [0, 1] and was clipped

    @property
    def estimable(self) -> bool:
        return self.corrected_rate is not None

    def to_dict(self) -> dict[str, Any]:
        out = as_result_dict(self)
        out["estimable"] = self.estimable
        out["reason"] = "" if self.estimable else self.note
        return out


@dataclass(frozen=True)
class JudgeAudit:
    judge: str
    n_labelled: int
    n_abstained: int
    design_effect: float
    metrics: JudgeMetrics
    by_model: dict[str, JudgeMetrics]
    errors: list[GroupError]
    corrected: list[CorrectedRate]
    sampled_by_verdict: bool = False

    def to_dict(self) -> dict[str, Any]:
        out = as_result_dict(self)
        out["corrected"] = [c.to_dict() for c in self.corrected]
        return out


@dataclass(frozen=True)
class Agreement:
    judge_a: str
    judge_b: str
    n: int
    table: list[list[int]]
    kappa: float | None
    kappa_ci: tuple[float, float] | None
    raw_agreement: float
    pabak: float
    flag: str = ""  # e.g. a constant rater: κ is undefined or says nothing

    def to_dict(self) -> dict[str, Any]:
        return as_result_dict(self)


@dataclass(frozen=True)
class AuditResult:
    judges: list[JudgeAudit]
    agreements: list[Agreement]
    length_terciles: list[float]
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "judges": {j.judge: j.to_dict() for j in self.judges},
            "agreements": [a.to_dict() for a in self.agreements],
            "length_terciles": self.length_terciles,
            "warnings": self.warnings,
            "notes": self.notes,
        }


def length_tercile_edges(steps: np.ndarray) -> list[float]:
    """Cut points (33rd and 67th percentiles) that split trajectories into short/medium/long."""
    if steps.size == 0:
        return []
    return [float(x) for x in np.quantile(steps, [1 / 3, 2 / 3])]


def length_tercile_labels(steps: np.ndarray, edges: list[float]) -> np.ndarray:
    if not edges:
        return np.array(["all"] * steps.size, dtype=object)
    lo, hi = edges
    names = np.array([f"short (≤{lo:g})", f"medium ({lo:g}–{hi:g}]", f"long (>{hi:g})"], dtype=object)
    return names[np.digitize(steps, [lo, hi], right=True)]


def _design_effect(tasks: np.ndarray, errors: np.ndarray) -> float:
    """1 + (m̄ − 1)·ICC of the error indicator over tasks; 1 when tasks have single runs."""
    df = pd.DataFrame({"task": tasks, "e": errors.astype(float)})
    g = df.groupby("task")["e"].agg(["mean", "size"])
    g = g[g["size"] >= 2]
    if len(g) < 2:
        return 1.0
    res = icc(g["mean"].to_numpy(), g["size"].to_numpy())
    m_bar = float(df.groupby("task").size().mean())
    return max(1.0, 1.0 + (m_bar - 1.0) * res.icc)


def _group_errors(lab: pd.DataFrame, by: str, rng: np.random.Generator) -> list[GroupError]:
    """Error, FPR and FNR per group; weighted by the labels' design weights (column ``w``)."""
    out = []
    for key, g in lab.groupby(by, sort=True, observed=True):
        t = g["truth"].to_numpy(bool)
        v = g["verdict"].to_numpy(bool)
        tasks = g["task"].to_numpy()
        w = g["w"].to_numpy(float) if "w" in g.columns else np.ones(len(g))
        out.append(
            GroupError(
                by,
                str(key),
                clustered_rate(tasks, t != v, rng, weights=w),
                clustered_rate(tasks[~t], v[~t], rng, weights=w[~t]),
                clustered_rate(tasks[t], ~v[t], rng, weights=w[t]),
            )
        )
    return out


def design_weights(judged: pd.DataFrame, lab: pd.DataFrame) -> np.ndarray:
    """Each label's weight N_h/n_h, its side × verdict stratum's judged over labelled episodes: the
    inverse of its inclusion probability when the labels are a simple random sample within each
    stratum, as `realbench audit --plan-labels` draws them."""
    n_judged = judged.groupby(["side", "verdict"]).size()
    n_lab = lab.groupby(["side", "verdict"]).size()
    keys = list(zip(lab["side"], lab["verdict"].astype(bool), strict=True))
    return np.array([n_judged[k] / n_lab[k] for k in keys], dtype=float)


def _youden_lower(se: Rate, sp: Rate, z: float = 1.96) -> float:
    """Lower confidence bound of Se + Sp − 1 from the two rates' effective sizes."""
    assert se.value is not None and sp.value is not None
    return youden_lower_bound(se.value, sp.value, se.n_eff, sp.n_eff, z)


class _Refused(Exception):
    """The corrected rate is not identified by these data (message: why; bounds: what is)."""

    def __init__(self, why: str, bounds: tuple[float, float] | None = None) -> None:
        super().__init__(why)
        self.why = why
        self.bounds = bounds


@dataclass(frozen=True)
class _Corrected:
    p: float
    var: float
    method: str
    se_used: float | None
    sp_used: float | None
    note: str = ""
    clipped: bool = False


def _labels_for(lab: pd.DataFrame, model: str, side: str) -> pd.DataFrame:
    return lab[(lab["model"] == model) & (lab["side"] == side)]


def _strata_rate(rows: pd.DataFrame, judge_positive: bool) -> Rate:
    """PPV (judge-positives) or NPV (judge-negatives) of labelled rows, task-clustered."""
    sel = rows[rows["verdict"].astype(bool) == judge_positive]
    truth = sel["truth"].astype(bool).to_numpy()
    return clustered_rate(sel["task"].to_numpy(), truth if judge_positive else ~truth)


def _double_sampled(
    g: pd.DataFrame, lab: pd.DataFrame, model: str, side: str, q: float, n_eff: float, borrow: str | None
) -> _Corrected:
    """p = PPV·q + (1 − NPV)(1 − q) with PPV and NPV from this model × side's own labels. A verdict
    stratum with no labels is not identified: refused with the bounds the other stratum implies,
    unless the user asked to borrow that stratum from another side."""
    here = _labels_for(lab, model, side)
    ppv, npv = _strata_rate(here, True), _strata_rate(here, False)
    notes = []
    if (ppv.value is None or npv.value is None) and borrow and borrow != side:
        there = _labels_for(lab, model, borrow)
        for name, rate, positive in (("PPV", ppv, True), ("NPV", npv, False)):
            if rate.value is None:
                got = _strata_rate(there, positive)
                if got.value is not None:
                    notes.append(
                        f"{name} borrowed from {borrow} (--borrow-from {borrow}): assumes the judge errs alike"
                    )
                    if positive:
                        ppv = got
                    else:
                        npv = got
    if ppv.value is None and npv.value is None:
        raise _Refused(
            f"no labelled episodes of {model} on {side}: the corrected rate is not identified", (0.0, 1.0)
        )
    if npv.value is None:
        assert ppv.value is not None
        lo = q * ppv.value
        raise _Refused(
            f"no labelled judge-negatives of {model} on {side}: NPV is not identified; the rate lies in "
            f"[q·PPV, q·PPV + (1 − q)] (label some judge-negatives, or --borrow-from clone)",
            (lo, lo + (1 - q)),
        )
    if ppv.value is None:
        lo = (1 - q) * (1 - npv.value)
        raise _Refused(
            f"no labelled judge-positives of {model} on {side}: PPV is not identified; the rate lies in "
            f"[(1 − q)(1 − NPV), (1 − q)(1 − NPV) + q] (label some judge-positives, or --borrow-from clone)",
            (lo, lo + q),
        )
    n_pos = int(g["verdict"].astype(bool).sum())
    n_neg = len(g) - n_pos
    p = double_sampling(q, ppv.value, npv.value)
    var = double_sampling_variance(
        q,
        ppv.value,
        npv.value,
        n_eff,
        max(ppv.n_eff, 1.0),
        max(npv.n_eff, 1.0),
        fpc_pos=max(1 - ppv.n / n_pos, 0.0) if n_pos else 1.0,
        fpc_neg=max(1 - npv.n / n_neg, 0.0) if n_neg else 1.0,
    )
    # Se/Sp implied by PPV, NPV and q (the labelled set alone is biased when drawn by verdict).
    se_used = ppv.value * q / p if p > 0 else None
    sp_used = npv.value * (1 - q) / (1 - p) if p < 1 else None
    return _Corrected(p, var, "double-sampling", se_used, sp_used, "; ".join(notes))


def _rogan_gladen_rate(
    lab: pd.DataFrame, model: str, side: str, q: float, n_eff: float, borrow: str | None
) -> _Corrected:
    """Rogan–Gladen with Se/Sp from this model × side's labels (or, when asked, another side's);
    refused when the judge is not shown to be better than chance there."""
    notes = []
    rows = _labels_for(lab, model, side)
    truth = rows["truth"].astype(bool)
    if not (truth.any() and (~truth).any()) and borrow and borrow != side:
        rows = _labels_for(lab, model, borrow)
        truth = rows["truth"].astype(bool)
        notes.append(f"Se/Sp borrowed from {borrow} (--borrow-from {borrow}): assumes the judge errs alike")
    if not (truth.any() and (~truth).any()):
        raise _Refused(
            f"no labelled positives and negatives of {model} on {side}: Se/Sp are not identified there "
            "(label some, or --borrow-from clone to assume the judge errs alike on both sides)"
        )
    m = judge_metrics(truth.to_numpy(), rows["verdict"].to_numpy(bool), tasks=rows["task"].to_numpy())
    assert m.se.value is not None and m.sp.value is not None
    youden = m.se.value + m.sp.value - 1
    lower = _youden_lower(m.se, m.sp)
    if lower <= 0:
        raise _Refused(
            f"the judge is not shown to beat chance for {model} on {side}: Se + Sp − 1 = {youden:.3f}, "
            f"its 95% lower bound {lower:.3f} ≤ 0, so Rogan–Gladen cannot be inverted"
        )
    raw = (q + m.sp.value - 1) / youden
    p = rogan_gladen(q, m.se.value, m.sp.value)
    clipped = not 0.0 <= raw <= 1.0
    if clipped:
        notes.append(f"Rogan–Gladen gave {raw:.3f}, clipped to {p:.0f}")
    # Effective sizes throughout: the judged verdicts and the validation labels are clustered in
    # tasks just as the Wilson intervals beside them assume.
    var = rogan_gladen_variance(q, m.se.value, m.sp.value, n_eff, max(m.se.n_eff, 1.0), max(m.sp.n_eff, 1.0))
    return _Corrected(p, var, "rogan-gladen", m.se.value, m.sp.value, "; ".join(notes), clipped)


def _corrected_rates(
    judged: pd.DataFrame,
    lab: pd.DataFrame,
    judge: str,
    sampled_by_verdict: bool,
    borrow_from: str | None = None,
) -> list[CorrectedRate]:
    out = []
    for (model, side), g in judged.groupby(["model", "side"], sort=True, observed=True):
        model, side = str(model), str(side)
        v = g["verdict"].to_numpy(bool)
        n = v.size
        q = float(v.mean())
        tasks = g["task"].to_numpy()
        deff_q = indicator_design_effect(tasks, v)
        n_tasks = int(g["task"].nunique())
        lm = _labels_for(lab, model, side)
        true_rate = float(lm["truth"].astype(bool).mean()) if len(lm) else None
        common = dict(judge=judge, model=model, side=side, n_judged=n, judged_rate=q)
        if len(lm) == n:
            # Every judged episode has ground truth: the truth rate is the rate, no correction.
            truth = lm["truth"].astype(bool).to_numpy()
            r = clustered_rate(lm["task"].to_numpy(), truth)
            assert r.value is not None
            out.append(
                CorrectedRate(
                    **common,
                    corrected_rate=r.value,
                    corrected_se=math.sqrt(r.value * (1 - r.value) / max(r.n_eff, 1.0)),
                    method="observed truth",
                    se_used=None,
                    sp_used=None,
                    true_rate_labelled=true_rate,
                    n_tasks=n_tasks,
                    design_effect=r.design_effect,
                    note="every judged episode is labelled: the truth rate itself, no correction",
                )
            )
            continue
        try:
            if sampled_by_verdict:
                c = _double_sampled(g, lab, model, side, q, n / deff_q, borrow_from)
            else:
                c = _rogan_gladen_rate(lab, model, side, q, n / deff_q, borrow_from)
        except _Refused as exc:
            out.append(
                CorrectedRate(
                    **common,
                    corrected_rate=None,
                    corrected_se=None,
                    method="none",
                    se_used=None,
                    sp_used=None,
                    true_rate_labelled=true_rate,
                    n_tasks=n_tasks,
                    design_effect=deff_q,
                    note=exc.why,
                    bounds=exc.bounds,
                )
            )
            continue
        out.append(
            CorrectedRate(
                **common,
                corrected_rate=float(c.p),
                corrected_se=math.sqrt(c.var),
                method=c.method,
                se_used=c.se_used,
                sp_used=c.sp_used,
                true_rate_labelled=true_rate,
                n_tasks=n_tasks,
                design_effect=deff_q,
                note=c.note,
                clipped=c.clipped,
            )
        )
    return out


def _kappa_bootstrap(
    tasks: np.ndarray, a: np.ndarray, b: np.ndarray, rng: np.random.Generator, n_resamples: int
) -> tuple[float, float] | None:
    """Percentile interval of κ from resampling tasks (an episode's task keeps its runs together)."""
    uniq, inv = np.unique(tasks, return_inverse=True)
    if uniq.size < 2:
        return None
    counts = resample_counts(np.zeros(uniq.size, dtype=np.int64), n_resamples, rng)[:, inv]  # (B, episodes)
    cells = np.stack([(a & b), (a & ~b), (~a & b), (~a & ~b)], axis=1).astype(float)
    t = counts @ cells  # (B, 4): 11, 10, 01, 00
    n = t.sum(axis=1)
    p_o = (t[:, 0] + t[:, 3]) / n
    pa = (t[:, 0] + t[:, 1]) / n
    pb = (t[:, 0] + t[:, 2]) / n
    p_e = pa * pb + (1 - pa) * (1 - pb)
    with np.errstate(invalid="ignore", divide="ignore"):
        k = (p_o - p_e) / (1 - p_e)
    k = k[np.isfinite(k)]
    if k.size == 0:
        return None
    return float(np.quantile(k, 0.025)), float(np.quantile(k, 0.975))


def _agreements(df: pd.DataFrame, rng: np.random.Generator, n_resamples: int) -> list[Agreement]:
    judges = sorted(df["judge"].astype(str).unique())
    out = []
    data = df.dropna(subset=["verdict"])
    for ja, jb in itertools.combinations(judges, 2):
        a = data[data["judge"] == ja].set_index("episode")
        b = data[data["judge"] == jb].set_index("episode")
        both = a.index.intersection(b.index)
        if both.empty:
            continue
        va = a.loc[both, "verdict"].to_numpy(bool)
        vb = b.loc[both, "verdict"].to_numpy(bool)
        table = [
            [int(np.sum(va & vb)), int(np.sum(va & ~vb))],
            [int(np.sum(~va & vb)), int(np.sum(~va & ~vb))],
        ]
        kappa = cohen_kappa(table)
        constant = [name for name, x in ((ja, va), (jb, vb)) if x.all() or not x.any()]
        # κ of a constant rater is undefined or 0 by construction: no interval (shown as "—").
        ci = (
            None
            if constant
            else _kappa_bootstrap(a.loc[both, "task"].astype(str).to_numpy(), va, vb, rng, n_resamples)
        )
        flag = (
            f"rater {' and '.join(constant)} gave one verdict throughout: κ is "
            + ("undefined" if math.isnan(kappa) else "0 by construction and says nothing about agreement")
            + "; read raw agreement and PABAK"
            if constant
            else ""
        )
        out.append(
            Agreement(
                ja,
                jb,
                int(both.size),
                table,
                None if math.isnan(kappa) else kappa,
                ci,
                raw_agreement(table),
                pabak(table),
                flag,
            )
        )
    return out


def prepare_audit_table(df: pd.DataFrame) -> pd.DataFrame:
    """Validate and normalise an audit table; adds ``episode`` when absent.

    Without an ``episode`` column, rows of different judges are paired by their order within
    (task, model): the i-th row of judge A for a task and model is the same episode as judge B's i-th.
    """
    check_columns(df, AUDIT_COLUMNS, "audit")
    out = df.copy()
    out["task"] = out["task"].astype(str)
    out["model"] = out["model"].astype(str)
    out["judge"] = out["judge"].astype(str)
    out["truth"] = parse_bool_column(out["truth"])
    out["verdict"] = parse_bool_column(out["verdict"])
    out["steps"] = pd.to_numeric(out["steps"], errors="coerce")
    if "app" not in out.columns:
        out["app"] = "(unknown)"
    out["app"] = out["app"].fillna("(unknown)").astype(str)
    if "episode" not in out.columns:
        order = out.groupby(["task", "model", "judge"]).cumcount()
        out["episode"] = out["task"] + "|" + out["model"] + "|" + order.astype(str)
    out["episode"] = out["episode"].astype(str)
    # The side an episode ran on (clone, clone-on-phone, real): corrected rates are per side.
    out["side"] = out["env"].fillna("unknown").astype(str) if "env" in out.columns else "unknown"
    return out


def audit_table(
    df: pd.DataFrame,
    *,
    sampled_by_verdict: bool = False,
    seed: int = 0,
    n_resamples: int = 2000,
    borrow_from: str | None = None,
) -> AuditResult:
    """The full §3 audit of every judge in the table.

    ``sampled_by_verdict``: the human labels were drawn by judge verdict (a labelling plan, double
    sampling, a simple random sample within each side × verdict stratum): every rate is weighted by
    the strata's sampling fractions, and corrected rates use PPV/NPV on every judged episode.
    ``borrow_from``: a side (e.g. ``clone``) whose labels may stand in where a side has none —
    never done unless asked, since the judge's error on the device is what is being measured.
    """
    data = prepare_audit_table(df)
    if data.empty:
        raise AnalysisError("the audit table is empty", hint="judge some episodes that have ground truth")
    rng = np.random.default_rng(seed)
    labelled_all = data.dropna(subset=["truth", "verdict"])
    edges = length_tercile_edges(labelled_all["steps"].dropna().to_numpy(float))
    notes: list[str] = []
    warnings: list[str] = []
    judges = []
    for judge, g in data.groupby("judge", sort=True):
        n_abst = int(g["verdict"].isna().sum())
        judged = g.dropna(subset=["verdict"]).copy()
        judged["verdict"] = judged["verdict"].astype(bool)
        lab = judged.dropna(subset=["truth"]).copy()
        if lab.empty:
            notes.append(f"judge {judge!r} has no episodes with ground truth: not audited")
            continue
        lab["truth"] = lab["truth"].astype(bool)
        lab["length"] = length_tercile_labels(lab["steps"].fillna(0).to_numpy(float), edges)
        lab["w"] = design_weights(judged, lab) if sampled_by_verdict else 1.0
        t = lab["truth"].to_numpy(bool)
        v = lab["verdict"].to_numpy(bool)
        tasks = lab["task"].to_numpy()
        w = lab["w"].to_numpy(float) if sampled_by_verdict else None
        deff = _design_effect(tasks, t != v)
        pooled = judge_metrics(t, v, deff, tasks=tasks, rng=rng, n_resamples=n_resamples, weights=w)
        by_model = {
            str(mname): judge_metrics(
                mg["truth"].to_numpy(bool),
                mg["verdict"].to_numpy(bool),
                deff,
                tasks=mg["task"].to_numpy(),
                rng=rng,
                n_resamples=n_resamples,
                weights=mg["w"].to_numpy(float) if sampled_by_verdict else None,
            )
            for mname, mg in lab.groupby("model", sort=True)
        }
        errors = (
            _group_errors(lab, "model", rng)
            + _group_errors(lab, "length", rng)
            + _group_errors(lab, "app", rng)
        )
        corrected = _corrected_rates(judged, lab, str(judge), sampled_by_verdict, borrow_from)
        judges.append(
            JudgeAudit(
                str(judge), len(lab), n_abst, deff, pooled, by_model, errors, corrected, sampled_by_verdict
            )
        )
        if sampled_by_verdict:
            notes.append(
                f"judge {judge}: labels drawn by verdict within side × verdict strata; every rate is "
                "weighted by N_h/n_h (Hájek), the 'truth on labelled' column is the unweighted share"
            )
        if pooled.se.n_tasks is not None and pooled.se.n_tasks < 10:
            warnings.append(
                f"judge {judge}: Se rests on {pooled.se.n_tasks} task(s) with positives — its interval is wide"
            )
        for c in corrected:
            if not c.estimable:
                bound = f" (bounds [{c.bounds[0]:.3f}, {c.bounds[1]:.3f}])" if c.bounds else ""
                warnings.append(f"judge {judge}, {c.model} on {c.side}: not estimable: {c.note}{bound}")
            elif c.clipped or "borrowed" in c.note:
                warnings.append(f"judge {judge}, {c.model} on {c.side}: {c.note}")
    agreements = _agreements(data, rng, n_resamples)
    warnings += [f"{a.judge_a} × {a.judge_b}: {a.flag}" for a in agreements if a.flag]
    return AuditResult(judges, agreements, edges, notes, warnings)
