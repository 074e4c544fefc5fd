"""Implementations of `realbench select`, `audit`, `retention` and `report` (cli.py wraps them).

Each takes run stores or a tidy table, prints readable rich tables, or with ``as_json`` one JSON
object on stdout.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from analysis.audit import AuditResult, Rate, audit_table
from analysis.labelling import PLAN_FILE, LabelPlan, find_plans, write_plan
from analysis.labelling import plan_labels as plan_labels_fn
from analysis.retention import Estimand, RatioEstimate, RetentionResult, retention_from_table
from analysis.selection import Replayer, SelectionResult, load_replayer, select_tasks, write_task_list
from analysis.stats import format_interval, minus_sign
from analysis.tables import (
    TABLE_SUFFIXES,
    StoreSet,
    audit_table_from_stores,
    is_run_store,
    load_task_list,
    read_table,
    retention_table_from_stores,
    selection_table_from_stores,
    traces_from_stores,
)
from realbench.errors import ConfigError
from realbench.full_width import print_full_width


def _emit_json(payload: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(payload, ensure_ascii=False, default=_json_default, allow_nan=False) + "\n")


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)


def _clean(obj: Any) -> Any:
    """Replace non-finite floats by None so the JSON is strict."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, str | bytes):
        try:
            return _clean(obj.item())
        except (ValueError, AttributeError):
            return obj
    return obj


def _fmt(x: float | None, pct: bool = False) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return minus_sign(f"{100 * x:.1f}%" if pct else f"{x:.3f}")


def _ci(ci: Sequence[float] | None, pct: bool = False) -> str:
    if ci is None:
        return "not estimable"
    return f"[{_fmt(ci[0], pct)}, {_fmt(ci[1], pct)}]"


def split_inputs(paths: Sequence[Path]) -> tuple[pd.DataFrame | None, list[Path]]:
    """One table file, or any number of run-store folders."""
    if not paths:
        raise ConfigError("no input given", hint="pass run-store folders or a .csv/.parquet table")
    tables = [p for p in paths if p.suffix in TABLE_SUFFIXES]
    if tables:
        if len(paths) != 1:
            raise ConfigError(
                "pass either one table or run stores, not both", hint=f"got {[str(p) for p in paths]}"
            )
        return read_table(tables[0]), []
    for p in paths:
        if not is_run_store(p):
            raise ConfigError(
                f"{p} is neither a table ({', '.join(TABLE_SUFFIXES)}) nor a run store",
                hint="pass a `realbench run` --out folder or a tidy table",
            )
    return None, list(paths)


def parse_spreads(text: str | None) -> dict[str, float] | None:
    """'gain=0.3,both-fail=0.1' → {'gain': 0.3, 'both-fail': 0.1}."""
    if not text:
        return None
    out: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.strip().partition("=")
        try:
            if not sep or not name:
                raise ValueError
            out[name.strip()] = float(value)
        except ValueError:
            raise ConfigError(
                f"bad --prior-sz entry {part!r}", hint="use stratum=spread pairs, e.g. gain=0.3,both-fail=0.1"
            ) from None
    return out


def parse_population(text: str | None) -> dict[str, int] | None:
    """'gain=20,loss=5' → {'gain': 20, 'loss': 5}."""
    if not text:
        return None
    out: dict[str, int] = {}
    for part in text.split(","):
        name, sep, value = part.strip().partition("=")
        try:
            if not sep or not name:
                raise ValueError
            out[name.strip()] = int(value)
        except ValueError:
            raise ConfigError(
                f"bad --population entry {part!r}",
                hint="use stratum=count pairs, e.g. gain=20,loss=5,both-fail=30",
            ) from None
    return out


# --------------------------------------------------------------------------------------------
# select


