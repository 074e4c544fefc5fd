"""The report's opening box: the headline estimand with its interval (or why it has none and what
would give it one), the gains on both sides, the judge's error rates, and R_JJ and the slope in
plain words. Everything here is read off the retention and audit results; nothing is recomputed
except the rough sample-size arithmetic of "what would make it estimable" (METHODS §1: Fieller's
g = q²·v_bb/b² must fall below 1, and v_bb shrinks as 1/tasks)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.audit import AuditResult, Rate
from analysis.retention import (
    ESTIMAND_MEANING,
    SIGNAL_STRATUM,
    Estimand,
    EstimandResult,
    RatioEstimate,
    RetentionResult,
)
from analysis.stats import format_interval, minus_sign

R_JJ_IN_WORDS = (
    "R_JJ is the same ratio with both sides scored by the judge (the clone side too, not its verifier). "
    "A judge that misses some successes and accepts some failures shrinks every gain it scores by "
    "about (Se + Sp − 1); when only the device side is judged, that shrinkage alone lowers R. "
    "R_JJ puts the judge on both sides, so R_JJ close to R means the judge is not what moves R."
)
SLOPE_IN_WORDS = (
    "The slope is the line through the origin that best predicts a task's device gain from its clone "
    "gain (β = Σ g_d·g_s / Σ g_s²). It weighs tasks with large clone gains most: β close to R means "
    "the tasks keep their gains alike; β far from R means a few tasks with large clone gains carry "
    "over differently from the rest."
)


@dataclass
class GainLine:
    side: str
    gain: str  # "12.5% [3.1%, 21.9%]"
    test: str  # "sign-flip p = 0.012"


@dataclass
class JudgeLine:
    judge: str
    text: str


@dataclass
class Summary:
    """What the report's summary box shows; `estimable` False means the headline has no interval."""

    label: str = ""
    meaning: str = ""
    estimable: bool = False
    value: str = ""
    interval: str = ""
    why_not: str = ""
    remedy: str = ""
    n_tasks: int = 0
    gains: list[GainLine] = field(default_factory=list)
    gap: str = ""
    judges: list[JudgeLine] = field(default_factory=list)
    judge_note: str = ""
    r_jj: str = ""
    slope: str = ""
    explanations: list[str] = field(default_factory=lambda: [R_JJ_IN_WORDS, SLOPE_IN_WORDS])
    missing: str = ""  # set when there is no retention result at all (the reason)


