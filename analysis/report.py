"""The HTML report: one self-contained file (plots and screenshots as data URIs, no CDN).

Sections: success by model × target, the per-task paired outcome matrix, retention with its
intervals and the published reference points, strata, judge audit, device health, and a
side-by-side clone/real replay viewer. Synthetic policies (``synthetic:*``) and virtual phones are
labelled wherever they appear, with a banner when any are present. A section without data says so.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from jinja2 import Environment, FileSystemLoader, select_autoescape
from PIL import Image, ImageDraw

from analysis import plots
from analysis.audit import AuditResult, Rate, audit_table
from analysis.report_summary import build_summary
from analysis.retention import ESTIMAND_MEANING, RatioEstimate, RetentionResult, retention_from_table
from analysis.stats import format_interval, minus_sign, wilson
from analysis.tables import (
    StoreSet,
    audit_table_from_stores,
    load_task_list,
    pick_judge,
    resolve_outcomes,
)
from realbench.agents.policy import POLICY_PREFIX
from realbench.errors import AnalysisError, RealbenchError
from realbench.store import VIDEO_FILE

log = logging.getLogger(__name__)

TEMPLATE = "report.html.j2"
# Screenshots are embedded: bound the file size (≈ 10–20 kB per downscaled step).
VIEWER_MAX_TASKS = 30
VIEWER_IMAGE_WIDTH = 270
# An episode video is embedded up to this size (the report stays one file); a larger one is linked.
VIEWER_MAX_VIDEO_BYTES = 16 * 1024 * 1024

# docs/methods.md, "Published reference points" — context, not targets to fit.
REFERENCES = {
    "mobilegym": "MobileGym (published): 59 signal tasks; clone 33.9 → 76.7 %, real phone 32.2 → 72.9 %; "
    "95.1 % retention on its signal subset. Its VLM judge misjudged 10.2 % of real-device trajectories.",
    "maigym": "MAI-Gym (published): RL in a mocked train-ticketing app raised physical-phone success 28.8 → 48.1 %.",
    "spabench": "SPA-Bench (published) success-detection F1: 0.926 / 0.884 single-app (EN/ZH), "
    "0.833 / 0.857 cross-app.",
}
MOBILEGYM_RETENTION = 0.951


def is_synthetic(model: str) -> bool:
    return str(model).startswith("synthetic:")


def model_label(model: str, policies: Mapping[str, str] | None = None) -> str:
    """How a model is shown: a synthetic policy says so; a policy checkpoint carries what its card
    says it is (`policies`, from `policy_descriptions`)."""
    if is_synthetic(model):
        return f"{model} [synthetic policy]"
    description = (policies or {}).get(str(model))
    return f"{model} [{description}]" if description else str(model)


def policy_descriptions(inputs: ReportInputs) -> dict[str, str]:
    """``policy:<name>@<hash>`` -> the description its checkpoint card gives (for example "a small
    element policy trained by RL on the clone, 192 updates, seed 0"), read from the ``policy`` field
    every step of such an agent records."""
    ep = inputs.episodes
    out: dict[str, str] = {}
    if ep.empty or "model" not in ep:
        return out
    for model, g in ep.groupby("model", sort=True):
        if not str(model).startswith(POLICY_PREFIX):
            continue
        for key in g["key"].astype(str).head(3):
            try:
                steps = inputs.steps(key)
            except (RealbenchError, OSError):
                continue
            found = next(
                (st["extra"]["policy"] for st in steps if (st.get("extra") or {}).get("policy")), None
            )
            if found:
                out[str(model)] = str(found)
                break
    return out


def target_label(env: str, device_kind: str | None) -> str:
    if device_kind == "virtual-phone":
        return f"{env} [virtual phone]"
    return str(env)


def env_labels(episodes: pd.DataFrame) -> dict[str, str]:
    """env → display label; an env any of whose episodes ran on a virtual phone says so."""
    if episodes.empty or "device_kind" not in episodes:
        return {}
    out = {}
    for env, g in episodes.groupby("env"):
        virtual = (g["device_kind"] == "virtual-phone").any()
        out[str(env)] = target_label(str(env), "virtual-phone" if virtual else None)
    return out


@dataclass
class ReportInputs:
    """What the report reads. `steps` and `episode_dir` take an episode key (see tables.StoreSet)."""

    episodes: pd.DataFrame
    verdicts: pd.DataFrame
    steps: Callable[[str], list[dict[str, Any]]]
    episode_dir: Callable[[str], Path]
    audit: pd.DataFrame | None = None
    strata: dict[str, str] | None = None
    population: dict[str, int] | None = None
    sources: list[str] = field(default_factory=list)
    tasks_needed: int | None = None  # the selection's power analysis
    packs: dict[str, str] = field(default_factory=dict)  # app -> the pack its runs were made from


@dataclass
class Section:
    id: str
    title: str
    empty: str | None = None  # when set, the section has no data and says why
    images: list[str] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)  # pre-rendered, escaped HTML tables
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # shown in a box at the top of the section


def _table(df: pd.DataFrame, cls: str = "data") -> str:
    return df.to_html(index=False, classes=cls, border=0, na_rep="—", escape=True)


def _pct(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else minus_sign(f"{100 * x:.1f}%")


def _ci(ci: Sequence[float] | None, pct: bool = False) -> str:
    return "undefined" if ci is None else format_interval(ci, pct)


# --------------------------------------------------------------------------------------------
# sections


def _scored(inputs: ReportInputs, judge: str | None) -> pd.DataFrame:
    if inputs.episodes.empty:
        return inputs.episodes
    return resolve_outcomes(inputs.episodes, inputs.verdicts, judge)


def _success_rows(
    decided: pd.DataFrame, suffix: str = "", policies: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    rows = []
    for (model, env, kind), g in decided.groupby(["model", "env", "device_kind"], dropna=False, sort=True):
        k, n = int(g["success"].astype(bool).sum()), len(g)
        lo, hi = wilson(k, n)
        rows.append(
            {
                "label": model_label(model, policies),
                "target": target_label(env, kind if isinstance(kind, str) else None) + suffix,
                "rate": k / n,
                "lo": lo,
                "hi": hi,
                "synthetic": is_synthetic(model),
                "k": k,
                "n": n,
                "tasks": g["task"].nunique(),
            }
        )
    return rows


@dataclass(frozen=True)
class CloneOnly:
    """Tasks with decided clone episodes and no decided device episode — one count for every section.

    ``not_selected``: not in the signal-task list (not chosen for the phones, as planned);
    ``unrun``: in the list, yet no device episode was decided (skipped, given up or aborted there)."""

    tasks: list[str]
    not_selected: list[str]
    unrun: list[str]

    def text(self) -> str:
        parts = []
        if self.not_selected:
            parts.append(f"{len(self.not_selected)} not selected for the phones, as planned")
        if self.unrun:
            shown = ", ".join(self.unrun[:8]) + (" …" if len(self.unrun) > 8 else "")
            parts.append(f"{len(self.unrun)} selected but with no decided device episode ({shown})")
        return f"{len(self.tasks)} task(s) have decided episodes on the clone only" + (
            f" ({'; '.join(parts)})" if parts else ""
        )


def clone_only_tasks(decided: pd.DataFrame, strata: dict[str, str] | None) -> CloneOnly:
    if decided.empty:
        return CloneOnly([], [], [])
    tasks = decided["task"].astype(str)
    on_device = set(tasks[decided["env"] != "clone"])
    on_clone = set(tasks[decided["env"] == "clone"])
    only = sorted(on_clone - on_device) if on_device else []
    chosen = set(strata or {})
    not_selected = [t for t in only if strata is not None and t not in chosen]
    unrun = [t for t in only if strata is None or t in chosen]
    if strata is None:  # no task list: nothing says which were meant for the phones
        not_selected, unrun = only, []
    return CloneOnly(only, not_selected, unrun)


def success_section(
    ep: pd.DataFrame, strata: dict[str, str] | None = None, policies: Mapping[str, str] | None = None
) -> Section:
    """Clone vs device over the same tasks: the clone bars use only tasks that also ran on a
    device (tasks kept on the clone only were not selected for phones — expected)."""
    s = Section("success", "Success by model × target")
    decided = ep[ep["success"].notna()] if not ep.empty else ep
    if decided.empty:
        s.empty = "No scored episodes with a verdict yet."
        return s
    device_tasks = set(decided.loc[decided["env"] != "clone", "task"].astype(str))
    compared = decided
    only = clone_only_tasks(decided, strata)
    clone_only = len(only.tasks)
    if clone_only:
        compared = decided[decided["task"].astype(str).isin(device_tasks)]
    df = pd.DataFrame(_success_rows(compared, policies=policies))
    s.images.append(plots.success_bars(df))
    table_rows = df
    if clone_only:
        every = pd.DataFrame(
            _success_rows(decided[decided["env"] == "clone"], " (every clone task)", policies)
        )
        table_rows = pd.concat([df, every], ignore_index=True)
        s.notes.append(
            f"The chart compares like with like: the clone bars cover the {len(device_tasks)} task(s) that also ran on "
            f"a device. {only.text()}; the rows marked '(every clone task)' include them."
        )
    show = pd.DataFrame(
        {
            "model": table_rows["label"],
            "target": table_rows["target"],
            "successes": table_rows["k"].astype(str) + " / " + table_rows["n"].astype(str),
            "tasks": table_rows["tasks"],
            "rate": table_rows["rate"].map(_pct),
            "Wilson 95%": [
                _ci((a, b), True) for a, b in zip(table_rows["lo"], table_rows["hi"], strict=True)
            ],
        }
    )
    s.tables.append(_table(show))
    s.notes.append(
        "Episode-level Wilson intervals; runs of one task are correlated, so task-level intervals "
        "(retention section) are the ones to quote."
    )
    return s


def paired_section(ep: pd.DataFrame, policies: Mapping[str, str] | None = None) -> Section:
    s = Section("paired", "Per-task paired outcomes")
    decided = ep[ep["success"].notna()] if not ep.empty else ep
    if decided.empty:
        s.empty = "No scored episodes with a verdict yet."
        return s
    rates = decided.assign(success=decided["success"].astype(float)).pivot_table(
        index="task", columns=["env", "model"], values="success", aggfunc="mean"
    )
    labels = env_labels(decided)
    rates.columns = [
        f"{labels.get(str(env), env)}\n{model_label(model, policies)}" for env, model in rates.columns
    ]
    rates = rates.sort_index().iloc[:80]
    s.images.append(plots.paired_matrix(rates))
    if len(decided["task"].unique()) > 80:
        s.notes.append("Showing the first 80 tasks.")
    return s


def _ratio_cells(e: RatioEstimate) -> dict[str, str]:
    if not e.estimable:
        return {
            "value": "not estimable",
            "Fieller 95%": f"exact set {e.fieller_set_text}",
            "delta 95%": "not presented",
            "BCa 95%": "not presented",
            "percentile 95%": "not presented",
        }
    boot = {"not run": "not run (--resamples 0)"}.get(e.bootstrap_status)
    zero = " (zero width: not meaningful)" if e.degenerate else ""
    return {
        "value": f"{e.estimate:.3f}",
        "Fieller 95%": format_interval(e.fieller_ci) + zero,
        "delta 95%": format_interval(e.delta_ci) + ("" if e.delta_reliable else " (rough: g ≥ 0.1)"),
        "BCa 95%": boot or format_interval(e.bca_ci),
        "percentile 95%": boot or format_interval(e.percentile_ci),
    }


def _gain_cell(g: Any) -> str:
    return "" if g is None else f"{_pct(g.mean)} {format_interval(g.ci, True)}"


def retention_section(
    ep: pd.DataFrame,
    base: str | None,
    trained: str | None,
    inputs: ReportInputs,
    resamples: int,
    seed: int,
    policies: Mapping[str, str] | None = None,
) -> tuple[Section, RetentionResult | None]:
    s = Section("retention", "Gain retention")
    s.notes.append(REFERENCES["mobilegym"])
    s.notes.append(REFERENCES["maigym"])
    if base is None or trained is None:
        s.empty = "Name the two models (--base and --trained) to compute gains and retention."
        return s, None
    decided = ep[ep["success"].notna()] if not ep.empty else ep
    envs = set(decided["env"]) if not decided.empty else set()
    real_env = "real" if "real" in envs else ("clone-on-phone" if "clone-on-phone" in envs else None)
    if "clone" not in envs or real_env is None:
        s.empty = "Retention needs decided episodes on the clone and on a device (real or clone-on-phone)."
        return s, None
    only = clone_only_tasks(decided, inputs.strata)
    if only.tasks:
        # The same count as the success section's: one definition, with its parts named.
        s.notes.append(f"{only.text()}: they are not part of the paired analysis.")
    if inputs.strata:
        decided = decided[decided["task"].astype(str).isin(list(inputs.strata))]
    table = pd.DataFrame(
        {
            "task": decided["task"].astype(str),
            "stratum": decided["task"].map(inputs.strata or {}).fillna("all") if inputs.strata else "all",
            "model": decided["model"].astype(str),
            "env": decided["env"].astype(str),
            "success": decided["success"].astype(bool),
            "judged": decided["judged"],
            "success_source": decided.get("success_source", "truth"),
        }
    )
    if "app" in decided:
        table["app"] = decided["app"].astype(str)
    table["run"] = table.groupby(["task", "model", "env"]).cumcount()
    try:
        res = retention_from_table(
            table,
            base=base,
            trained=trained,
            real_env=real_env,
            population=inputs.population,
            n_resamples=resamples,
            seed=seed,
            tasks_needed=inputs.tasks_needed,
        )
    except RealbenchError as exc:
        s.empty = f"Retention could not be computed: {exc.message}"
        return s, None
    s.warnings.extend(res.warnings)
    labels = env_labels(decided)
    rows_for_plot = [
        (e.label, e.ratio.value, e.ratio.fieller_ci, e.ratio.bca_ci, e.ratio.fieller_set)
        for e in res.estimands.values()
        if e.ratio is not None
    ]
    rows_for_plot += [
        (x.label, x.value, x.fieller_ci, x.bca_ci, x.fieller_set)
        for x in (res.retention_jj, res.slope)
        if x is not None
    ]
    s.images.append(
        plots.retention_plot(
            rows_for_plot,
            # A published figure is drawn only beside the estimand it was computed for.
            [("R_signal", MOBILEGYM_RETENTION, "MobileGym 95.1% (published, signal subset)")],
        )
    )
    main = res.main
    gains = pd.DataFrame(
        [
            {
                "side": labels.get(env, env),
                model_label(base, policies): _pct(res.headline_rates[env][base]),
                model_label(trained, policies): _pct(res.headline_rates[env][trained]),
                "gain": _pct(gain.mean),
                "95% CI": format_interval(gain.ci, True),
                "test": next(t.method for t in res.tests if t.env == env),
                "p": f"{next(t.p_value for t in res.tests if t.env == env):.3g}",
            }
            for env, gain in ((res.clone_env, res.gain_clone), (res.real_env, res.gain_real))
        ]
    )
    s.tables.append(_table(gains))
    est_rows = []
    for e in res.estimands.values():
        row: dict[str, Any] = {
            "estimand": e.label + (" (headline)" if e.estimand is res.headline else ""),
            "what it is": ESTIMAND_MEANING[e.estimand],
            "tasks": e.n_tasks,
            "clone gain": _gain_cell(e.gain_clone),
            "device gain": _gain_cell(e.gain_real),
        }
        if e.ratio is None:
            row.update({"value": e.reason or "not computed"})
        else:
            row.update(_ratio_cells(e.ratio))
        est_rows.append(row)
    jc = res.judge_correction
    for x in (res.retention_jj, res.slope, *((jc.judged, jc.corrected) if jc is not None else ())):
        if x is not None:
            est_rows.append({"estimand": x.label, "tasks": x.n_tasks, **_ratio_cells(x)})
    if jc is not None:
        s.notes.append(
            f"Judge-corrected retention ({jc.estimand} tasks): device gain as judged {_pct(jc.gain_real_judged.mean)}, "
            f"Rogan–Gladen corrected {_pct(jc.gain_real_corrected.mean)}; the judge's bias in the gain "
            f"{100 * jc.bias_in_gain:+.1f} points (§3 formula: {100 * jc.bias_formula:+.1f}). Se/Sp from {jc.source}. "
            f"{jc.note}."
        )
    s.tables.append(_table(pd.DataFrame(est_rows)))
    if res.subgroup_tests:
        s.tables.append(
            _table(
                pd.DataFrame(
                    [
                        {
                            "device gain by": t.by,
                            "group": t.group,
                            "tasks": t.n_tasks,
                            "mean device gain": _pct(t.mean_gain_real),
                            "p (sign-flip)": f"{t.p_value:.3g}",
                            "p (Holm, across these tests)": f"{t.p_holm:.3g}",
                        }
                        for t in res.subgroup_tests
                    ]
                )
            )
        )
    s.notes.insert(
        0,
        f"Headline: {main.label} — {ESTIMAND_MEANING[main.estimand]}. "
        f"Transfer gap (clone gain − device gain): {_pct(res.transfer_gap.mean)} "
        f"{format_interval(res.transfer_gap.ci, True)}; {res.n_tasks} paired tasks; device side = {real_env}.",
    )
    for e in res.estimands.values():
        if e.why_not:
            s.notes.insert(1, f"{e.label}: {e.why_not}.")
    return s, res


def strata_section(inputs: ReportInputs) -> Section:
    s = Section("strata", "Strata of the signal-task sample")
    if not inputs.strata:
        s.empty = "No signal-task list given (--tasks): tasks are not stratified."
        return s
    counts = pd.Series(inputs.strata).value_counts()
    df = pd.DataFrame({"stratum": counts.index, "sampled tasks": counts.to_numpy()})
    if inputs.population:
        df["population"] = df["stratum"].map(inputs.population)
    s.tables.append(_table(df))
    return s


def _rate_text(r: Rate) -> str:
    if not r.n:
        return "no data"
    text = f"{_pct(r.value)} {_ci(r.ci, True)} ({r.k}/{r.n}"
    text += f", {r.n_tasks} tasks)" if r.n_tasks is not None else ")"
    if r.bootstrap_ci is not None:
        text += f"; bootstrap {_ci(r.bootstrap_ci, True)}"
    return text


def audit_section(
    audit: AuditResult | None, reason: str | None, policies: Mapping[str, str] | None = None
) -> Section:
    s = Section("audit", "Judge audit")
    s.notes.append(REFERENCES["spabench"])
    s.notes.append(REFERENCES["mobilegym"])
    if audit is None or not audit.judges:
        s.empty = reason or "No judge verdicts with ground truth."
        return s
    rows = []
    series: dict[str, list[tuple[str, float, float, float]]] = {}
    for j in audit.judges:
        c = j.metrics.confusion
        s.images.append(plots.confusion_plot(j.judge, c.tp, c.fn, c.fp, c.tn))
        m = j.metrics
        rows.append(
            {
                "judge": j.judge,
                "labelled": j.n_labelled,
                "abstained": j.n_abstained,
                **{
                    name: _rate_text(rate)
                    for name, rate in (
                        ("Se", m.se),
                        ("Sp", m.sp),
                        ("FPR", m.fpr),
                        ("FNR", m.fnr),
                        ("PPV", m.ppv),
                        ("NPV", m.npv),
                    )
                },
                "F1": "undefined" if m.f1 is None else f"{m.f1:.3f}",
            }
        )
        pts = [
            (e.group, e.error.value or 0.0, *(e.error.ci or (0.0, 0.0)))
            for e in j.errors
            if e.by == "length" and e.error.value is not None
        ]
        order = {"short": 0, "medium": 1, "long": 2}
        series[j.judge] = sorted(pts, key=lambda p: order.get(p[0].split(" ")[0], 3))
    s.tables.append(_table(pd.DataFrame(rows)))
    s.notes.append(
        "Each rate: value, Wilson 95% on its effective size (its own design effect over tasks), "
        "successes/trials over tasks, then the task-cluster bootstrap 95% interval."
    )
    s.warnings.extend(audit.warnings)
    if any(series.values()):
        s.images.append(plots.error_by_length(series))
    corr = [
        {
            "judge": c.judge,
            "model": model_label(c.model, policies),
            "side": c.side,
            "judged rate": _pct(c.judged_rate),
            "corrected": _pct(c.corrected_rate),
            "± SE": _pct(c.corrected_se),
            "method": c.method,
            "truth on labelled (unweighted)": _pct(c.true_rate_labelled),
        }
        for j in audit.judges
        for c in j.corrected
    ]
    s.tables.append(_table(pd.DataFrame(corr)))
    if audit.agreements:
        s.tables.append(
            _table(
                pd.DataFrame(
                    [
                        {
                            "judges": f"{a.judge_a} × {a.judge_b}",
                            "n": a.n,
                            "κ": "—" if a.kappa is None else f"{a.kappa:.3f}",
                            "κ 95% (task bootstrap)": _ci(a.kappa_ci),
                            "raw agreement": _pct(a.raw_agreement),
                            "PABAK": f"{a.pabak:.3f}",
                            "flag": a.flag,
                        }
                        for a in audit.agreements
                    ]
                )
            )
        )
    s.notes.extend(audit.notes)
    return s


def evidence_section(episodes: pd.DataFrame, packs: dict[str, str]) -> Section:
    """Per task run on phones, how much of its real side public evidence backs."""
    from analysis.evidence_table import evidence_rows

    sec = Section("evidence", "Evidence behind the real side")
    rows = evidence_rows(episodes, packs)
    if rows.empty:
        sec.empty = "No task ran on a phone (or its pack could not be read)."
        return sec
    sec.tables.append(_table(rows))
    sec.notes.append(
        "Share of each task's real steps (setup, real golden plan, checks, boundary) whose selectors rest "
        "on a hierarchy dump or a public script of the real app; `realbench check-pack --evidence` lists "
        "the guesses and the contradictions with the evidence of record."
    )
    return sec


def health_section(episodes: pd.DataFrame) -> Section:
    s = Section("health", "Device health and aborts")
    if episodes.empty:
        s.empty = "No episodes."
        return s
    rows = []
    for (kind, serial), g in episodes.groupby(["device_kind", "device_serial"], dropna=False, sort=True):
        aborts = int((g["outcome"] == "env_invalid").sum())
        lo, hi = wilson(aborts, len(g))
        label = f"{serial if isinstance(serial, str) else '?'} ({kind if isinstance(kind, str) else '?'})"
        if kind == "virtual-phone":
            label += " [virtual phone]"
        rows.append(
            {
                "label": label,
                "episodes": len(g),
                "env_invalid": aborts,
                "rate": aborts / len(g),
                "lo": lo,
                "hi": hi,
            }
        )
    df = pd.DataFrame(rows)
    s.images.append(plots.abort_rates(df))
    s.tables.append(
        _table(
            pd.DataFrame(
                {
                    "device": df["label"],
                    "episodes": df["episodes"],
                    "env_invalid (unscored, rerun)": df["env_invalid"],
                    "abort rate": df["rate"].map(_pct),
                    "Wilson 95%": [_ci((a, b), True) for a, b in zip(df["lo"], df["hi"], strict=True)],
                }
            )
        )
    )
    outcomes = episodes.groupby(["env", "outcome"]).size().unstack(fill_value=0).reset_index()
    s.tables.append(_table(outcomes))
    return s


# --------------------------------------------------------------------------------------------
# replay viewer


def annotate_screenshot(
    path: Path, action: dict[str, Any] | None, width: int = VIEWER_IMAGE_WIDTH
) -> str | None:
    """Downscaled JPEG data URI of a screenshot with the tap (or swipe) drawn where it landed."""
    try:
        stored = Image.open(path)
        size = (width, max(1, round(stored.height * width / stored.width)))
        # A JPEG decodes straight at 1/2, 1/4 or 1/8 of its size (no larger than needed): most of
        # the report's time went into decoding full phone screenshots only to shrink them.
        stored.draft("RGB", size)
        img = stored.convert("RGB")
    except (OSError, ValueError, ZeroDivisionError) as exc:
        log.warning("cannot read screenshot %s: %s", path, exc)
        return None
    img = img.resize(size)
    if action and isinstance(action, dict) and "x" in action and "y" in action:
        draw = ImageDraw.Draw(img)
        x = action["x"] / 1000 * img.width
        y = action["y"] / 1000 * img.height
        r = max(6, img.width // 30)
        if action.get("type") == "swipe" and "x2" in action:
            x2 = action["x2"] / 1000 * img.width
            y2 = action["y2"] / 1000 * img.height
            draw.line([(x, y), (x2, y2)], fill=(255, 0, 0), width=3)
            draw.ellipse([x2 - r / 2, y2 - r / 2, x2 + r / 2, y2 + r / 2], fill=(255, 0, 0))
        draw.ellipse([x - r, y - r, x + r, y + r], outline=(255, 0, 0), width=3)
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=65)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def episode_video(folder: Path | None) -> str | None:
    """The episode's screen recording for the viewer: an embedded data URI, or a file link when large."""
    if folder is None:
        return None
    path = folder / VIDEO_FILE
    try:
        size = path.stat().st_size
    except OSError:
        return None
    if size > VIEWER_MAX_VIDEO_BYTES:
        return path.resolve().as_uri()
    return "data:video/mp4;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def describe_action(action: dict[str, Any] | None) -> str:
    if not action:
        return "(no action)"
    kind = action.get("type", "?")
    rest = ", ".join(f"{k}={v}" for k, v in action.items() if k != "type")
    return f"{kind}({rest})"


def _episode_payload(row: pd.Series, verdicts: pd.DataFrame, inputs: ReportInputs) -> dict[str, Any]:
    key = str(row["key"])
    try:
        steps = inputs.steps(key)
        folder = inputs.episode_dir(key)
    except (RealbenchError, OSError) as exc:
        steps, folder = [], None
        log.warning("cannot read steps of %s: %s", key, exc)
    out_steps = []
    for st in steps:
        shot = st.get("screenshot")
        image = (
            annotate_screenshot(folder / shot, st.get("action")) if (shot and folder is not None) else None
        )
        out_steps.append(
            {
                "index": st.get("index"),
                "image": image,
                "action": describe_action(st.get("action")),
                "thought": st.get("thought") or "",
                "error": st.get("error") or "",
                "boundary": st.get("boundary") or "",
            }
        )
    v = verdicts[verdicts["key"] == key] if not verdicts.empty else verdicts
    kind = row.get("device_kind")
    return {
        "episode": str(row["episode_id"]),
        "env": target_label(str(row["env"]), kind if isinstance(kind, str) else None),
        "device": f"{row.get('device_serial') or '?'} ({kind or '?'})",
        "virtual": kind == "virtual-phone",
        "outcome": str(row["outcome"]),
        "verdicts": [
            {
                "source": str(x.source),
                "name": str(x.name or ""),
                "success": None if bool(x.abstained) else bool(x.success),
                "reason": str(x.reason or "")[:300],
            }
            for x in v.itertuples()
        ],
        "steps": out_steps,
        "video": episode_video(folder),
    }


def viewer_payload(inputs: ReportInputs, policies: Mapping[str, str] | None = None) -> dict[str, Any]:
    """{tasks: [{task, models: {model: {clone: episode|null, real: episode|null}}}]} for the viewer."""
    ep = inputs.episodes
    if ep.empty:
        return {"tasks": [], "note": ""}
    ep = ep[ep["scored"].astype(bool)]
    tasks = []
    # Signal-sample tasks first (when a task list is given), then the rest, alphabetically.
    chosen = set(inputs.strata or {})
    names = sorted(ep["task"].astype(str).unique(), key=lambda t: (t not in chosen, t))
    for task in names[:VIEWER_MAX_TASKS]:
        models: dict[str, Any] = {}
        for model, g in ep[ep["task"] == task].groupby("model", sort=True):
            clone = g[g["env"] == "clone"]
            device = g[g["env"] != "clone"]
            sides = {
                "clone": _episode_payload(clone.iloc[0], inputs.verdicts, inputs) if len(clone) else None,
                "real": _episode_payload(device.iloc[0], inputs.verdicts, inputs) if len(device) else None,
            }
            models[str(model)] = {
                "label": model_label(str(model), policies),
                "synthetic": is_synthetic(str(model)),
                **sides,
            }
        tasks.append({"task": task, "models": models})
    note = f"Showing {VIEWER_MAX_TASKS} of {len(names)} tasks." if len(names) > VIEWER_MAX_TASKS else ""
    return {"tasks": tasks, "note": note}


# --------------------------------------------------------------------------------------------


def build_report(
    inputs: ReportInputs,
    *,
    out: Path,
    base: str | None = None,
    trained: str | None = None,
    judge: str | None = None,
    resamples: int = 10_000,
    seed: int = 0,
    extra_sections: Sequence[Section] = (),
) -> Path:
    """Render the report to ``out`` and return its path. ``extra_sections`` (e.g. the transfer
    study's retention per drift profile) follow the standard ones."""
    ep_all = inputs.episodes
    judge_name = pick_judge(inputs.verdicts, judge) if not inputs.verdicts.empty else None
    ep = _scored(inputs, judge_name)
    audit: AuditResult | None = None
    audit_reason = None
    if inputs.audit is not None and not inputs.audit.empty:
        try:
            audit = audit_table(inputs.audit, seed=seed)
        except RealbenchError as exc:
            audit_reason = f"Judge audit could not be computed: {exc.message}"
    else:
        audit_reason = "No judge verdicts on episodes with ground truth (verifier or human label)."
    policies = policy_descriptions(inputs)
    retention, res = retention_section(ep, base, trained, inputs, resamples, seed, policies)
    summary = build_summary(
        res,
        retention.empty,
        audit,
        audit_reason,
        inputs.population,
        env_labels(ep[ep["success"].notna()]) if not ep.empty else {},
    )
    sections = [
        success_section(ep, inputs.strata, policies),
        paired_section(ep, policies),
        retention,
        strata_section(inputs),
        audit_section(audit, audit_reason, policies),
        health_section(ep_all),
        evidence_section(ep_all, inputs.packs),
        *extra_sections,
    ]
    synthetic_models = sorted(
        {str(m) for m in ep_all.get("model", pd.Series(dtype=str)) if is_synthetic(str(m))}
    )
    virtual = sorted(
        {
            str(s)
            for s, k in zip(
                ep_all.get("device_serial", pd.Series(dtype=str)),
                ep_all.get("device_kind", pd.Series(dtype=str)),
                strict=True,
            )
            if k == "virtual-phone"
        }
    )
    viewer = viewer_payload(inputs, policies)
    env = Environment(
        loader=FileSystemLoader(str(Path(__file__).parent)), autoescape=select_autoescape(["html", "j2"])
    )
    page = env.get_template(TEMPLATE).render(
        title="realbench report",
        sources=inputs.sources,
        synthetic_models=synthetic_models,
        policies=policies,
        virtual_phones=virtual,
        sections=sections,
        summary=summary,
        n_episodes=len(ep_all),
        n_tasks=int(ep_all["task"].nunique()) if not ep_all.empty else 0,
        judge=judge_name,
        viewer_json=json.dumps(viewer, ensure_ascii=False).replace("</", "<\\/"),
        has_viewer=bool(viewer["tasks"]),
        viewer_note=viewer["note"],
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out


def build_report_from_stores(
    runs: Sequence[Path],
    *,
    out: Path,
    base: str | None = None,
    trained: str | None = None,
    tasks: Path | None = None,
    judge: str | None = None,
    resamples: int = 10_000,
    seed: int = 0,
    extra_sections: Sequence[Section] = (),
) -> Path:
    strata = population = None
    tasks_needed = None
    if tasks is not None:
        from analysis.analysis_commands import power_tasks_needed

        listing = load_task_list(tasks)
        strata = {str(t["task"]): str(t["stratum"]) for t in listing.get("tasks", [])}
        population = {str(k): int(v) for k, v in (listing.get("population") or {}).items()} or None
        tasks_needed = power_tasks_needed(listing)
    with StoreSet(list(runs)) as ss:
        episodes = ss.episodes()
        verdicts = ss.verdicts()
        try:
            audit = audit_table_from_stores(ss)
        except AnalysisError as exc:
            log.info("no judge audit: %s", exc.message)
            audit = None
        inputs = ReportInputs(
            episodes=episodes,
            verdicts=verdicts,
            steps=ss.steps,
            episode_dir=ss.episode_dir,
            audit=audit,
            strata=strata,
            population=population,
            sources=[str(p) for p in runs],
            tasks_needed=tasks_needed,
            packs={str(r["app"]): str(r["pack"]) for s in ss.stores for r in s.runs() if r.get("pack")},
        )
        return build_report(
            inputs,
            out=out,
            base=base,
            trained=trained,
            judge=judge,
            resamples=resamples,
            seed=seed,
            extra_sections=extra_sections,
        )


__all__ = ["ReportInputs", "build_report", "build_report_from_stores"]
