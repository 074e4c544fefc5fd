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


def clustered_rate(
    tasks: np.ndarray,
    hits: np.ndarray,
    rng: np.random.Generator | None = None,
    n_resamples: int = 2000,
    z: float = 1.96,
) -> Rate:
    """k/n over episodes grouped in tasks: Wilson on n/deff (this indicator's own design effect)
    and a task-cluster bootstrap percentile interval (tasks resampled, a task's runs together)."""
    hits = hits.astype(bool)
    n = int(hits.size)
    if n == 0:
        return Rate(None, 0, 0, None)
    k = int(hits.sum())
    deff = indicator_design_effect(tasks, hits)
    base = _rate(k, n, deff, z)
    uniq, inv = np.unique(tasks.astype(str), return_inverse=True)
    boot = None
    if rng is not None and uniq.size >= 2 and n_resamples > 0:
        per_task_k = np.bincount(inv, weights=hits.astype(float), minlength=uniq.size)
        per_task_n = np.bincount(inv, minlength=uniq.size).astype(float)
        counts = resample_counts(np.zeros(uniq.size, dtype=np.int64), n_resamples, rng)
        with np.errstate(invalid="ignore", divide="ignore"):
            values = (counts @ per_task_k) / (counts @ per_task_n)
        values = values[np.isfinite(values)]
        if values.size:
            boot = (float(np.quantile(values, 0.025)), float(np.quantile(values, 0.975)))
    return Rate(base.value, k, n, base.ci, deff, int(uniq.size), boot)


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
) -> JudgeMetrics:
    """Se, Sp, FPR, FNR, PPV, NPV and accuracy with Wilson intervals. With ``tasks`` each metric
    has its own design effect and a task-cluster bootstrap interval; without, Wilson on n/deff."""
    c = _confusion(truth, verdict)
    if tasks is not None:
        t = truth.astype(bool)
        v = verdict.astype(bool)

        def cr(mask: np.ndarray, hit: np.ndarray) -> Rate:
            return clustered_rate(tasks[mask], hit[mask], rng, n_resamples)

        f1c = 2 * c.tp / (2 * c.tp + c.fp + c.fn) if (2 * c.tp + c.fp + c.fn) else None
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

    def to_dict(self) -> dict[str, Any]:
        return as_result_dict(self)


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
        return as_result_dict(self)


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
    out = []
    for key, g in lab.groupby(by, sort=True, observed=True):
        t = g["truth"].to_numpy(bool)
        v = g["verdict"].to_numpy(bool)
        tasks = g["task"].to_numpy()
        out.append(
            GroupError(
                by,
                str(key),
                clustered_rate(tasks, t != v, rng),
                clustered_rate(tasks[~t], v[~t], rng),
                clustered_rate(tasks[t], ~v[t], rng),
            )
        )
    return out


def _validation_for(
    lab: pd.DataFrame, model: str, side: str, pooled: JudgeMetrics
) -> tuple[JudgeMetrics, str]:
    """Se/Sp (or PPV/NPV) for one model on one side: from that model's labelled episodes on that
    side when they have positives and negatives, else that model's on every side, else pooled."""
    for subset, note in (
        (lab[(lab["model"] == model) & (lab["side"] == side)], ""),
        (
            lab[lab["model"] == model],
            f"no labelled positives and negatives of this model on {side}: its labels on every side used",
        ),
    ):
        if len(subset) and subset["truth"].any() and (~subset["truth"].astype(bool)).any():
            m = judge_metrics(
                subset["truth"].to_numpy(bool),
                subset["verdict"].to_numpy(bool),
                tasks=subset["task"].to_numpy(),
            )
            return m, note
    return pooled, "no validation positives/negatives for this model: pooled Se/Sp used"


