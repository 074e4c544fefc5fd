"""Retention, audit and selection on tidy tables and run stores, through the library and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from analysis.audit import audit_table
from analysis.fakes import FakeDeterministicReplayer, FakeFlakyReplayer
from analysis.retention import Estimand, retention_from_table
from analysis.selection import RecordedTrace, classify_tasks, select_tasks
from analysis.tables import (
    StoreSet,
    audit_table_from_stores,
    load_task_list,
    retention_table_from_stores,
    selection_table_from_stores,
)
from realbench.cli import app
from realbench.errors import AnalysisError, ConfigError
from tests.analysis_fixtures import BASE, TRAINED, audit_frame, retention_frame, selection_frame, write_store

runner = CliRunner()


def cli_json(args: list[str]) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- retention


def test_retention_is_ratio_of_mean_gains():
    df = retention_frame(40, runs=3, seed=1)
    res = retention_from_table(df, base=BASE, trained=TRAINED, n_resamples=2000)
    # R_sample: every sampled task, unweighted (the headline here is R_signal: the table has a gain stratum)
    sample = res.estimands[Estimand.SAMPLE]
    assert res.headline is Estimand.SIGNAL
    rates = df.groupby(["task", "env", "model"])["success"].mean().unstack(["env", "model"])
    g_s = rates[("clone", TRAINED)] - rates[("clone", BASE)]
    g_d = rates[("real", TRAINED)] - rates[("real", BASE)]
    assert sample.ratio.estimate == pytest.approx(g_d.mean() / g_s.mean())
    assert sample.gain_clone.mean == pytest.approx(g_s.mean())
    assert sample.transfer_gap.mean == pytest.approx(g_s.mean() - g_d.mean())
    assert res.slope.estimate == pytest.approx((g_d * g_s).sum() / (g_s**2).sum())
    lo, hi = sample.ratio.fieller_ci
    assert lo < sample.ratio.estimate < hi
    assert sample.ratio.bca_ci[0] < sample.ratio.estimate < sample.ratio.bca_ci[1]
    assert {t.method for t in sample.tests} == {"sign-flip"}


def test_retention_one_run_uses_mcnemar_and_drops_unpaired():
    df = retention_frame(30, runs=1, seed=2)
    df = df[~((df["task"] == "task000") & (df["env"] == "real"))]
    res = retention_from_table(df, base=BASE, trained=TRAINED, n_resamples=0)
    assert res.dropped_tasks == ["task000"] and res.n_tasks == 29
    sample = res.estimands[Estimand.SAMPLE]
    assert {t.method for t in sample.tests} == {"mcnemar-exact"}
    real = next(t for t in sample.tests if t.env == "real")
    pt = res.per_task
    assert real.discordant_b == int(((pt["p_d_r"] == 1) & (pt["p_d_b"] == 0)).sum())


def test_retention_not_estimable_when_clone_gain_is_noise():
    rng = np.random.default_rng(0)
    rows = [
        (f"t{t}", "all", m, e, r, bool(rng.random() < 0.5))
        for t in range(12)
        for m in (BASE, TRAINED)
        for e in ("clone", "real")
        for r in range(2)
    ]
    df = pd.DataFrame(rows, columns=["task", "stratum", "model", "env", "run", "success"])
    res = retention_from_table(df, base=BASE, trained=TRAINED, n_resamples=500)
    assert res.retention.fieller_ci is None and not res.retention.estimable
    out = res.to_dict()
    assert out["fieller_ci"] is None and out["estimable"] is False


def test_retention_pop_weights_and_errors():
    df = retention_frame(40, seed=3)
    sizes = df.groupby("stratum")["task"].nunique().to_dict()
    pop = {k: 10 * v for k, v in sizes.items()}
    res = retention_from_table(df, base=BASE, trained=TRAINED, population=pop, n_resamples=0)
    pt = res.per_task
    w = {k: v / sum(pop.values()) for k, v in pop.items()}
    gd = sum(w[h] * pt.loc[pt["stratum"] == h, "g_d"].mean() for h in w)
    gs = sum(w[h] * pt.loc[pt["stratum"] == h, "g_s"].mean() for h in w)
    assert res.retention_pop.estimate == pytest.approx(gd / gs)
    with pytest.raises(AnalysisError, match="missing"):
        retention_from_table(df, base=BASE, trained=TRAINED, population={"gain": 10}, n_resamples=0)
    # A populated stratum that was never sampled leaves R_pop unidentified: said, not fatal.
    unidentified = retention_from_table(
        df, base=BASE, trained=TRAINED, population={**pop, "unsampled": 5}, n_resamples=0
    )
    assert unidentified.retention_pop is None
    assert any("none sampled" in n for n in unidentified.notes)
    assert unidentified.to_dict()["notes"] == unidentified.notes


def test_retention_cli_json(tmp_path: Path):
    path = tmp_path / "t.csv"
    retention_frame(30, seed=4).to_csv(path, index=False)
    out = cli_json(
        [
            "retention",
            "--table",
            str(path),
            "--base",
            BASE,
            "--trained",
            TRAINED,
            "--resamples",
            "1000",
            "--population",
            "gain=40,mixed=60",
        ]
    )
    for key in ("retention", "fieller_ci", "delta_ci", "bca_ci", "gain_clone", "gain_real", "retention_pop"):
        assert key in out
    assert out["retention_pop"] is not None and len(out["bca_ci"]) == 2
    bad = runner.invoke(
        app, ["retention", "--table", str(path), "--base", BASE, "--trained", TRAINED, "--population", "gain"]
    )
    assert isinstance(bad.exception, ConfigError)
    text = runner.invoke(
        app, ["retention", "--table", str(path), "--base", BASE, "--trained", TRAINED, "--resamples", "200"]
    )
    assert text.exit_code == 0 and "Fieller" in text.stdout and "R_pop" not in text.stdout


# ---------------------------------------------------------------- audit


def test_audit_confusion_and_rates_by_hand():
    df = pd.DataFrame(
        {
            "task": [f"t{i}" for i in range(10)],
            "model": ["m"] * 10,
            "judge": ["j"] * 10,
            "truth": [1, 1, 1, 1, 0, 0, 0, 0, 0, 0],
            "verdict": [1, 1, 1, 0, 1, 0, 0, 0, 0, 0],
            "steps": list(range(1, 11)),
        }
    )
    res = audit_table(df)
    (j,) = res.judges
    c = j.metrics.confusion
    assert (c.tp, c.fn, c.fp, c.tn) == (3, 1, 1, 5)
    assert j.metrics.se.value == pytest.approx(0.75) and j.metrics.sp.value == pytest.approx(5 / 6)
    assert j.metrics.ppv.value == pytest.approx(0.75)
    assert j.design_effect == 1.0  # one run per task
    assert {e.by for e in j.errors} == {"model", "length", "app"}
    assert len([e for e in j.errors if e.by == "length"]) == 3


def test_audit_two_judges_kappa_and_correction():
    df = audit_frame(seed=1)
    # Unlabelled device episodes: truth missing, the judges' verdicts still count towards q̂.
    extra = df[df["task"] < "t10"].copy()
    extra["truth"] = None
    extra["episode"] = extra["episode"] + "-unlabelled"
    res = audit_table(pd.concat([df, extra]))
    names = [j.judge for j in res.judges]
    assert names == ["lenient", "strict"]
    lenient, strict = res.judges
    assert lenient.metrics.fpr.value > strict.metrics.fpr.value
    assert strict.metrics.fnr.value > lenient.metrics.fnr.value
    (agree,) = res.agreements
    assert agree.n == len(df) // 2 + len(extra) // 2
    assert agree.kappa_ci[0] < agree.kappa < agree.kappa_ci[1]
    for cr in strict.corrected:
        assert cr.method == "rogan-gladen" and cr.corrected_rate is not None
        # The strict judge under-calls success; the correction moves the rate up towards the truth.
        assert cr.corrected_rate > cr.judged_rate
        assert (
            abs(cr.corrected_rate - cr.true_rate_labelled)
            < abs(cr.judged_rate - cr.true_rate_labelled) + 0.02
        )


def test_audit_abstentions_and_double_sampling(tmp_path: Path):
    df = audit_frame(20, seed=2)
    df["verdict"] = df["verdict"].astype(object)
    df.loc[df.index[:5], "verdict"] = None
    # A fully labelled side needs no correction (its truth rate is the rate): leave a third unlabelled.
    df["truth"] = df["truth"].astype(object)
    df.loc[df.index[5::3], "truth"] = None
    res = audit_table(df, sampled_by_verdict=True)
    assert sum(j.n_abstained for j in res.judges) == 5
    assert all(c.method == "double-sampling" for j in res.judges for c in j.corrected)
    full = audit_table(audit_frame(20, seed=2), sampled_by_verdict=True)
    assert all(c.method == "observed truth" for j in full.judges for c in j.corrected)
    path = tmp_path / "a.csv"
    audit_frame(20).to_csv(path, index=False)
    out = cli_json(["audit", "--table", str(path)])
    assert set(out["judges"]) == {"lenient", "strict"}
    assert (
        out["judges"]["strict"]["metrics"]["se"]["ci"][0] < out["judges"]["strict"]["metrics"]["se"]["value"]
    )
    missing = runner.invoke(app, ["audit", "--table", str(path.with_name("nope.csv"))])
    assert isinstance(missing.exception, ConfigError)


def test_audit_table_needs_columns():
    with pytest.raises(AnalysisError, match="lacks columns"):
        audit_table(pd.DataFrame({"task": ["a"], "judge": ["j"]}))


# ---------------------------------------------------------------- selection


def test_classification_strata():
    cls = classify_tasks(selection_frame(), BASE, TRAINED)
    by_task = cls["stratum"].to_dict()
    assert all(by_task[f"t{i:02d}"] == "both-pass" for i in range(16, 26))
    assert all(by_task[f"t{i:02d}"] == "both-fail" for i in range(26, 41))
    assert sum(by_task[f"t{i:02d}"] == "gain" for i in range(12)) >= 9
    assert all(by_task[f"t{i:02d}"] in ("loss", "mixed") for i in range(12, 16))
    assert set(cls["stratum"]) <= {"gain", "loss", "both-pass", "both-fail", "mixed"}


def test_selection_fits_budget_and_writes_task_list(tmp_path: Path):
    df = selection_frame()
    res = select_tasks(df, base=BASE, trained=TRAINED, budget_hours=3.0, runs_per_model=3, min_controls=8)
    assert res.planned_hours <= 3.0
    # No pilot and no prior: Neyman cannot know the spread of z, so the allocation is proportional.
    assert res.method == "proportional" and res.neyman is None
    assert any("allocation is proportional" in n for n in res.notes)
    alloc = res.allocation.as_dict()
    assert all(n >= 2 for n in alloc.values())
    assert alloc["both-fail"] >= 8 and res.controls_false_accept_bound == pytest.approx(
        3 / alloc["both-fail"]
    )
    assert sum(alloc.values()) == len(res.selected)
    assert {t.role for t in res.selected} == {"signal", "control", "stratum-sample"}
    assert not res.screen.ran and "not run" in res.screen.note
    bigger = select_tasks(df, base=BASE, trained=TRAINED, budget_hours=6.0)
    assert len(bigger.selected) > len(res.selected)
    with pytest.raises(AnalysisError, match="budget"):
        select_tasks(df, base=BASE, trained=TRAINED, budget_hours=0.1)
    out = tmp_path / "tasks.yaml"
    path = tmp_path / "clone.csv"
    df.to_csv(path, index=False)
    payload = cli_json(
        [
            "select",
            "--clone",
            str(path),
            "--base",
            BASE,
            "--trained",
            TRAINED,
            "--budget-hours",
            "3",
            "--out",
            str(out),
        ]
    )
    listing = load_task_list(out)
    assert [t["task"] for t in listing["tasks"]] == [t["task"] for t in payload["selected"]]
    assert listing["population"] == payload["population"]


def test_reproducibility_screen_with_fakes():
    df = selection_frame()
    cls = classify_tasks(df, BASE, TRAINED)
    traces = {
        t: [RecordedTrace(t, f"{t}-ep", BASE, [{"type": "click", "x": 1, "y": 2}], None)] for t in cls.index
    }
    steady = FakeDeterministicReplayer()
    res = select_tasks(
        df, base=BASE, trained=TRAINED, budget_hours=5, traces=traces, replayer=steady, replay_k=3
    )
    assert res.screen.ran and res.screen.excluded == []
    assert len(steady.calls) == 3 * len(cls)
    flaky = FakeFlakyReplayer({}, flaky={"t00", "t30"}, flip_p=0.5, seed=3)
    res = select_tasks(
        df, base=BASE, trained=TRAINED, budget_hours=5, traces=traces, replayer=flaky, replay_k=6
    )
    assert res.screen.excluded == ["t00", "t30"]
    reasons = {s.task: s.reason for s in res.screen.tasks}
    assert "flips" in reasons["t00"]
    assert res.screen.fraction_excluded == pytest.approx(2 / len(cls))
    assert "t00" not in {t.task for t in res.selected}
    # A replay that disagrees with the recorded verdict is flaky too.
    traces["t01"] = [RecordedTrace("t01", "t01-ep", BASE, [{"type": "click", "x": 1, "y": 2}], False)]
    res = select_tasks(df, base=BASE, trained=TRAINED, budget_hours=5, traces=traces, replayer=steady)
    assert res.screen.excluded == ["t01"] and "recorded failure" in res.screen.tasks[1].reason


# ---------------------------------------------------------------- run stores


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("stores")
    clone = write_store(root / "clone", env="clone", n_tasks=5, repeats=3, seed=1)
    real = write_store(root / "real", env="real", n_tasks=5, repeats=3, seed=2, label=True, abort_every=7)
    return clone, real


def test_tables_from_stores(stores: tuple[Path, Path]):
    clone, real = stores
    with StoreSet([clone, real]) as ss:
        ret = retention_table_from_stores(ss)
        episodes = ss.episodes()
        aborted = int((~episodes["scored"]).sum())
        assert aborted > 0
        assert len(ret) == int(episodes["scored"].sum())  # env_invalid never counted
        assert set(ret["env"]) == {"clone", "real"}
        # Clone success is the verifier; real success is the judge (nothing programmatic decided).
        assert ret.loc[ret["env"] == "real", "judged"].notna().all()
        audit = audit_table_from_stores(ss)
        assert set(audit["truth_source"]) == {"verifier", "human"}
        assert set(audit.loc[audit["env"] == "real", "truth_source"]) == {"human"}
        sel = selection_table_from_stores(ss)
        assert {"duration_s", "key"} <= set(sel.columns)


def test_cli_on_stores(stores: tuple[Path, Path], tmp_path: Path):
    clone, real = stores
    out = cli_json(
        [
            "retention",
            "--clone",
            str(clone),
            "--real",
            str(real),
            "--base",
            BASE,
            "--trained",
            TRAINED,
            "--resamples",
            "500",
        ]
    )
    assert out["n_tasks"] == 5 and out["retention_jj"] is not None
    audit = cli_json(["audit", str(clone), str(real)])
    assert "vlm-judge" in audit["judges"]
    bad = runner.invoke(app, ["audit", str(tmp_path)])
    assert isinstance(bad.exception, ConfigError)


def test_select_from_stores_with_replayer(stores: tuple[Path, Path], tmp_path: Path):
    clone, _ = stores
    out = cli_json(
        [
            "select",
            "--clone",
            str(clone),
            "--base",
            BASE,
            "--trained",
            TRAINED,
            "--budget-hours",
            "5",
            "--replayer",
            "tests.analysis_fixtures:fake_replayer_factory",
            "--replay-k",
            "6",
            "--out",
            str(tmp_path / "tasks.json"),
        ]
    )
    screen = out["screen"]
    assert screen["ran"] and screen["excluded"] == ["task1"]
    assert "flips" in next(t["reason"] for t in screen["tasks"] if t["task"] == "task1")
    assert "task1" not in {t["task"] for t in out["selected"]}
    listing = load_task_list(tmp_path / "tasks.json")
    res = cli_json(
        [
            "retention",
            "--clone",
            str(clone),
            "--real",
            str(stores[1]),
            "--base",
            BASE,
            "--trained",
            TRAINED,
            "--tasks",
            str(tmp_path / "tasks.json"),
            "--resamples",
            "200",
        ]
    )
    assert res["n_tasks"] == len(listing["tasks"])
