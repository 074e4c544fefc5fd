"""Tidy tables for the analysis commands, from run stores or from CSV/Parquet files.

Every command accepts either one or more run stores (folders with index.sqlite) or a tidy table.
The table formats (docs/analysis.md):

- retention: ``task, stratum, model, env, run, success`` (+ optional ``judged``)
- select:    ``task, model, run, success`` (+ optional ``env``, ``duration_s``, ``app``)
- audit:     ``task, model, judge, truth, verdict, steps`` (+ optional ``app``, ``episode``)

From a store, only scored episodes count (``env_invalid`` aborts are reruns, never failures). An
episode's success is its programmatic verdict (clone verifier) when it has one, else the real-side
checks, else the chosen judge. ``clone-on-phone`` stays an env value of its own.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.selection import RecordedTrace
from realbench.errors import AnalysisError, ConfigError, StoreError
from realbench.store import is_run_store

log = logging.getLogger(__name__)

TABLE_SUFFIXES = (".csv", ".parquet", ".pq", ".tsv")


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a tidy CSV/TSV/Parquet table."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"no such table {p}", hint="pass a .csv or .parquet file, or a run store folder")
    if p.suffix == ".csv":
        return pd.read_csv(p)
    if p.suffix == ".tsv":
        return pd.read_csv(p, sep="\t")
    if p.suffix in (".parquet", ".pq"):
        return pd.read_parquet(p)
    raise ConfigError(
        f"unknown table format {p.suffix!r} ({p})", hint=f"use one of {', '.join(TABLE_SUFFIXES)}"
    )


class StoreSet:
    """One or more run stores read together (episode ids are made unique by the store path)."""

    def __init__(self, paths: Sequence[str | Path]) -> None:
        from realbench.store import RunStore

        if not paths:
            raise ConfigError("no run store given", hint="pass the --out folder of `realbench run`")
        self.stores: list[Any] = []
        for p in paths:
            path = Path(p)
            if not is_run_store(path):
                raise StoreError(
                    f"{path} is not a run store (no index.sqlite)", hint="pass a `realbench run` --out folder"
                )
            self.stores.append(RunStore(path, create=False))
        self._by_key: dict[str, Any] = {}

    def close(self) -> None:
        for s in self.stores:
            s.close()

    def __enter__(self) -> StoreSet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def episodes(self) -> pd.DataFrame:
        frames = []
        for i, s in enumerate(self.stores):
            f = s.episodes_frame()
            if f.empty:
                continue
            f = f.copy()
            f["key"] = f"{i}:" + f["episode_id"].astype(str)
            for k in f["key"]:
                self._by_key[k] = s
            frames.append(f)
        if not frames:
            return pd.DataFrame(columns=["key", "episode_id", "task", "model", "env", "success", "scored"])
        return pd.concat(frames, ignore_index=True)

    def verdicts(self) -> pd.DataFrame:
        frames = []
        for i, s in enumerate(self.stores):
            f = s.verdicts_frame()
            if f.empty:
                continue
            f = f.copy()
            f["key"] = f"{i}:" + f["episode_id"].astype(str)
            frames.append(f)
        if not frames:
            return pd.DataFrame(
                columns=["key", "episode_id", "source", "name", "success", "abstained", "reason"]
            )
        return pd.concat(frames, ignore_index=True)

    def store_of(self, key: str) -> Any:
        if not self._by_key:
            self.episodes()
        return self._by_key[key]

    def steps(self, key: str) -> list[dict[str, Any]]:
        episode_id = key.split(":", 1)[1]
        return list(self.store_of(key).steps(episode_id))

    def episode_dir(self, key: str) -> Path:
        episode_id = key.split(":", 1)[1]
        return Path(self.store_of(key).episode_dir(episode_id))


def _latest(verdicts: pd.DataFrame, source: str, name: str | None = None) -> pd.DataFrame:
    v = verdicts[verdicts["source"] == source]
    if name is not None:
        v = v[v["name"] == name]
    return v.drop_duplicates(subset=["key", "name"], keep="last")


def judge_names(verdicts: pd.DataFrame) -> list[str]:
    return sorted(verdicts.loc[verdicts["source"] == "judge", "name"].dropna().astype(str).unique())


@dataclass(frozen=True)
class JudgeChoice:
    """The judge whose verdicts stand in for ground truth, and why that one."""

    name: str | None
    reason: str


def choose_judge(verdicts: pd.DataFrame, judge: str | None) -> JudgeChoice:
    """A judge that gave at least one verdict (not only abstentions): the one asked for, else the
    one with the most verdicts (ties: by name)."""
    names = judge_names(verdicts)
    latest = _latest(verdicts, "judge")
    decided = latest[~latest["abstained"].astype(bool)].groupby("name").size().to_dict()
    usable = sorted((n for n in names if decided.get(n, 0)), key=lambda n: (-decided[n], n))
    silent = [n for n in names if n not in usable]
    if judge is not None:
        if judge not in names:
            raise ConfigError(
                f"no verdicts of judge {judge!r}", hint=f"judges in these stores: {names or '(none)'}"
            )
        if judge not in usable:
            raise ConfigError(
                f"judge {judge!r} only abstained (or only failed at its endpoint): it has no verdict to use",
                hint=f"judges with verdicts: {usable or '(none)'}; rerun `realbench judge` after fixing it",
            )
        return JudgeChoice(judge, f"judge {judge} ({decided[judge]} verdicts), as asked with --judge")
    if not usable:
        return JudgeChoice(
            None,
            f"no judge has a verdict ({', '.join(silent)} only abstained)" if silent else "no judge verdicts",
        )
    reason = f"judge {usable[0]}: {decided[usable[0]]} verdicts"
    if len(usable) > 1:
        others = ", ".join(f"{n} ({decided[n]})" for n in usable[1:])
        reason += f", the most of the judges (also: {others}); choose another with --judge"
    if silent:
        reason += f"; {', '.join(silent)} left out: only abstentions"
    return JudgeChoice(usable[0], reason)


def pick_judge(verdicts: pd.DataFrame, judge: str | None) -> str | None:
    choice = choose_judge(verdicts, judge)
    if len(judge_names(verdicts)) > 1 or (choice.name is None and judge_names(verdicts)):
        # several judges (or a silent one): say which one scores the device side, and why
        log.warning("using %s", choice.reason)
    return choice.name


def resolve_outcomes(episodes: pd.DataFrame, verdicts: pd.DataFrame, judge: str | None) -> pd.DataFrame:
    """Scored episodes with ``success`` (verifier → checks → judge) and ``judged`` (the judge's
    verdict, abstentions missing) columns."""
    ep = episodes[episodes["scored"].astype(bool)].copy()
    checks = _latest(verdicts, "checks").groupby("key")["success"].all()
    ep["success"] = ep["success"].astype(object)
    missing = ep["success"].isna()
    ep.loc[missing, "success"] = ep.loc[missing, "key"].map(checks)
    # Where the outcome came from: ground truth (verifier, checks) or the judge standing in.
    ep["success_source"] = np.where(ep["success"].isna(), "judge", "truth")
    ep["judged"] = pd.Series([None] * len(ep), index=ep.index, dtype=object)
    if judge is not None:
        j = _latest(verdicts, "judge", judge)
        j = j[~j["abstained"].astype(bool)].set_index("key")["success"]
        ep["judged"] = ep["key"].map(j).astype(object)
        missing = ep["success"].isna()
        ep.loc[missing, "success"] = ep.loc[missing, "judged"]
    return ep


def retention_table_from_stores(
    stores: StoreSet, *, strata: dict[str, str] | None = None, judge: str | None = None
) -> pd.DataFrame:
    """task, stratum, model, env, run, success, judged from scored episodes of the stores."""
    episodes = stores.episodes()
    verdicts = stores.verdicts()
    ep = resolve_outcomes(episodes, verdicts, pick_judge(verdicts, judge) if not verdicts.empty else None)
    ep = ep[ep["success"].notna()]
    if ep.empty:
        raise AnalysisError(
            "no scored, decided episodes in these stores", hint="judge real-app episodes first"
        )
    out = pd.DataFrame(
        {
            "task": ep["task"].astype(str),
            "stratum": ep["task"].map(strata or {}).fillna("all") if strata else "all",
            "model": ep["model"].astype(str),
            "env": ep["env"].astype(str),
            "success": ep["success"].astype(bool),
            "judged": ep["judged"],
            "success_source": ep["success_source"],
            "app": ep["app"].astype(str) if "app" in ep else "(unknown)",
        }
    )
    out["run"] = out.groupby(["task", "model", "env"]).cumcount()
    return out.reset_index(drop=True)


def selection_table_from_stores(stores: StoreSet) -> pd.DataFrame:
    ep = resolve_outcomes(stores.episodes(), stores.verdicts(), None)
    ep = ep[ep["success"].notna()]
    out = ep[["task", "model", "env", "success", "duration_s", "app", "key"]].copy()
    out["success"] = out["success"].astype(bool)
    out["run"] = out.groupby(["task", "model", "env"]).cumcount()
    return out.reset_index(drop=True)


def _seed_of(episode_id: str) -> int:
    """Episode ids read ``run/task/s<seed>/r<repeat>/a<attempt>``."""
    m = re.search(r"/s(\d+)/r\d+/a\d+$", episode_id)
    return int(m.group(1)) if m else 0


def traces_from_stores(
    stores: StoreSet, table: pd.DataFrame, per_model: int = 1
) -> dict[str, list[RecordedTrace]]:
    """Recorded clone action traces per task (the first ``per_model`` episodes of each model)."""
    out: dict[str, list[RecordedTrace]] = {}
    clone = table[table["env"] == "clone"] if "env" in table else table
    for (task, model), g in clone.groupby(["task", "model"], sort=True):
        for row in g.head(per_model).itertuples():
            steps = stores.steps(str(row.key))
            actions = [s["action"] for s in steps if s.get("action")]
            out.setdefault(str(task), []).append(
                RecordedTrace(
                    str(task),
                    str(row.key),
                    str(model),
                    actions,
                    bool(row.success),
                    seed=_seed_of(str(row.key)),
                )
            )
    return out


VIRTUAL_PHONE_TRUTH = "virtual-phone-truth"  # the verifier name devices.phone_target records


def audit_table_from_stores(stores: StoreSet) -> pd.DataFrame:
    """One row per (judged episode, judge) with ground truth: a human label (majority of labellers),
    else the clone verifier on clone episodes, else a virtual phone's own verifier
    (`virtual-phone-truth`), else real-side checks; missing when none exists. `truth_source` says which."""
    episodes = stores.episodes()
    verdicts = stores.verdicts()
    if verdicts.empty:
        raise AnalysisError("no verdicts in these stores", hint="run `realbench judge` on the episodes first")
    ep = episodes[episodes["scored"].astype(bool)].set_index("key")
    human_rows = _latest(verdicts, "human")
    # An "unsure" label (abstained) is no ground truth either way.
    human = human_rows[~human_rows["abstained"].astype(bool)].groupby("key")["success"].mean()
    verifier = _latest(verdicts, "verifier").groupby("key")["success"].all()
    # A virtual phone's apps are clones: their verifier is ground truth on the device side too
    # (a test rig's truth, labelled so; a real phone has none).
    vphone = _latest(verdicts, "verifier", VIRTUAL_PHONE_TRUTH).groupby("key")["success"].all()
    checks = _latest(verdicts, "checks").groupby("key")["success"].all()
    judged = _latest(verdicts, "judge")
    judged = judged[judged["key"].isin(ep.index)]
    if judged.empty:
        raise AnalysisError(
            "no judge verdicts on scored episodes", hint="run the judge on some episodes first"
        )
    rows = []
    for v in judged.itertuples():
        e = ep.loc[v.key]
        truth: Any = None
        source = ""
        if v.key in human.index and human[v.key] != 0.5:
            truth, source = bool(human[v.key] > 0.5), "human"
        elif v.key in verifier.index and str(e["env"]).startswith("clone"):
            truth, source = bool(verifier[v.key]), "verifier"
        elif str(e["env"]).startswith("clone") and e["success"] is not None and e["success"] == e["success"]:
            truth, source = bool(e["success"]), "verifier"
        elif v.key in vphone.index:
            truth, source = bool(vphone[v.key]), VIRTUAL_PHONE_TRUTH
        elif v.key in checks.index:
            truth, source = bool(checks[v.key]), "checks"
        rows.append(
            {
                "task": str(e["task"]),
                "model": str(e["model"]),
                "judge": str(v.name),
                "truth": truth,
                "verdict": None if bool(v.abstained) else bool(v.success),
                "steps": int(e["steps"]) if e["steps"] == e["steps"] else np.nan,
                "app": str(e["app"]),
                "env": str(e["env"]),
                "episode": str(v.key),
                "truth_source": source,
            }
        )
    return pd.DataFrame(rows)


def load_task_list(path: str | Path) -> dict[str, Any]:
    """Read a signal-task list written by `realbench select` (JSON or YAML)."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"no such task list {p}", hint="write one with `realbench select --out`")
    text = p.read_text(encoding="utf-8")
    if p.suffix in (".yaml", ".yml"):
        from realbench.safe_yaml import load_yaml_text

        data = load_yaml_text(text)
    else:
        data = json.loads(text)
    if not isinstance(data, dict) or data.get("kind") != "realbench-signal-tasks":
        raise ConfigError(
            f"{p} is not a realbench signal-task list", hint="write one with `realbench select --out`"
        )
    return data