def _corrected_rates(
    judged: pd.DataFrame, lab: pd.DataFrame, judge: str, pooled: JudgeMetrics, sampled_by_verdict: bool
) -> list[CorrectedRate]:
    out = []
    for (model, side), g in judged.groupby(["model", "side"], sort=True, observed=True):
        v = g["verdict"].to_numpy(bool)
        n = v.size
        q = float(v.mean())
        deff_q = indicator_design_effect(g["task"].to_numpy(), v)
        n_tasks = int(g["task"].nunique())
        lm = lab[(lab["model"] == model) & (lab["side"] == side)]
        true_rate = float(lm["truth"].astype(bool).mean()) if len(lm) else None
        m, note = _validation_for(lab, str(model), str(side), pooled)
        try:
            if sampled_by_verdict:
                if m.ppv.value is None or m.npv.value is None:
                    raise AnalysisError("PPV or NPV undefined: no audited judge-positives or judge-negatives")
                p = double_sampling(q, m.ppv.value, m.npv.value)
                var = double_sampling_variance(
                    q, m.ppv.value, m.npv.value, n / deff_q, max(m.ppv.n_eff, 1.0), max(m.npv.n_eff, 1.0)
                )
                method = "double-sampling"
                # Se/Sp implied by PPV, NPV and q (the labelled set alone is biased when drawn by verdict).
                se_used = m.ppv.value * q / p if p > 0 else None
                sp_used = m.npv.value * (1 - q) / (1 - p) if p < 1 else None
            else:
                if m.se.value is None or m.sp.value is None:
                    raise AnalysisError("Se or Sp undefined: the validation set lacks positives or negatives")
                p = rogan_gladen(q, m.se.value, m.sp.value)
                # Effective sizes throughout: the judged verdicts and the validation labels are
                # clustered in tasks just as the Wilson intervals beside them assume.
                var = rogan_gladen_variance(
                    q, m.se.value, m.sp.value, n / deff_q, max(m.se.n_eff, 1.0), max(m.sp.n_eff, 1.0)
                )
                method = "rogan-gladen"
                se_used, sp_used = m.se.value, m.sp.value
            out.append(
                CorrectedRate(
                    judge,
                    str(model),
                    str(side),
                    n,
                    q,
                    float(p),
                    math.sqrt(var),
                    method,
                    se_used,
                    sp_used,
                    true_rate,
                    n_tasks,
                    deff_q,
                    note,
                )
            )
        except AnalysisError as exc:
            out.append(
                CorrectedRate(
                    judge,
                    str(model),
                    str(side),
                    n,
                    q,
                    None,
                    None,
                    "none",
                    m.se.value,
                    m.sp.value,
                    true_rate,
                    n_tasks,
                    deff_q,
                    exc.message,
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
        ci = _kappa_bootstrap(a.loc[both, "task"].astype(str).to_numpy(), va, vb, rng, n_resamples)
        constant = [name for name, x in ((ja, va), (jb, vb)) if x.all() or not x.any()]
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
    df: pd.DataFrame, *, sampled_by_verdict: bool = False, seed: int = 0, n_resamples: int = 2000
) -> AuditResult:
    """The full §3 audit of every judge in the table.

    ``sampled_by_verdict``: the human labels were drawn by judge verdict (a labelling plan, double
    sampling): corrected rates use PPV/NPV on every judged episode, not the labelled subset alone.
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
        judged = g.dropna(subset=["verdict"])
        lab = judged.dropna(subset=["truth"]).copy()
        if lab.empty:
            notes.append(f"judge {judge!r} has no episodes with ground truth: not audited")
            continue
        lab["truth"] = lab["truth"].astype(bool)
        lab["length"] = length_tercile_labels(lab["steps"].fillna(0).to_numpy(float), edges)
        t = lab["truth"].to_numpy(bool)
        v = lab["verdict"].to_numpy(bool)
        tasks = lab["task"].to_numpy()
        deff = _design_effect(tasks, t != v)
        pooled = judge_metrics(t, v, deff, tasks=tasks, rng=rng, n_resamples=n_resamples)
        by_model = {
            str(mname): judge_metrics(
                mg["truth"].to_numpy(bool),
                mg["verdict"].to_numpy(bool),
                deff,
                tasks=mg["task"].to_numpy(),
                rng=rng,
                n_resamples=n_resamples,
            )
            for mname, mg in lab.groupby("model", sort=True)
        }
        errors = (
            _group_errors(lab, "model", rng)
            + _group_errors(lab, "length", rng)
            + _group_errors(lab, "app", rng)
        )
        corrected = _corrected_rates(judged, lab, str(judge), pooled, sampled_by_verdict)
        judges.append(
            JudgeAudit(
                str(judge), len(lab), n_abst, deff, pooled, by_model, errors, corrected, sampled_by_verdict
            )
        )
        if pooled.se.n_tasks is not None and pooled.se.n_tasks < 10:
            warnings.append(
                f"judge {judge}: Se rests on {pooled.se.n_tasks} task(s) with positives — its interval is wide"
            )
    agreements = _agreements(data, rng, n_resamples)
    warnings += [f"{a.judge_a} × {a.judge_b}: {a.flag}" for a in agreements if a.flag]
    return AuditResult(judges, agreements, edges, notes, warnings)