def select_command(
    clone: Sequence[Path],
    *,
    base: str,
    trained: str,
    budget_hours: float,
    runs: int = 3,
    episode_seconds: float | None = None,
    allocation: str = "neyman",
    alpha: float = 0.1,
    replay_k: int = 3,
    replay_traces: int | None = None,
    replayer: str | Replayer | None = None,
    controls: int = 0,
    seed: int = 0,
    out: Path | None = None,
    pilot: Sequence[Path] = (),
    prior_sz: str | None = None,
    as_json: bool = False,
    console: Console | None = None,
    not_runnable: dict[str, str] | None = None,
    phone_filter: str = "",
) -> SelectionResult:
    """`realbench select`. ``not_runnable`` (task → why) are tasks the phones may not run (the
    wiring reads them from the pack and a certificate); ``phone_filter`` says what decided that."""
    table, stores = split_inputs(clone)
    pilot_table = None
    if pilot:
        pilot_table, pilot_stores = split_inputs(pilot)
        if pilot_stores:
            with StoreSet(pilot_stores) as ps:
                pilot_table = retention_table_from_stores(ps)
    traces = None
    rep = load_replayer(replayer) if isinstance(replayer, str) else replayer
    if stores:
        with StoreSet(stores) as ss:
            table = selection_table_from_stores(ss)
            if rep is not None:
                traces = traces_from_stores(ss, table)
                if replay_traces is not None:  # fewer traces per task: a cheaper screen
                    traces = {task: ts[:replay_traces] for task, ts in traces.items()}
    assert table is not None
    result = select_tasks(
        table,
        base=base,
        trained=trained,
        budget_hours=budget_hours,
        runs_per_model=runs,
        episode_seconds=episode_seconds,
        method=allocation,
        alpha=alpha,
        traces=traces,
        replayer=rep,
        replay_k=replay_k,
        min_controls=controls,
        seed=seed,
        pilot=pilot_table,
        prior_sz=parse_spreads(prior_sz),
        not_runnable=not_runnable,
        phone_filter=phone_filter,
    )
    if out is not None:
        write_task_list(result, out)
    if as_json:
        payload = result.to_dict()
        payload["out"] = None if out is None else str(out)
        _emit_json(_clean(payload))
    else:
        render_selection(result, console or Console(), out)
    return result


def render_selection(r: SelectionResult, console: Console, out: Path | None) -> None:
    counts = r.classification["stratum"].value_counts()
    t = Table(title=f"Clone strata ({r.base} → {r.trained})")
    for col in (
        "stratum",
        "tasks",
        "eligible (screened, phone-runnable)",
        "mean clone gain",
        "allocated",
        "cost h/task",
    ):
        t.add_column(col)
    chosen = r.neyman if r.method == "neyman" else r.proportional
    alloc = chosen.as_dict() if chosen is not None else {}
    for h in ("gain", "loss", "both-pass", "both-fail", "mixed"):
        members = r.classification[r.classification["stratum"] == h]
        t.add_row(
            h,
            str(int(counts.get(h, 0))),
            str(r.population.get(h, 0)),
            _fmt(float(members["g_s"].mean()) if len(members) else None),
            str(alloc.get(h, 0)),
            _fmt(r.cost_hours.get(h)),
        )
    console.print(t)
    if r.excluded:
        kinds = ", ".join(f"{n} {kind}" for kind, n in r.excluded_by_reason().items())
        console.print(
            f"[yellow]excluded {len(r.excluded)} of {len(r.classification)} tasks[/] the phones may not run "
            f"({kinds}; from {r.phone_filter}):",
            soft_wrap=True,
        )
        for task, why in sorted(r.excluded.items()):
            console.print(f"  excluded {task}: {why}", highlight=False, soft_wrap=True)
    elif r.phone_filter:
        console.print(f"phone filter: {r.phone_filter}; no task excluded", soft_wrap=True)
    if r.screen is not None:
        if r.screen.ran:
            console.print(
                f"reproducibility screen: {len(r.screen.excluded)} excluded "
                f"({100 * r.screen.fraction_excluded:.1f}%), k = {r.screen.k}"
            )
            for s in r.screen.tasks:
                if not s.kept:
                    console.print(f"  dropped {s.task}: {s.reason}")
        else:
            console.print(f"[yellow]{r.screen.note}[/]")
    console.print(
        f"allocation: {r.method}; {len(r.selected)} tasks, {r.planned_hours:.2f} of {r.budget_hours:g} device-hours"
        + (f"; spread of z = g_d − R·g_s from {r.spread_source}" if r.method == "neyman" else "")
    )
    if r.controls_false_accept_bound is not None:
        console.print(
            f"stable-failure controls bound the judge's false-accept rate at ≤ {r.controls_false_accept_bound:.1%}"
        )
    if r.power is not None:
        p = r.power
        console.print(
            f"power (exact McNemar, one run per task, n = {p.n_tasks}): {p.power_one_run:.2f}; "
            f"tasks for 80%: {p.tasks_needed_one_run}; with {p.runs_per_model} runs: {p.tasks_needed_m_runs} ({p.note})"
        )
    for note in r.notes:
        console.print(f"note: {note}")
    if out is not None:
        console.print(f"signal-task list written to {out}")