def _pct(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else minus_sign(f"{100 * x:.1f}%")


def _ratio_text(r: RatioEstimate | None) -> str:
    if r is None:
        return "not computed"
    if not r.estimable or r.fieller_ci is None or r.value is None:
        return f"not estimable (exact Fieller set {r.fieller_set_text})"
    return f"{r.value:.2f}, Fieller 95% {format_interval(r.fieller_ci)}"


def _members(res: RetentionResult, e: EstimandResult) -> pd.DataFrame:
    pt = res.per_task
    return pt[pt["stratum"] == SIGNAL_STRATUM] if e.estimand is Estimand.SIGNAL else pt


def tasks_for_bounded_interval(n: int, g: float) -> int:
    """Paired tasks for Fieller's g to fall below 1 when v_bb shrinks as 1/n (gains per task unchanged)."""
    return max(n + 1, math.floor(n * g) + 1)


def runs_factor_for_bounded_interval(per_task: pd.DataFrame, g: float) -> float | None:
    """How many times more clone runs per task would bring g below 1, or None when runs alone cannot
    (the task-to-task spread of the clone gain is itself too large). The run-to-run part of a task's
    gain variance is p_r(1−p_r)/(m_r−1) + p_b(1−p_b)/(m_b−1); only that part shrinks with more runs."""
    if len(per_task) < 2:
        return None
    m_r = per_task["n_s_r"].to_numpy(float)
    m_b = per_task["n_s_b"].to_numpy(float)
    if (m_r < 2).any() or (m_b < 2).any():
        return None
    p_r = per_task["p_s_r"].to_numpy(float)
    p_b = per_task["p_s_b"].to_numpy(float)
    within = float(np.mean(p_r * (1 - p_r) / (m_r - 1) + p_b * (1 - p_b) / (m_b - 1)))
    total = float(np.var(per_task["g_s"].to_numpy(float), ddof=1))
    if total <= 0:
        return None
    between = max(total - within, 0.0)
    if g * between / total >= 1 or within <= 0:
        return None
    # g' = g·(between + within/k)/total < 1  ⇔  k > g·within / (total − g·between)
    return g * within / (total - g * between)


def remedy_for(res: RetentionResult, e: EstimandResult, population: dict[str, int] | None) -> str:
    """What would make a not-estimable headline estimable, in words with numbers."""
    r = e.ratio
    if r is None:
        if e.estimand is Estimand.SIGNAL:
            short = max(2 - e.n_tasks, 1)
            return (
                f"Run at least {short} more signal-stratum task(s) (significant clone gain) on the phones: "
                "raise the device budget (--budget-hours) or check that the signal tasks may run on a real account."
            )
        if e.estimand is Estimand.POPULATION:
            return "Sample at least 2 tasks from every stratum of the pack that has tasks (raise --budget-hours)."
        return "Run at least 2 tasks with both policies on both sides."
    if r.denominator <= 0:
        return (
            "No number of extra tasks or runs turns this into retention: the trained policy does not gain on "
            "the clone on these tasks (the clone gain is not positive), so there is nothing to retain."
        )
    if r.fieller_g >= 1:
        n = e.n_tasks
        need = tasks_for_bounded_interval(n, r.fieller_g)
        text = (
            f"The clone gain's 95% interval includes 0 (Fieller's g = {r.fieller_g:.2f} ≥ 1). About {need} paired "
            f"tasks instead of {n} (≈ {need - n} more: a larger device budget, `--budget-hours`) would bound it, "
            "if the per-task gains stay as they are"
        )
        if population:
            total = sum(population.values())
            if need > total:
                text += (
                    f" — more than the {total} eligible tasks of the pack, so more tasks alone cannot do it"
                )
        factor = runs_factor_for_bounded_interval(_members(res, e), r.fieller_g)
        if factor is None:
            text += "; more runs per task alone would not (the tasks differ more than their runs do)."
        else:
            m = int(_members(res, e)["n_s_b"].median())
            text += f"; or about {math.ceil(m * factor)} clone runs per task and policy instead of {m}."
        return text
    return ""


def _rate(r: Rate) -> str:
    if not r.n or r.value is None:
        return "no data"
    ci = "" if r.ci is None else f" {format_interval(r.ci, True)}"
    return f"{_pct(r.value)}{ci}"


def judge_lines(audit: AuditResult | None, reason: str | None) -> tuple[list[JudgeLine], str]:
    if audit is None or not audit.judges:
        return [], reason or "No judge audit: no judge verdicts on episodes with ground truth."
    lines = []
    for j in audit.judges:
        m = j.metrics
        lines.append(
            JudgeLine(
                j.judge,
                f"accepts a failed episode {_rate(m.fpr)} of the time (FPR), rejects a successful one "
                f"{_rate(m.fnr)} (FNR); Se {_pct(m.se.value)}, Sp {_pct(m.sp.value)}, over {j.n_labelled} "
                "episodes with ground truth",
            )
        )
    return lines, "Wilson 95% intervals on each rate's effective size; the audit section has the detail."


def build_summary(
    res: RetentionResult | None,
    missing_reason: str | None,
    audit: AuditResult | None,
    audit_reason: str | None,
    population: dict[str, int] | None,
    env_label: dict[str, str],
) -> Summary:
    s = Summary()
    s.judges, s.judge_note = judge_lines(audit, audit_reason)
    if res is None:
        s.missing = missing_reason or "Retention was not computed."
        return s
    e = res.main
    s.label, s.meaning, s.n_tasks = e.label, ESTIMAND_MEANING[e.estimand], e.n_tasks
    r = e.ratio
    if r is not None and r.estimable and r.value is not None and r.fieller_ci is not None:
        s.estimable = True
        s.value = f"{r.value:.2f}"
        s.interval = f"Fieller 95% {format_interval(r.fieller_ci)}"
        if r.bca_ci is not None:
            s.interval += f"; BCa 95% {format_interval(r.bca_ci)}"
    else:
        s.value = "not estimable"
        s.why_not = e.why_not or "no interval"
        if r is not None:
            s.why_not += f" (exact Fieller set {r.fieller_set_text})"
        s.remedy = remedy_for(res, e, population)
    for env, gain in ((res.clone_env, res.gain_clone), (res.real_env, res.gain_real)):
        test = next((t for t in res.tests if t.env == env), None)
        s.gains.append(
            GainLine(
                env_label.get(env, env),
                f"{_pct(gain.mean)} {format_interval(gain.ci, True)}",
                "" if test is None else f"{test.method} p = {test.p_value:.3g}",
            )
        )
    s.gap = f"{_pct(res.transfer_gap.mean)} {format_interval(res.transfer_gap.ci, True)}"
    s.r_jj = (
        _ratio_text(res.retention_jj)
        if res.retention_jj is not None
        else "not computed (no judge verdicts on the clone side to judge both sides with)"
    )
    s.slope = _ratio_text(res.slope)
    return s


__all__ = [
    "Summary",
    "build_summary",
    "remedy_for",
    "runs_factor_for_bounded_interval",
    "tasks_for_bounded_interval",
]
