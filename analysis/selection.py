"""Outcome-stratified selection of signal tasks (docs/methods.md §2).

1. classify every candidate task from clone runs of both models into gain / loss / both-pass /
   both-fail / mixed;
2. screen reproducibility by replaying recorded action traces k times on the clone (a `Replayer`);
3. allocate a device-hour budget across strata (proportional or Neyman, ≥ 2 per stratum, tiny
   strata whole);
4. mark the both-fail sample as stable-failure controls (no false accept in n ⇒ FPR ≤ 3/n);
5. estimate power of the device test.
"""

from __future__ import annotations

import importlib
import logging
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd
from scipy import stats as sps

from analysis.columns import check_columns, parse_bool_column
from analysis.stats import (
    Allocation,
    as_result_dict,
    mcnemar_power,
    mcnemar_sample_size,
    neyman_allocation,
    proportional_allocation,
    repeated_runs_sample_size,
)
from realbench.errors import AnalysisError, ConfigError, RealbenchError

log = logging.getLogger(__name__)

SELECT_COLUMNS = ("task", "model", "run", "success")
MIN_CLONE_RUNS = 5


class Stratum(StrEnum):
    GAIN = "gain"
    LOSS = "loss"
    BOTH_PASS = "both-pass"
    BOTH_FAIL = "both-fail"
    MIXED = "mixed"


class Replayer(Protocol):
    """Replays a recorded action trace on a fresh clone session and returns the verifier's verdict.

    ``actions`` are realbench Action JSON dicts (coordinates normalised to 0–1000), in order;
    ``seed`` is the recorded episode's seed, so the task's parameters are sampled as they were.
    """

    def __call__(self, task_id: str, actions: list[dict[str, Any]], seed: int = 0) -> bool: ...


@dataclass(frozen=True)
class RecordedTrace:
    """One recorded episode of a task: its actions and the verdict it got when it was recorded."""

    task: str
    episode_id: str
    model: str
    actions: list[dict[str, Any]]
    recorded_success: bool | None
    seed: int = 0


@dataclass(frozen=True)
class ScreenedTask:
    task: str
    kept: bool
    replays: list[bool]
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return as_result_dict(self)


@dataclass(frozen=True)
class ScreenResult:
    ran: bool
    k: int
    tasks: list[ScreenedTask]
    fraction_excluded: float
    mean_gain_kept: float | None
    mean_gain_excluded: float | None
    note: str = ""

    @property
    def excluded(self) -> list[str]:
        return [t.task for t in self.tasks if not t.kept]

    def to_dict(self) -> dict[str, Any]:
        out = as_result_dict(self)
        out["excluded"] = self.excluded
        return out


def reproducibility_screen(
    traces: dict[str, list[RecordedTrace]], replayer: Replayer, k: int = 3
) -> list[ScreenedTask]:
    """Replay each task's traces k times; a task whose verdict flips (between replays, or against
    the recorded verdict) has a flaky environment or verifier and is dropped, with the reason logged.

    A replayer with a ``concurrency`` attribute above 1 (e.g. several headless clone pages) gets
    that many replays at once; the verdicts do not depend on the order."""
    jobs = [(task, trace) for task, task_traces in sorted(traces.items()) for trace in task_traces]

    def replay_k(job: tuple[str, RecordedTrace]) -> list[bool] | str:
        task, trace = job
        try:
            return [bool(replayer(task, trace.actions, seed=trace.seed)) for _ in range(k)]
        except RealbenchError as exc:
            return f"replay of {trace.episode_id} failed: {exc.message}"

    workers = max(1, int(getattr(replayer, "concurrency", 1)))
    if workers > 1 and len(jobs) > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(replay_k, jobs))
    else:
        results = [replay_k(job) for job in jobs]
    by_job = dict(zip([id(t) for _, t in jobs], results, strict=True))
    out = []
    for task, task_traces in sorted(traces.items()):
        if not task_traces:
            out.append(ScreenedTask(task, True, [], "no recorded trace: not screened"))
            continue
        replays: list[bool] = []
        reason = ""
        for trace in task_traces:
            got = by_job[id(trace)]
            if isinstance(got, str):
                reason = got
                break
            replays += got
            if len(set(got)) > 1:
                reason = f"verdict flips across {k} replays of {trace.episode_id}: {sum(got)}/{k} success"
                break
            if trace.recorded_success is not None and got[0] != trace.recorded_success:
                reason = (
                    f"replays of {trace.episode_id} give {'success' if got[0] else 'failure'}, "
                    f"recorded {'success' if trace.recorded_success else 'failure'}"
                )
                break
        if reason:
            log.info("reproducibility screen drops %s: %s", task, reason)
        out.append(ScreenedTask(task, not reason, replays, reason or "reproducible"))
    return out