# --------------------------------------------------------------------------------------------
# audit


def audit_command(
    inputs: Sequence[Path],
    *,
    sampled_by_verdict: bool = False,
    seed: int = 0,
    plan_labels: int | None = None,
    plan_out: Path | None = None,
    judge: str | None = None,
    as_json: bool = False,
    console: Console | None = None,
    borrow_from: str | None = None,
) -> AuditResult | LabelPlan:
    """The judge audit; with ``plan_labels`` the labelling plan instead (which episodes to label)."""
    table, stores = split_inputs(inputs)
    notes: list[str] = []
    if stores:
        with StoreSet(stores) as ss:
            table = audit_table_from_stores(ss)
        sources = table.loc[table["truth_source"] != "", "truth_source"].value_counts()
        if len(sources):
            notes.append(
                "ground truth: "
                + ", ".join(f"{n} from {s}" for s, n in sources.items())
                + (
                    " (virtual-phone-truth: the verifier of a virtual phone's clone apps — a test rig's truth)"
                    if "virtual-phone-truth" in sources.index
                    else ""
                )
            )
        plans = find_plans(stores)
        if plans and plan_labels is None and not sampled_by_verdict:
            sampled_by_verdict = True
            notes.append(
                f"labels drawn by judge verdict ({', '.join(str(p) for p in plans)}): double sampling "
                "over every judged episode"
            )
    assert table is not None
    out = console or Console()
    if plan_labels is not None:
        plan = plan_labels_fn(
            table, plan_labels, judge=judge, seed=seed, stores={str(i): str(p) for i, p in enumerate(stores)}
        )
        first_store = next((e.store for e in plan.episodes if e.store), None)
        path = plan_out or (Path(first_store) / PLAN_FILE if first_store else Path(PLAN_FILE))
        write_plan(plan, path)
        if as_json:
            _emit_json(_clean({**plan.to_dict(), "out": str(path)}))
        else:
            render_plan(plan, path, out)
        return plan
    result = audit_table(table, sampled_by_verdict=sampled_by_verdict, seed=seed, borrow_from=borrow_from)
    result.notes.extend(notes)
    if as_json:
        _emit_json(_clean(result.to_dict()))
    else:
        render_audit(result, out)
    return result


def render_plan(plan: LabelPlan, path: Path, console: Console) -> None:
    t = Table(title=f"labelling plan for judge {plan.judge}: {len(plan.episodes)} episodes (double sampling)")
    for col in (
        "stratum",
        "side",
        "judge verdict",
        "judged",
        "labelled",
        "unlabelled",
        "P(truth) guess",
        "from",
        "label",
        "± 95% (P)",
    ):
        t.add_column(col)
    for s in plan.strata:
        t.add_row(
            s.id,
            s.side,
            "success" if s.judge_verdict else "failure",
            str(s.judged),
            str(s.labelled),
            str(s.unlabelled),
            f"{s.prior_p:.2f}",
            s.prior_source,
            str(s.allocated),
            "—" if s.expected_half_width is None else f"±{100 * s.expected_half_width:.1f} pts",
        )
    console.print(t)
    for side, hw in plan.expected_half_width.items():
        console.print(
            f"expected 95% half-width of the corrected success rate on {side}: ±{100 * hw:.1f} points"
        )
    for note in plan.notes:
        console.print(f"note: {note}")
    console.print(f"plan written to {path} (the labelling queue serves it first, in order)")


