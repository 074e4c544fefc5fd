"""A labelling plan for the judge audit (docs/methods.md §3, double sampling).

Which N unlabelled episodes should people label so that each side's corrected success rate (and
the judge's PPV/NPV, hence Se/Sp) is estimated with the least variance? The episodes a judge has
judged are stratified by side (clone, clone-on-phone, real) × the judge's verdict. Within a side
the corrected rate is p̂ = Σ_h W_h·P̂_h with W_h = N_h/N_side and P_h = P(truth | verdict) — PPV
for judge-positives, 1 − NPV for judge-negatives — so the allocation minimising Σ_side Var(p̂)
is Neyman's: n_h ∝ W_h·S_h with S_h = √(P_h(1 − P_h)), at least 2 per stratum, never more than
it has unlabelled episodes. P_h comes from labels already in the stratum (≥ 5), else from the
clone side, where the verifier is ground truth for the same judge (a free pilot), else 0.5.

Within a stratum the episodes are a simple random sample (every unlabelled episode of the stratum
equally likely, whatever its task), so the audit's plain PPV/NPV are the design's estimators; each
planned episode carries its inclusion probability n_h/N_h. Spreading the labels over tasks first
would cut their correlation but make an episode of a task with many episodes far less likely to
be drawn than one of a task with one, which the estimator would then have to undo; the clustering
is carried in the variance instead (task design effects). The list is ordered so that any prefix
keeps the allocation's proportions: a labelling queue can serve it from the top and stop
anywhere. After labelling, `realbench audit` uses the double-sampling estimator
p̂ = PPV·q̂ + (1 − NPV)(1 − q̂) over every judged episode.

The plan file never names an episode's judge verdict next to it (strata are opaque ids), so a
blind queue can serve it as it is.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.audit import prepare_audit_table
from analysis.stats import Z95, as_result_dict, neyman_allocation
from realbench.errors import AnalysisError

PLAN_KIND = "realbench-label-plan"
PLAN_FILE = "label-plan.json"
MIN_LABELS_FOR_PRIOR = 5
MIN_PER_STRATUM = 2
# A stratum whose prior is exactly 0 or 1 still gets labels in proportion to this spread.
MIN_SPREAD = 0.1


@dataclass(frozen=True)
class PlanStratum:
    id: str
    side: str
    judge_verdict: bool
    judged: int
    labelled: int
    unlabelled: int
    prior_p: float
    prior_source: str
    allocated: int
    expected_half_width: float | None

    def to_dict(self) -> dict[str, Any]:
        return as_result_dict(self)


@dataclass(frozen=True)
class PlannedEpisode:
    order: int
    episode: str
    store: str | None
    task: str
    model: str
    side: str
    stratum: str
    inclusion_probability: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return as_result_dict(self)


@dataclass(frozen=True)
class LabelPlan:
    judge: str
    n_requested: int
    seed: int
    strata: list[PlanStratum]
    expected_half_width: dict[str, float]
    episodes: list[PlannedEpisode]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": PLAN_KIND,
            "version": 1,
            "judge": self.judge,
            "n_requested": self.n_requested,
            "n_planned": len(self.episodes),
            "seed": self.seed,
            "allocation": "neyman: n_h ∝ (N_h/N_side)·√(P_h(1 − P_h)), ≥ 2 per stratum",
            "design": "simple random sample without replacement within each side × verdict stratum",
            "strata": [s.to_dict() for s in self.strata],
            "expected_half_width": self.expected_half_width,
            "episodes": [e.to_dict() for e in self.episodes],
            "notes": self.notes,
        }


def _priors(judged: pd.DataFrame) -> dict[tuple[str, bool], tuple[float, str]]:
    """P(truth | side, verdict) guesses, and where each came from."""
    lab = judged.dropna(subset=["truth"])
    clone = lab[lab["side"].str.startswith("clone")]
    out: dict[tuple[str, bool], tuple[float, str]] = {}
    for (side, verdict), _g in judged.groupby(["side", "verdict"], sort=True):
        here = lab[(lab["side"] == side) & (lab["verdict"] == verdict)]
        pilot = clone[clone["verdict"] == verdict]
        if len(here) >= MIN_LABELS_FOR_PRIOR:
            out[(str(side), bool(verdict))] = (
                float(here["truth"].astype(bool).mean()),
                f"{len(here)} labels in this stratum",
            )
        elif len(pilot) >= MIN_LABELS_FOR_PRIOR:
            out[(str(side), bool(verdict))] = (
                float(pilot["truth"].astype(bool).mean()),
                f"the clone verifier on {len(pilot)} clone episodes with this verdict (pilot)",
            )
        else:
            out[(str(side), bool(verdict))] = (0.5, "no information: 0.5")
    return out


def plan_labels(
    df: pd.DataFrame,
    n: int,
    *,
    judge: str | None = None,
    seed: int = 0,
    stores: dict[str, str] | None = None,
) -> LabelPlan:
    """Choose ``n`` unlabelled judged episodes to label (see the module doc).

    ``df`` is an audit table (`analysis.tables.audit_table_from_stores` or a tidy table);
    ``stores`` maps an episode key's store prefix (``"0"`` in ``"0:run/task/…"``) to its store path.
    """
    if n < 1:
        raise AnalysisError("--plan-labels needs a positive number of episodes")
    data = prepare_audit_table(df)
    judges = sorted(data["judge"].unique())
    if not judges:
        raise AnalysisError("no judge verdicts to plan labels for", hint="run `realbench judge` first")
    chosen = judge or judges[0]
    if chosen not in judges:
        raise AnalysisError(f"no verdicts of judge {chosen!r}", hint=f"judges: {judges}")
    judged = data[(data["judge"] == chosen) & data["verdict"].notna()].copy()
    judged["verdict"] = judged["verdict"].astype(bool)
    priors = _priors(judged)
    unlabelled = judged[judged["truth"].isna()]
    if unlabelled.empty:
        raise AnalysisError(
            f"every episode judged by {chosen} already has ground truth", hint="nothing to label"
        )
    sides_total = judged.groupby("side").size().to_dict()
    keys = sorted({(str(s), bool(v)) for s, v in zip(unlabelled["side"], unlabelled["verdict"], strict=True)})
    ids = {k: f"s{i + 1}" for i, k in enumerate(keys)}
    cand = {ids[k]: int(((unlabelled["side"] == k[0]) & (unlabelled["verdict"] == k[1])).sum()) for k in keys}
    judged_n = {k: int(((judged["side"] == k[0]) & (judged["verdict"] == k[1])).sum()) for k in keys}
    spread = {k: max(math.sqrt(priors[k][0] * (1 - priors[k][0])), MIN_SPREAD) for k in keys}
    # neyman_allocation scores N_h·S_h; pass S'_h so that the score is (N_h/N_side)·S_h.
    s_prime = {ids[k]: judged_n[k] / sides_total[k[0]] * spread[k] / cand[ids[k]] for k in keys}
    notes: list[str] = []
    total = sum(cand.values())
    if n > total:
        notes.append(f"{n} labels asked for, {total} unlabelled episodes exist: all planned")
    floor = min(MIN_PER_STRATUM, min(cand.values()))
    alloc = neyman_allocation(cand, s_prime, min(n, total), min_per_stratum=floor).as_dict()
    rng = np.random.default_rng(seed)
    chosen_rows = []
    strata = []
    for k in keys:
        sid = ids[k]
        members = unlabelled[(unlabelled["side"] == k[0]) & (unlabelled["verdict"] == k[1])].copy()
        members["plan_r"] = rng.random(len(members))
        picked = members.sort_values("plan_r").head(alloc[sid]).copy()
        n_h = len(picked)
        picked["plan_stratum"] = sid
        picked["plan_pi"] = n_h / cand[sid]
        picked["plan_key"] = (np.arange(n_h) + 0.5) / max(n_h, 1)
        chosen_rows.append(picked)
        p, source = priors[k]
        fpc = 1 - n_h / cand[sid] if cand[sid] else 0.0
        hw = Z95 * math.sqrt(p * (1 - p) * max(fpc, 0.0) / n_h) if n_h else None
        strata.append(
            PlanStratum(sid, k[0], k[1], judged_n[k], judged_n[k] - cand[sid], cand[sid], p, source, n_h, hw)
        )
    expected: dict[str, float] = {}
    for side in sorted({k[0] for k in keys}):
        var = 0.0
        for st in strata:
            if st.side != side or not st.allocated:
                continue
            w = st.judged / sides_total[side]
            fpc = max(1 - st.allocated / st.unlabelled, 0.0)
            var += w * w * st.prior_p * (1 - st.prior_p) * fpc / st.allocated
        expected[side] = Z95 * math.sqrt(var)
    notes.append(
        "expected half-widths treat labelled episodes as independent; labels of one task are "
        "correlated, so where a stratum's episodes crowd into few tasks they are optimistic"
    )
    plan_rows = pd.concat(chosen_rows).sort_values(["plan_key", "plan_stratum"])
    episodes = []
    for i, row in enumerate(plan_rows.itertuples(), start=1):
        key = str(row.episode)
        prefix, sep, rest = key.partition(":")
        store = (stores or {}).get(prefix) if sep else None
        episodes.append(
            PlannedEpisode(
                i,
                rest if store is not None else key,
                store,
                str(row.task),
                str(row.model),
                str(row.side),
                str(row.plan_stratum),
                float(row.plan_pi),
            )
        )
    return LabelPlan(chosen, n, seed, strata, expected, episodes, notes)


def write_plan(plan: LabelPlan, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(plan.to_dict(), ensure_ascii=False, indent=2), encoding="utf-8")
    return path


def find_plans(stores: list[Path]) -> list[Path]:
    """Labelling plans written into these stores (their labels were drawn by judge verdict)."""
    return [p / PLAN_FILE for p in stores if (p / PLAN_FILE).exists()]