def load_replayer(spec: str) -> Replayer:
    """Import a replayer factory given as ``module:callable`` and call it with no arguments."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigError(
            f"bad replayer spec {spec!r}", hint="use module:factory, e.g. mypkg.replay:make_replayer"
        )
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot load replayer {spec!r}: {exc}", hint="check the module path") from exc
    replayer: Replayer = factory()
    return replayer


# --------------------------------------------------------------------------------------------


def classify_tasks(df: pd.DataFrame, base: str, trained: str, alpha: float = 0.1) -> pd.DataFrame:
    """Per-task clone rates and stratum.

    both-pass: every run of both models succeeded; both-fail: none did; gain (loss): one-sided
    Fisher exact test of p_r > p_b (p_b > p_r) at ``alpha``; mixed: the evidence is inconclusive.
    """
    check_columns(df, SELECT_COLUMNS, "select")
    sub = df[df["model"].astype(str).isin([base, trained])].copy()
    sub["success"] = parse_bool_column(sub["success"])
    sub = sub[sub["success"].notna()]
    if "env" in sub.columns:
        envs = set(sub["env"].astype(str))
        if "clone" in envs:
            sub = sub[sub["env"].astype(str) == "clone"]
    if sub.empty:
        raise AnalysisError(
            f"no clone runs for models {base!r} and {trained!r}",
            hint=f"models present: {sorted(df['model'].astype(str).unique())}",
        )
    sub["success"] = sub["success"].astype(bool).astype(int)
    g = sub.groupby(["task", "model"])["success"].agg(["sum", "size"]).unstack("model")
    complete = g[("size", base)].notna() & g[("size", trained)].notna()
    missing = sorted(str(t) for t in g.index[~complete])
    if missing:
        log.warning("tasks without clone runs of both models are not classified: %s", missing)
    g = g[complete]
    out = pd.DataFrame(index=g.index.astype(str))
    out["c_b"] = g[("sum", base)].astype(int).to_numpy()
    out["m_b"] = g[("size", base)].astype(int).to_numpy()
    out["c_r"] = g[("sum", trained)].astype(int).to_numpy()
    out["m_r"] = g[("size", trained)].astype(int).to_numpy()
    out["p_b"] = out["c_b"] / out["m_b"]
    out["p_r"] = out["c_r"] / out["m_r"]
    out["g_s"] = out["p_r"] - out["p_b"]
    p_gain, p_loss = [], []
    for row in out.itertuples():
        table = [[row.c_r, row.m_r - row.c_r], [row.c_b, row.m_b - row.c_b]]
        p_gain.append(float(sps.fisher_exact(table, alternative="greater")[1]))
        p_loss.append(float(sps.fisher_exact(table, alternative="less")[1]))
    out["p_gain"] = p_gain
    out["p_loss"] = p_loss
    stratum = np.full(len(out), Stratum.MIXED.value, dtype=object)
    all_pass = (out["c_b"] == out["m_b"]) & (out["c_r"] == out["m_r"])
    all_fail = (out["c_b"] == 0) & (out["c_r"] == 0)
    stratum[all_pass.to_numpy()] = Stratum.BOTH_PASS.value
    stratum[all_fail.to_numpy()] = Stratum.BOTH_FAIL.value
    stratum[(out["p_gain"] <= alpha).to_numpy()] = Stratum.GAIN.value
    stratum[(out["p_loss"] <= alpha).to_numpy()] = Stratum.LOSS.value
    out["stratum"] = stratum
    if "duration_s" in sub.columns:
        out["duration_s"] = sub.groupby("task")["duration_s"].mean().reindex(out.index).to_numpy()
    if "app" in sub.columns:
        out["app"] = sub.groupby("task")["app"].first().reindex(out.index).astype(str).to_numpy()
    out.index.name = "task"
    few = int(((out["m_b"] < MIN_CLONE_RUNS) | (out["m_r"] < MIN_CLONE_RUNS)).sum())
    if few:
        log.warning(
            "%d task(s) have fewer than %d clone runs per model: strata are noisy", few, MIN_CLONE_RUNS
        )
    return out


@dataclass(frozen=True)
class SelectedTask:
    task: str
    stratum: str
    role: str  # "signal" (gain stratum), "control" (stable failure) or "stratum-sample"
    runs_per_model: int
    g_s: float

    def to_dict(self) -> dict[str, Any]:
        return as_result_dict(self)


@dataclass(frozen=True)
class PowerEstimate:
    n_tasks: int
    p10: float
    p01: float
    power_one_run: float
    tasks_needed_one_run: int | None
    tasks_needed_m_runs: int | None
    runs_per_model: int
    note: str

    def to_dict(self) -> dict[str, Any]:
        return as_result_dict(self)


@dataclass(frozen=True)
class SelectionResult:
    base: str
    trained: str
    classification: pd.DataFrame = field(repr=False)
    population: dict[str, int] = field(default_factory=dict)
    screen: ScreenResult | None = None
    proportional: Allocation | None = None
    neyman: Allocation | None = None
    method: str = "neyman"
    cost_hours: dict[str, float] = field(default_factory=dict)
    budget_hours: float = 0.0
    planned_hours: float = 0.0
    selected: list[SelectedTask] = field(default_factory=list)
    controls_false_accept_bound: float | None = None
    power: PowerEstimate | None = None
    notes: list[str] = field(default_factory=list)
    spread_source: str = ""
    spread_z: dict[str, float] = field(default_factory=dict)
    # task → why the phones may not run it (not allowed on a real account, not certified): left out
    # of the population and the draw, since a task the run must skip measures nothing on a phone
    excluded: dict[str, str] = field(default_factory=dict)
    phone_filter: str = ""  # what decided `excluded` (the pack, a certificate), or why nothing did

    def excluded_by_reason(self) -> dict[str, int]:
        """Exclusion kinds (the reason up to its first ':') with their task counts."""
        return _count_kinds(self.excluded)

    @property
    def allocation(self) -> Allocation | None:
        """The allocation drawn (Neyman only when the spread of z was known)."""
        return self.neyman if self.method == "neyman" else self.proportional

    def task_list(self) -> dict[str, Any]:
        """The signal-task list the farm runner reads."""
        return {
            "kind": "realbench-signal-tasks",
            "version": 1,
            "base": self.base,
            "trained": self.trained,
            "allocation": self.method,
            "budget_hours": self.budget_hours,
            "population": self.population,
            "power": None if self.power is None else self.power.to_dict(),
            "excluded": self.excluded,
            "tasks": [t.to_dict() for t in self.selected],
        }

    def to_dict(self) -> dict[str, Any]:
        counts = self.classification["stratum"].value_counts().to_dict()
        return {
            "base": self.base,
            "trained": self.trained,
            "strata_counts": {str(k): int(v) for k, v in counts.items()},
            "population": self.population,
            "screen": None if self.screen is None else self.screen.to_dict(),
            "allocation": {
                "method": self.method,
                "spread_source": self.spread_source,
                "spread_z": self.spread_z,
                "proportional": None if self.proportional is None else self.proportional.to_dict(),
                "neyman": None if self.neyman is None else self.neyman.to_dict(),
            },
            "cost_hours_per_task": self.cost_hours,
            "budget_hours": self.budget_hours,
            "planned_hours": self.planned_hours,
            "selected": [t.to_dict() for t in self.selected],
            "controls_false_accept_bound": self.controls_false_accept_bound,
            "power": None if self.power is None else self.power.to_dict(),
            "excluded": self.excluded,
            "excluded_by_reason": self.excluded_by_reason(),
            "phone_filter": self.phone_filter,
            "notes": self.notes,
        }


def _budget_allocation(
    population: dict[str, int],
    s_h: dict[str, float],
    cost_h: dict[str, float],
    budget: float,
    method: str,
    min_per_stratum: int,
    floors: dict[str, int] | None = None,
) -> Allocation:
    """The largest allocation (by total tasks) of the chosen method whose cost fits the budget."""

    def alloc(n: int) -> Allocation:
        if method == "neyman":
            return neyman_allocation(population, s_h, n, cost_h, min_per_stratum, floors)
        return proportional_allocation(population, n, min_per_stratum, floors)

    def cost(a: Allocation) -> float:
        return sum(n * cost_h[h] for h, n in a.as_dict().items())

    total = sum(population.values())
    floor = sum(min(max(min_per_stratum, (floors or {}).get(h, 0)), v) for h, v in population.items())
    best = alloc(floor)
    if cost(best) > budget:
        raise AnalysisError(
            f"a budget of {budget:g} device-hours cannot cover the minimum tasks per stratum and controls "
            f"({cost(best):.2f} h needed)",
            hint="raise --budget-hours or lower --runs",
        )
    for n in range(floor + 1, total + 1):
        a = alloc(n)
        if cost(a) > budget:
            break
        best = a
    return _top_up(best, population, s_h, cost_h, budget, method)


def _top_up(
    a: Allocation,
    population: dict[str, int],
    s_h: dict[str, float],
    cost_h: dict[str, float],
    budget: float,
    method: str,
) -> Allocation:
    """Spend what the search left: with unequal costs the next allocation of n + 1 tasks can cost
    more than the budget while one more task of a cheaper stratum still fits. Add tasks one at a
    time where the method's target per task is least met (N_h·S_h/√c_h over n_h + 1 for Neyman,
    N_h over n_h + 1 for proportional) until nothing more fits."""
    n = a.as_dict()
    spent = sum(k * cost_h[h] for h, k in n.items())
    while True:
        open_ = [h for h in n if n[h] < population[h] and spent + cost_h[h] <= budget + 1e-12]
        if not open_:
            break

        def need(h: str) -> float:
            target = population[h] * (s_h.get(h, 0.0) / math.sqrt(cost_h[h]) if method == "neyman" else 1.0)
            return target / (n[h] + 1)

        h = max(open_, key=need)
        n[h] += 1
        spent += cost_h[h]
    counts = [n[h] for h in a.strata]
    taken = [c >= p for c, p in zip(counts, a.population, strict=True)]
    return Allocation(a.method, list(a.strata), list(a.population), counts, taken)


def select_tasks(
    df: pd.DataFrame,
    *,
    base: str,
    trained: str,
    budget_hours: float,
    runs_per_model: int = 3,
    episode_seconds: float | None = None,
    method: str = "neyman",
    alpha: float = 0.1,
    min_per_stratum: int = 2,
    traces: dict[str, list[RecordedTrace]] | None = None,
    replayer: Replayer | None = None,
    replay_k: int = 3,
    min_controls: int = 0,
    seed: int = 0,
    pilot: pd.DataFrame | None = None,
    prior_sz: dict[str, float] | None = None,
    not_runnable: dict[str, str] | None = None,
    phone_filter: str = "",
) -> SelectionResult:
    """Classify, screen, allocate and draw the signal-task sample (METHODS §2).

    ``not_runnable`` (task → why) names the tasks the phones may not run: not allowed on a real
    account, or not certified. They are classified (the strata table shows them) but left out of the
    population and the draw: a selected task that the phone run skips measures nothing.

    ``min_controls`` raises the both-fail sample (the stable-failure controls) to at least that
    many tasks where the stratum has them: n controls without a false accept bound FPR ≤ 3/n.

    Neyman allocation needs S_{z,h}, the spread of z = g_d − R·g_s within each stratum — what only
    device runs show. It comes from ``prior_sz`` (the user's guess per stratum) or a ``pilot``
    (a retention table of a small first phone batch: task, model, env clone/real, success). Without
    either the allocation is proportional, and the result says why.
    """
    if method not in ("neyman", "proportional"):
        raise ConfigError(f"unknown allocation {method!r}", hint="neyman or proportional")
    if budget_hours <= 0:
        raise ConfigError("--budget-hours must be positive")
    rng = np.random.default_rng(seed)
    notes = [
        "estimate clone gains from fresh confirmation runs, not the runs used here to classify (winner's curse)"
    ]
    cls = classify_tasks(df, base, trained, alpha)
    screen = None
    excluded = {str(t): why for t, why in (not_runnable or {}).items() if str(t) in cls.index}
    cls = cls.assign(not_runnable=cls.index.isin(list(excluded)))
    if excluded:
        notes.append(
            f"{len(excluded)} of {len(cls)} classified task(s) left out because the phones may not run them: "
            + ", ".join(f"{n} {kind}" for kind, n in _count_kinds(excluded).items())
        )
    # Tasks the phones may not run are not screened: replaying them decides nothing.
    to_screen = {t: v for t, v in (traces or {}).items() if str(t) not in excluded}
    if replayer is not None and to_screen:
        screened = reproducibility_screen(to_screen, replayer, replay_k)
        dropped = {s.task for s in screened if not s.kept}
        kept_mask = ~cls.index.isin(list(dropped))
        in_screen = cls.index.isin(list(to_screen))
        screen = ScreenResult(
            True,
            replay_k,
            screened,
            len(dropped & set(cls.index)) / max(int(in_screen.sum()), 1),
            float(cls.loc[kept_mask & in_screen, "g_s"].mean()) if (kept_mask & in_screen).any() else None,
            float(cls.loc[~kept_mask, "g_s"].mean()) if (~kept_mask).any() else None,
        )
        cls = cls.assign(screened_out=~kept_mask)
    else:
        why = "no replayer given" if replayer is None else "no recorded traces (a table has none)"
        screen = ScreenResult(False, replay_k, [], 0.0, None, None, f"reproducibility screen not run: {why}")
        notes.append(screen.note)
        cls = cls.assign(screened_out=False)
    pool = cls[~cls["screened_out"] & ~cls["not_runnable"]]
    population = {s.value: int((pool["stratum"] == s.value).sum()) for s in Stratum}
    population = {k: v for k, v in population.items() if v > 0}
    if not population:
        raise AnalysisError(
            "no tasks left after the reproducibility screen and the phone filter",
            hint="fix the flaky clone tasks, or certify more tasks on the phones",
        )
    default_secs = (
        float(pool["duration_s"].mean())
        if "duration_s" in pool and pool["duration_s"].notna().any()
        else 90.0
    )
    cost_h: dict[str, float] = {}
    for h in population:
        members = pool[pool["stratum"] == h]
        secs = episode_seconds
        if secs is None:
            secs = (
                float(members["duration_s"].mean())
                if "duration_s" in members and members["duration_s"].notna().any()
                else default_secs
            )
        cost_h[h] = runs_per_model * 2 * secs / 3600.0
    s_h, spread_source = spread_of_z(pool, population, base, trained, pilot, prior_sz)
    if method == "neyman" and s_h is None:
        notes.append(
            "allocation is proportional: Neyman allocation needs the spread of z = g_d − R·g_s per stratum, "
            "which only device runs show (the clone-gain spread is zero by construction in both-pass and "
            "both-fail); pass a pilot phone batch (--pilot) or a prior (--prior-sz)"
        )
        method = "proportional"
    if s_h is not None and "floored" in spread_source:
        notes.append(f"warning: {spread_source.split('; spreads floored: ', 1)[1]}: pilot spreads floored")
    floors = {Stratum.BOTH_FAIL.value: min_controls} if min_controls else None
    prop = _budget_allocation(population, {}, cost_h, budget_hours, "proportional", min_per_stratum, floors)
    # Neyman never takes controls away: the stable-failure sample that bounds the judge's
    # false-accept rate keeps at least the proportional design's size.
    controls = prop.as_dict().get(Stratum.BOTH_FAIL.value, 0)
    ney_floors = dict(floors or {})
    if controls:
        ney_floors[Stratum.BOTH_FAIL.value] = max(ney_floors.get(Stratum.BOTH_FAIL.value, 0), controls)
    ney = (
        _budget_allocation(
            population, s_h, cost_h, budget_hours, "neyman", min_per_stratum, ney_floors or None
        )
        if s_h is not None
        else None
    )
    chosen = ney if method == "neyman" and ney is not None else prop
    selected: list[SelectedTask] = []
    for h, n_h in chosen.as_dict().items():
        members = pool[pool["stratum"] == h].index.to_numpy()
        picks = sorted(rng.choice(members, size=n_h, replace=False).tolist())
        role = {"gain": "signal", "both-fail": "control"}.get(h, "stratum-sample")
        selected += [SelectedTask(str(t), h, role, runs_per_model, float(pool.loc[t, "g_s"])) for t in picks]
    planned = sum(n * cost_h[h] for h, n in chosen.as_dict().items())
    n_controls = sum(1 for t in selected if t.role == "control")
    bound = min(1.0, 3.0 / n_controls) if n_controls else None
    if n_controls == 0:
        notes.append(
            "no both-fail tasks: no stable-failure controls, the judge's false-accept rate is unbounded"
        )
    power = _power(pool.loc[[t.task for t in selected]], runs_per_model)
    return SelectionResult(
        base=base,
        trained=trained,
        classification=cls,
        population=population,
        screen=screen,
        proportional=prop,
        neyman=ney,
        method=method,
        cost_hours=cost_h,
        budget_hours=budget_hours,
        planned_hours=planned,
        selected=selected,
        controls_false_accept_bound=bound,
        power=power,
        notes=notes,
        spread_source=spread_source,
        spread_z=s_h or {},
        excluded=excluded,
        phone_filter=phone_filter,
    )


def _count_kinds(excluded: dict[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for why in excluded.values():
        kind = why.split(":", 1)[0]
        out[kind] = out.get(kind, 0) + 1
    return out


# Pilot spreads of z resting on fewer tasks than this are floored at the pooled spread; others at
# SPREAD_FLOOR_SHARE of it (a spread of exactly 0 is a small pilot, not a stratum that cannot move).
MIN_PILOT_FOR_SPREAD = 5
SPREAD_FLOOR_SHARE = 0.5


def spread_of_z(
    pool: pd.DataFrame,
    population: dict[str, int],
    base: str,
    trained: str,
    pilot: pd.DataFrame | None,
    prior_sz: dict[str, float] | None,
) -> tuple[dict[str, float] | None, str]:
    """S_{z,h} per stratum and where it came from; None when nothing tells it (§2.3)."""
    if prior_sz:
        missing = [h for h in population if h not in prior_sz]
        if missing:
            raise ConfigError(f"--prior-sz lacks strata {missing}", hint="give every stratum a spread")
        return {h: float(prior_sz[h]) for h in population}, "prior given by the user"
    if pilot is None:
        return None, "none: no pilot and no prior"
    from analysis.retention import paired_rates

    rates = paired_rates(pilot.assign(stratum="all"), base, trained, "clone", "real").frame
    rates = rates[rates.index.astype(str).isin(pool.index)]
    if len(rates) < 2:
        raise AnalysisError(
            f"the pilot has {len(rates)} task(s) with both models on both sides among the candidates",
            hint="run a first phone batch of at least 2 tasks per stratum",
        )
    g_s, g_d = rates["g_s"].to_numpy(), rates["g_d"].to_numpy()
    r_hat = float(g_d.sum() / g_s.sum()) if g_s.sum() > 0 else 1.0
    z = pd.Series(g_d - r_hat * g_s, index=rates.index.astype(str))
    stratum = pool.loc[z.index, "stratum"]
    pooled = float(z.std(ddof=1))
    out: dict[str, float] = {}
    borrowed = []
    floored = []
    for h in population:
        zh = z[stratum == h]
        if len(zh) >= 2:
            s_h = float(zh.std(ddof=1))
            # A few pilot tasks that happen not to move (stable failures) give a spread of 0, and
            # Neyman would then starve the stratum: below MIN_PILOT_FOR_SPREAD tasks a spread is
            # not trusted under the pooled one, and never under a fraction of it.
            floor = pooled if len(zh) < MIN_PILOT_FOR_SPREAD else SPREAD_FLOOR_SHARE * pooled
            if s_h < floor:
                floored.append(f"{h} ({s_h:.3f} from {len(zh)} tasks → {floor:.3f})")
                s_h = floor
            out[h] = s_h
        else:
            out[h] = pooled
            borrowed.append(h)
    source = f"pilot of {len(rates)} tasks on phones (R̂ = {r_hat:.2f})"
    if borrowed:
        source += f"; strata {borrowed} have < 2 pilot tasks and use the pooled spread"
    if floored:
        source += "; spreads floored: " + ", ".join(floored)
    return out, source


def _power(sel: pd.DataFrame, m: int) -> PowerEstimate:
    """Power of the device test of gain > 0 if the clone rates carried over to the device (§2.6)."""
    p_b = sel["p_b"].to_numpy(float)
    p_r = sel["p_r"].to_numpy(float)
    p10 = float(np.mean(p_r * (1 - p_b)))
    p01 = float(np.mean(p_b * (1 - p_r)))
    n = len(sel)
    note = "assumes full retention: the clone success rates carry over to the device"
    if p10 <= p01:
        return PowerEstimate(
            n, p10, p01, 0.0, None, None, m, note + "; no expected gain among selected tasks"
        )
    power = mcnemar_power(n, p10, p01)
    size = mcnemar_sample_size(p10, p01)
    delta = float(np.mean(p_r - p_b))
    s2w = float(np.mean(p_r * (1 - p_r) + p_b * (1 - p_b)))
    s2t = max(float(np.var(p_r - p_b, ddof=1)) if n > 1 else 0.0, 0.0)
    n_m = repeated_runs_sample_size(delta, s2t, s2w, m) if delta != 0 else None
    return PowerEstimate(n, p10, p01, power, size.n_exact, n_m, m, note)


def write_task_list(result: SelectionResult, path: Path) -> None:
    """Write the signal-task list as JSON (or YAML for .yaml/.yml)."""
    import json

    data = result.task_list()
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix in (".yaml", ".yml"):
        import yaml

        path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    else:
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")


def false_accept_bound(n_controls: int) -> float:
    """Rule of three: no false accept among n stable-failure controls ⇒ FPR ≤ 3/n at 95 %."""
    return math.inf if n_controls <= 0 else min(1.0, 3.0 / n_controls)