def _rate_cell(r: Rate, pct: bool = True) -> str:
    if not r.n:
        return "no data"
    cell = f"{_fmt(r.value, pct)} {format_interval(r.ci, pct)} ({r.k}/{r.n}"
    if r.n_tasks is not None:
        cell += f", {r.n_tasks} tasks"
    cell += ")"
    if r.bootstrap_ci is not None:
        cell += f" boot {format_interval(r.bootstrap_ci, pct)}"
    return cell


def render_audit(a: AuditResult, console: Console) -> None:
    if a.warnings:
        console.print(warnings_panel(a.warnings))
    for j in a.judges:
        c = j.metrics.confusion
        console.rule(f"judge {j.judge}: {j.n_labelled} labelled episodes, {j.n_abstained} abstentions")
        conf = Table(title="confusion (rows: truth)")
        conf.add_column("")
        conf.add_column("judge: success")
        conf.add_column("judge: failure")
        conf.add_row("truth: success", str(c.tp), str(c.fn))
        conf.add_row("truth: failure", str(c.fp), str(c.tn))
        print_full_width(console, conf)
        m = Table(
            title="metrics: Wilson 95% on n/deff (each metric's own design effect), task-cluster bootstrap 95%"
        )
        for col in ("metric", "value [Wilson] (k/n, tasks) boot [bootstrap]", "design effect"):
            m.add_column(col)
        mm = j.metrics
        for name, rate in (
            ("Se", mm.se),
            ("Sp", mm.sp),
            ("FPR", mm.fpr),
            ("FNR", mm.fnr),
            ("PPV", mm.ppv),
            ("NPV", mm.npv),
            ("accuracy", mm.accuracy),
        ):
            m.add_row(name, _rate_cell(rate), f"{rate.design_effect:.2f}")
        print_full_width(console, m)
        e = Table(title="error by model, trajectory length and app")
        for col in ("by", "group", "error", "FPR", "FNR"):
            e.add_column(col)
        for g in j.errors:
            e.add_row(g.by, g.group, _rate_cell(g.error), _rate_cell(g.fpr), _rate_cell(g.fnr))
        print_full_width(console, e)
        cr = Table(title="corrected success rates per model and side")
        for col in (
            "model",
            "side",
            "judged q̂",
            "corrected p̂",
            "± SE",
            "method",
            "truth on labelled (unweighted)",
        ):
            cr.add_column(col)
        for r in j.corrected:
            cr.add_row(
                r.model,
                r.side,
                _fmt(r.judged_rate, True),
                _fmt(r.corrected_rate, True),
                _fmt(r.corrected_se, True),
                r.method + (f" ({r.note})" if r.note else ""),
                _fmt(r.true_rate_labelled, True),
            )
        print_full_width(console, cr)
    if a.agreements:
        t = Table(title="agreement between judges")
        for col in ("judges", "n", "κ", "κ 95% (task bootstrap)", "raw agreement", "PABAK", "flag"):
            t.add_column(col)
        for ag in a.agreements:
            t.add_row(
                f"{ag.judge_a} × {ag.judge_b}",
                str(ag.n),
                _fmt(ag.kappa),
                format_interval(ag.kappa_ci) if ag.kappa_ci else "undefined",
                _fmt(ag.raw_agreement, True),
                _fmt(ag.pabak),
                ag.flag,
            )
        print_full_width(console, t)
    for note in a.notes:
        console.print(f"note: {note}")


# --------------------------------------------------------------------------------------------
# retention


def power_tasks_needed(task_list: dict[str, Any]) -> int | None:
    """Tasks the selection's power analysis asked for (the m-run figure when there is one)."""
    power = task_list.get("power") or {}
    for key in ("tasks_needed_m_runs", "tasks_needed_one_run"):
        if power.get(key):
            return int(power[key])
    return None


def apply_task_list(df: pd.DataFrame, strata: dict[str, str]) -> pd.DataFrame:
    """Rows of the listed tasks, with the list's strata (a table's own stratum column yields)."""
    out = df[df["task"].astype(str).isin(list(strata))].copy()
    out["stratum"] = out["task"].astype(str).map(strata)
    return out


def retention_command(
    *,
    table: Path | None = None,
    clone: Sequence[Path] = (),
    real: Sequence[Path] = (),
    base: str,
    trained: str,
    population: str | None = None,
    tasks: Path | None = None,
    judge: str | None = None,
    clone_env: str = "clone",
    real_env: str = "real",
    resamples: int = 10_000,
    seed: int = 0,
    quantile: str = "auto",
    as_json: bool = False,
    console: Console | None = None,
    borrow_from: str | None = None,
) -> RetentionResult:
    pop = parse_population(population)
    strata: dict[str, str] | None = None
    tasks_needed: int | None = None
    if quantile not in ("auto", "z", "t"):
        raise ConfigError(
            f"unknown --quantile {quantile!r}",
            hint="auto (t with n − H df below 30 tasks, else z), z (normal) or t (n − 1 df)",
        )
    if tasks is not None:
        task_list = load_task_list(tasks)
        strata = {str(t["task"]): str(t["stratum"]) for t in task_list.get("tasks", [])}
        if pop is None and task_list.get("population"):
            pop = {str(k): int(v) for k, v in task_list["population"].items()}
        tasks_needed = power_tasks_needed(task_list)
    if table is not None:
        if clone or real:
            raise ConfigError("pass either --table or --clone/--real run stores", hint="not both")
        df = read_table(table)
    else:
        if not clone or not real:
            raise ConfigError("retention needs --table, or both --clone and --real run stores")
        with StoreSet([*clone, *real]) as ss:
            df = retention_table_from_stores(ss, strata=strata, judge=judge)
    unlisted = 0
    if strata:
        # Tasks not selected for the phones are expected to lack device runs: leave them out here
        # (and say so once) rather than report them as dropped.
        unlisted = int(df.loc[~df["task"].astype(str).isin(list(strata)), "task"].nunique())
        df = apply_task_list(df, strata)
    result = retention_from_table(
        df,
        base=base,
        trained=trained,
        clone_env=clone_env,
        real_env=real_env,
        population=pop,
        n_resamples=resamples,
        seed=seed,
        quantile=quantile,
        tasks_needed=tasks_needed,
        borrow_from=borrow_from,
    )
    if unlisted:
        result.notes.append(
            f"{unlisted} task(s) outside the signal-task list (run on the clone only, not selected for phones) "
            "are left out, as expected"
        )
    if as_json:
        _emit_json(_clean(result.to_dict()))
    else:
        render_retention(result, console or Console())
    return result


def _ratio_cells(r: RatioEstimate) -> list[str]:
    """Value and intervals of one ratio; a not-estimable ratio shows its exact Fieller set only."""
    if not r.estimable:
        return [
            "not estimable",
            f"exact set {r.fieller_set_text}"
            + (f" (g = {r.fieller_g:.2f})" if math.isfinite(r.fieller_g) else ""),
            "not presented",
            "not presented",
            "not presented",
        ]
    boot = {"not run": "not run (--resamples 0)", "not presented": "not presented"}.get(r.bootstrap_status)
    zero = " (zero width: not meaningful)" if r.degenerate else ""
    return [
        _fmt(r.estimate),
        format_interval(r.fieller_ci) + zero,
        format_interval(r.delta_ci) + ("" if r.delta_reliable else " (g ≥ 0.1: rough)"),
        boot or format_interval(r.bca_ci),
        boot or format_interval(r.percentile_ci),
    ]


def warnings_panel(warnings: Sequence[str]) -> Panel:
    return Panel("\n".join(f"• {w}" for w in warnings), title="warnings", border_style="yellow", expand=False)


def render_retention(r: RetentionResult, console: Console) -> None:
    if r.warnings:
        console.print(warnings_panel(r.warnings))
    g = Table(title=f"gains ({r.base} → {r.trained}) for the headline {r.main.label}")
    for col in ("side", r.base, r.trained, "gain", "95% CI", "test", "p"):
        g.add_column(col)
    tests = {t.env: t for t in r.tests}
    for env, gain in ((r.clone_env, r.gain_clone), (r.real_env, r.gain_real)):
        rates = r.headline_rates[env]
        test = tests[env]
        g.add_row(
            env,
            _fmt(rates[r.base], True),
            _fmt(rates[r.trained], True),
            _fmt(gain.mean, True),
            format_interval(gain.ci, True),
            test.method,
            f"{test.p_value:.3g}",
        )
    g.add_row(
        "gap", "", "", _fmt(r.transfer_gap.mean, True), format_interval(r.transfer_gap.ci, True), "", ""
    )
    console.print(g)
    gt = Table(title="gains behind each estimand (each weighted as its estimand)")
    for col in ("estimand", "tasks", "clone gain", "device gain", "gap"):
        gt.add_column(col)
    t = Table(title=f"retention (headline: {r.main.label} ★)")
    for col in ("estimand", "value", "Fieller 95%", "delta 95%", "BCa 95%", "percentile 95%", "tasks"):
        t.add_column(col)
    for est in r.estimands.values():
        name = est.label + (" ★" if est.estimand is r.headline else "")
        gt.add_row(
            name,
            str(est.n_tasks),
            *(
                "" if x is None else f"{_fmt(x.mean, True)} {format_interval(x.ci, True)}"
                for x in (est.gain_clone, est.gain_real, est.transfer_gap)
            ),
        )
        if est.ratio is None:
            t.add_row(name, est.reason or "not computed", "", "", "", "", str(est.n_tasks))
            continue
        t.add_row(name, *_ratio_cells(est.ratio), str(est.n_tasks))
    jc = r.judge_correction
    extras = [r.retention_jj, r.slope] + ([jc.judged, jc.corrected] if jc is not None else [])
    for extra in extras:
        if extra is not None:
            t.add_row(extra.label, *_ratio_cells(extra), str(extra.n_tasks))
    console.print(gt)
    console.print(t)
    if jc is not None:
        console.print(
            f"judge on the device side ({jc.estimand} tasks): device gain judged {_fmt(jc.gain_real_judged.mean, True)}, "
            f"corrected {_fmt(jc.gain_real_corrected.mean, True)}; the judge's bias in the gain "
            f"{100 * jc.bias_in_gain:+.1f} points (§3 formula {100 * jc.bias_formula:+.1f}); Se/Sp from {jc.source}. {jc.note}."
        )
    if Estimand.POPULATION not in r.estimands:
        console.print("population estimand not computed: pass --population or --tasks with the stratum sizes")
    for est in r.estimands.values():
        if est.why_not:
            console.print(f"[yellow]{est.label}[/]: {est.why_not}")
        if est.ratio is not None and est.ratio.collapsed:
            for h, nb in est.ratio.collapsed.items():
                console.print(f"{est.label}: stratum {h} collapsed with {nb} for the variance")
    if r.subgroup_tests:
        s = Table(title="device gain by stratum and app (sign-flip; Holm across these tests)")
        for col in ("by", "group", "tasks", "mean device gain", "p", "p (Holm)"):
            s.add_column(col)
        for st in r.subgroup_tests:
            s.add_row(
                st.by,
                st.group,
                str(st.n_tasks),
                _fmt(st.mean_gain_real, True),
                f"{st.p_value:.3g}",
                f"{st.p_holm:.3g}",
            )
        console.print(s)
    for note in r.notes:
        console.print(f"[yellow]note:[/] {note}")


# --------------------------------------------------------------------------------------------
# report


def report_command(
    runs: Sequence[Path],
    *,
    out: Path,
    base: str | None = None,
    trained: str | None = None,
    tasks: Path | None = None,
    judge: str | None = None,
    resamples: int = 10_000,
    seed: int = 0,
    console: Console | None = None,
) -> Path:
    from analysis.report import build_report_from_stores

    path = build_report_from_stores(
        runs, out=out, base=base, trained=trained, tasks=tasks, judge=judge, resamples=resamples, seed=seed
    )
    (console or Console()).print(f"report written to {path}")
    return path
