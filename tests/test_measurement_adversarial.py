"""Tables that break naive measurement code, run through `realbench retention` / `realbench audit`
as a user would (tables in tests/adversarial_tables.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from analysis.retention import retention_from_table
from analysis.stats import rogan_gladen, rogan_gladen_variance
from realbench.cli import app
from tests.adversarial_tables import (
    all_ties_table,
    clustered_audit_table,
    heavy_singleton_table,
    identical_tasks_table,
    negative_gain_table,
    noisy_clone_gain_table,
)
from tests.analysis_fixtures import BASE, TRAINED, judged_table, retention_frame

runner = CliRunner()


def run_cli(args: list[str]) -> tuple[dict, str]:
    """The JSON answer and the human-readable output of the same command."""
    as_json = runner.invoke(app, [*args, "--json"])
    assert as_json.exit_code == 0, (as_json.output, as_json.exception)
    text = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert text.exit_code == 0, (text.output, text.exception)
    return json.loads(as_json.stdout.strip().splitlines()[-1]), text.stdout


def retention_cli(tmp_path: Path, df: pd.DataFrame, *extra: str) -> tuple[dict, str]:
    path = tmp_path / "t.csv"
    df.to_csv(path, index=False)
    return run_cli(["retention", "--table", str(path), "--base", BASE, "--trained", TRAINED, *extra])


def in_fieller_set(theta: float, d: dict) -> bool:
    """Membership by the defining inequality (a − θb)² ≤ q²·Var(a − θb)."""
    a, b, q = d["numerator"], d["denominator"], d["q"]
    var = d["v_aa"] - 2 * theta * d["v_ab"] + theta**2 * d["v_bb"]
    return (a - theta * b) ** 2 <= q * q * var + 1e-12


# ---------------------------------------------------------------- not estimable


def test_not_estimable_has_no_point_estimate_and_the_exact_fieller_set(tmp_path: Path):
    out, text = retention_cli(tmp_path, noisy_clone_gain_table(), "--resamples", "2000")
    assert out["estimand"] == "sample"
    assert out["retention"] is None and out["estimable"] is False
    assert "not estimable" in out["reason"]
    d = out["retention_detail"]
    assert d["fieller_g"] >= 1
    # No BCa or percentile interval for R: they look precise and are not.
    assert out["bca_ci"] is None and out["percentile_ci"] is None and out["delta_ci"] is None
    # Both gains, each with its interval.
    for side in ("gain_clone", "gain_real"):
        assert len(out[side]["ci"]) == 2 and out[side]["mean"] is not None
    assert out["gain_clone"]["ci"][0] < 0 < out["gain_clone"]["ci"][1]
    # The exact Fieller set: two half-lines (or the whole line), written with ∞.
    pieces = out["fieller_set"]
    assert pieces and "∞" in out["fieller_set_text"]
    assert pieces[0][0] is None and pieces[-1][1] is None  # unbounded on both sides
    for theta in (-50.0, -1.0, 0.0, 0.5, 1.0, 2.0, 50.0):
        inside = any(
            (lo is None or theta >= lo - 1e-9) and (hi is None or theta <= hi + 1e-9) for lo, hi in pieces
        )
        assert inside == in_fieller_set(theta, d), theta
    assert "∞" in text and "not estimable" in text
    assert "—" not in text.split("retention")[-1]  # infinite bounds are ∞, never a dash


def test_estimable_table_still_reports_everything(tmp_path: Path):
    out, text = retention_cli(tmp_path, retention_frame(30, seed=4), "--resamples", "500")
    assert out["estimable"] is True and out["retention"] is not None and out["reason"] is None
    assert len(out["bca_ci"]) == 2 and out["fieller_set"] == [out["fieller_ci"]]
    assert "not estimable" not in text


# ---------------------------------------------------------------- estimands


def test_three_estimands_named_with_their_own_gains(tmp_path: Path):
    df = retention_frame(40, seed=5)
    sizes = df.groupby("stratum")["task"].nunique().to_dict()
    pop = ",".join(f"{k}={5 * v + 7}" for k, v in sizes.items())
    out, text = retention_cli(tmp_path, df, "--resamples", "500", "--population", pop)
    assert out["estimand"] == "population"
    est = out["estimands"]
    assert set(est) == {"signal", "sample", "population"}
    assert est["population"]["value"] == out["retention"] == out["retention_pop"]
    assert est["signal"]["n_tasks"] == sizes["gain"] and est["sample"]["n_tasks"] == 40
    res = retention_from_table(df, base=BASE, trained=TRAINED, n_resamples=0)
    pt = res.per_task
    assert est["signal"]["gain_clone"]["mean"] == pytest.approx(pt.loc[pt["stratum"] == "gain", "g_s"].mean())
    # R_pop's gains are HT-weighted, with their own intervals.
    popd = {k: 5 * v + 7 for k, v in sizes.items()}
    w = {k: v / sum(popd.values()) for k, v in popd.items()}
    g_d_pop = sum(w[h] * pt.loc[pt["stratum"] == h, "g_d"].mean() for h in w)
    assert est["population"]["gain_real"]["mean"] == pytest.approx(g_d_pop)
    assert est["population"]["gain_real"]["ci"][0] < g_d_pop < est["population"]["gain_real"]["ci"][1]
    # Paired tests under --population are weighted by W_h.
    pop_tests = est["population"]["tests"]
    assert all("W_h" in t["method"] for t in pop_tests)
    for name in ("R_signal", "R_sample", "R_pop"):
        assert name in text


def test_quantile_t_widens_fieller(tmp_path: Path):
    from scipy import stats as sps

    df = retention_frame(8, seed=6)
    z, _ = retention_cli(tmp_path, df, "--resamples", "0", "--quantile", "z")
    t, _ = retention_cli(tmp_path, df, "--resamples", "0", "--quantile", "t")
    auto, _ = retention_cli(tmp_path, df, "--resamples", "0")
    assert t["retention_detail"]["q"] > z["retention_detail"]["q"]
    # Below 30 tasks the default is t with n − H df: the headline R_signal's tasks, one stratum.
    dof = auto["estimands"]["signal"]["n_tasks"] - 1
    assert auto["retention_detail"]["q"] == pytest.approx(sps.t.ppf(0.975, dof))
    assert any("t with n − H df" in n for n in auto["notes"])
    if z["fieller_ci"] and t["fieller_ci"]:
        assert t["fieller_ci"][1] - t["fieller_ci"][0] > z["fieller_ci"][1] - z["fieller_ci"][0]


def test_resamples_zero_says_not_run(tmp_path: Path):
    out, text = retention_cli(tmp_path, retention_frame(30, seed=4), "--resamples", "0")
    assert out["estimable"] is True
    assert out["bca_ci"] is None and out["bootstrap"] == "not run"
    assert "not run" in text and "not estimable" not in text


# ---------------------------------------------------------------- small strata


def test_one_task_stratum_carrying_most_weight_is_collapsed_not_narrow(tmp_path: Path):
    df, pop = heavy_singleton_table()
    out, text = retention_cli(
        tmp_path, df, "--resamples", "1000", "--population", ",".join(f"{k}={v}" for k, v in pop.items())
    )
    popd = out["estimands"]["population"]
    assert popd["collapsed"] == {"both-fail": "gain"}
    assert any("collapsed" in w for w in out["warnings"])
    ci = popd["fieller_ci"]
    # Without the collapse the interval was about [2.8, 3.5]; one task cannot support that.
    assert ci is None or ci[1] - ci[0] > 1.0
    assert "collapsed" in text


# ---------------------------------------------------------------- warnings


def test_negative_gains_are_not_a_retention(tmp_path: Path):
    out, text = retention_cli(tmp_path, negative_gain_table(), "--resamples", "200")
    assert out["retention"] is None and out["estimable"] is False
    assert "ratio of losses" in out["reason"]
    assert any("negative" in w for w in out["warnings"])
    assert "ratio of losses" in text


def test_identical_tasks_warn_degenerate_variance(tmp_path: Path):
    out, text = retention_cli(tmp_path, identical_tasks_table(), "--resamples", "200")
    assert any("degenerate variance" in w for w in out["warnings"])
    assert out["retention_detail"]["degenerate"] is True
    assert "degenerate variance" in text
    # A bootstrap of identical tasks resamples to one value: not shown as an interval.
    assert out["bca_ci"] is None and out["percentile_ci"] is None


def test_all_ties_are_not_estimable(tmp_path: Path):
    out, _ = retention_cli(tmp_path, all_ties_table(), "--resamples", "200")
    assert out["retention"] is None and out["estimable"] is False
    assert any("degenerate variance" in w or "zero" in w for w in out["warnings"])


def test_fewer_tasks_than_the_power_analysis_asked_for(tmp_path: Path):
    df = retention_frame(12, seed=7)
    listing = {
        "kind": "realbench-signal-tasks",
        "version": 1,
        "base": BASE,
        "trained": TRAINED,
        "population": {"gain": 30, "mixed": 30},
        "power": {"tasks_needed_one_run": 40, "tasks_needed_m_runs": 25},
        "tasks": [{"task": t, "stratum": s} for t, s in df.groupby("task")["stratum"].first().items()],
    }
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps(listing))
    out, text = retention_cli(tmp_path, df, "--resamples", "0", "--tasks", str(tasks))
    assert any("power analysis" in w for w in out["warnings"])
    assert "power analysis" in text


def test_per_task_rates_says_what_it_dropped(tmp_path: Path):
    df = retention_frame(20, seed=8)
    gone = df["task"].isin(["task000", "task001"]) & (df["env"] == "real")
    res = retention_from_table(df[~gone], base=BASE, trained=TRAINED, n_resamples=0)
    assert res.dropped_tasks == ["task000", "task001"]
    assert {d["task"] for d in res.to_dict()["dropped"]} == {"task000", "task001"}
    assert all("real" in d["missing"][0] for d in res.to_dict()["dropped"])
    assert res.to_dict()["strata_after_drop"]


# ---------------------------------------------------------------- judge audit with clustering


def test_clustered_audit_intervals_are_as_wide_as_the_tasks_allow(tmp_path: Path):
    path = tmp_path / "a.csv"
    clustered_audit_table().to_csv(path, index=False)
    out, text = run_cli(["audit", "--table", str(path)])
    m = out["judges"]["j"]["metrics"]
    lo, hi = m["se"]["ci"]
    assert m["se"]["value"] == pytest.approx(0.5)
    assert (hi - lo) / 2 >= 0.18  # 10 positive tasks, not 100 episodes
    for name in ("se", "sp", "ppv", "npv", "fpr", "fnr"):
        assert m[name]["bootstrap_ci"] is not None, name
    b_lo, b_hi = m["se"]["bootstrap_ci"]
    assert (b_hi - b_lo) / 2 >= 0.15
    for c in out["judges"]["j"]["corrected"]:
        assert c["side"] == "real"
    assert "FPR" in text and "NPV" in text


def _bootstrap_corrected_se(df: pd.DataFrame, model: str, side: str, n_boot: int = 400) -> float:
    """SE of the Rogan–Gladen rate by resampling tasks (each task's runs together)."""
    rng = np.random.default_rng(5)
    tasks = df["task"].unique()
    by_task = {t: g for t, g in df.groupby("task")}
    values = []
    for _ in range(n_boot):
        pick = pd.concat([by_task[t] for t in rng.choice(tasks, tasks.size)])
        g = pick[(pick["model"] == model) & (pick["env"] == side)]
        lab = g.dropna(subset=["truth"])
        t = lab["truth"].astype(bool).to_numpy()
        v = lab["verdict"].astype(bool).to_numpy()
        se, sp = (v & t).sum() / t.sum(), (~v & ~t).sum() / (~t).sum()
        if se + sp <= 1:
            continue
        values.append(rogan_gladen(g["verdict"].astype(float).mean(), se, sp))
    return float(np.std(values, ddof=1))


def test_corrected_rates_are_per_model_and_side_with_clustered_se():
    from analysis.audit import audit_table
    from tests.adversarial_tables import clustered_two_sided_audit

    df = clustered_two_sided_audit()
    res = audit_table(df, seed=1)
    (j,) = res.judges
    keys = {(c.model, c.side) for c in j.corrected}
    assert keys == {(m, s) for m in (BASE, TRAINED) for s in ("clone", "real")}
    c = next(c for c in j.corrected if c.model == TRAINED and c.side == "real")
    boot = _bootstrap_corrected_se(df, TRAINED, "real")
    lab = df[(df["model"] == TRAINED) & (df["env"] == "real")].dropna(subset=["truth"])
    truth = lab["truth"].astype(bool)
    raw = (
        rogan_gladen_variance(c.judged_rate, c.se_used, c.sp_used, c.n_judged, truth.sum(), (~truth).sum())
        ** 0.5
    )
    # Raw episode counts understate the SE against the task bootstrap; effective sizes do not.
    assert raw < 0.9 * boot, (raw, boot)
    assert 0.9 * boot <= c.corrected_se <= 1.6 * boot, (c.corrected_se, boot)
    assert c.design_effect > 1.5


def test_kappa_flagged_when_a_rater_is_constant():
    from analysis.audit import audit_table

    df = clustered_audit_table()
    always = df.assign(judge="always-yes", verdict=True)
    res = audit_table(pd.concat([df, always]), seed=0)
    (agree,) = res.agreements
    assert "one verdict throughout" in agree.flag
    assert any("one verdict throughout" in w for w in res.warnings)


def test_statsmodels_cross_check():
    from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
    from statsmodels.stats.inter_rater import cohens_kappa as sm_kappa
    from statsmodels.stats.multitest import multipletests
    from statsmodels.stats.proportion import proportion_confint

    from analysis.stats import Z95, cohen_kappa, holm, mcnemar, wilson

    for k, n in ((0, 10), (3, 10), (8, 10), (17, 40), (40, 40), (1, 250)):
        lo, hi = wilson(k, n, z=Z95)
        s_lo, s_hi = proportion_confint(k, n, alpha=0.05, method="wilson")
        assert lo == pytest.approx(s_lo, abs=1e-9) and hi == pytest.approx(s_hi, abs=1e-9)
    for b, c in ((0, 0), (3, 9), (10, 2), (25, 25), (0, 7)):
        expected = sm_mcnemar([[5, b], [c, 5]], exact=True).pvalue
        assert mcnemar(b, c) == pytest.approx(expected, abs=1e-12)
    for table in ([[20, 5], [10, 15]], [[40, 1], [3, 2]], [[7, 7], [7, 7]]):
        assert cohen_kappa(table) == pytest.approx(sm_kappa(np.array(table)).kappa, abs=1e-12)
    p = np.array([0.01, 0.04, 0.03, 0.2, 0.005, 0.5])
    assert holm(p) == pytest.approx(multipletests(p, method="holm")[1], abs=1e-12)


# ---------------------------------------------------------------- labelling plan


def test_label_plan_then_double_sampling(tmp_path: Path):
    from realbench.store import RunStore
    from tests.analysis_fixtures import write_store

    clone = write_store(tmp_path / "clone", env="clone", n_tasks=10, repeats=3, seed=1)
    real = write_store(tmp_path / "real", env="real", n_tasks=10, repeats=3, seed=2)  # no labels
    plan, text = run_cli(["audit", "--plan-labels", "12", str(clone), str(real)])
    path = real / "label-plan.json"
    assert path.exists() and json.loads(path.read_text())["kind"] == "realbench-label-plan"
    assert plan["n_planned"] == 12 and "expected 95% half-width" in text
    strata = {s["id"]: s for s in plan["strata"]}
    assert {s["side"] for s in strata.values()} == {"real"}  # the clone has its verifier already
    assert all(s["allocated"] >= 2 for s in strata.values())
    assert sum(s["allocated"] for s in strata.values()) == 12
    assert all(s["prior_source"].startswith("the clone verifier") for s in strata.values())
    episodes = plan["episodes"]
    assert len({e["episode"] for e in episodes}) == 12 and all(e["store"] == str(real) for e in episodes)
    assert [e["order"] for e in episodes] == list(range(1, 13))
    # The plan never puts a judge verdict next to an episode (blind queue).
    assert all("verdict" not in json.dumps(e) for e in episodes)
    # People label the planned episodes (here: the opposite of the judge on every third one).
    store = RunStore(real, create=False)
    judged = {}
    for e in episodes:
        v = [x for x in store.verdicts(e["episode"]) if x.source.value == "judge"][-1]
        judged[e["episode"]] = v.success
    for i, (eid, verdict) in enumerate(sorted(judged.items())):
        store.add_label(eid, "annotator", verdict if i % 3 else not verdict)
    store.close()
    audit, _ = run_cli(["audit", str(clone), str(real)])
    assert any("double sampling" in n for n in audit["notes"])
    real_rates = [c for c in audit["judges"]["vlm-judge"]["corrected"] if c["side"] == "real"]
    assert real_rates and all(c["method"] == "double-sampling" for c in real_rates)


# ---------------------------------------------------------------- report


def test_report_names_estimands_warns_and_compares_like_with_like(tmp_path: Path):
    import re

    from tests.analysis_fixtures import write_store

    clone = write_store(tmp_path / "clone", env="clone", n_tasks=6, repeats=2, seed=3)
    real = write_store(tmp_path / "real", env="real", n_tasks=3, repeats=2, seed=4, label=True)
    listing = {
        "kind": "realbench-signal-tasks",
        "version": 1,
        "population": {"gain": 4, "mixed": 2},
        "power": {"tasks_needed_m_runs": 10},
        "tasks": [
            {"task": "task0", "stratum": "gain"},
            {"task": "task1", "stratum": "gain"},
            {"task": "task2", "stratum": "mixed"},
        ],
    }
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps(listing))
    out = tmp_path / "r.html"
    result = runner.invoke(
        app,
        [
            "report",
            str(clone),
            str(real),
            "--out",
            str(out),
            "--base",
            BASE,
            "--trained",
            TRAINED,
            "--tasks",
            str(tasks),
            "--resamples",
            "300",
        ],
    )
    assert result.exit_code == 0, (result.output, result.exception)
    page = out.read_text(encoding="utf-8")
    for name in ("R_signal", "R_sample", "R_pop"):
        assert name in page
    assert "(headline)" in page
    assert 'id="retention-warnings"' in page and "power analysis" in page
    # Clone bars over the same tasks as the device; clone-only tasks said once, as expected.
    assert "(every clone task)" in page and page.count("decided episodes on the clone only") == 2
    assert "dropping" not in page
    # FPR, FNR, PPV, NPV each with an interval in the audit table.
    audit = page.split('id="audit"')[1].split("</section>")[0]
    for metric in ("FPR", "FNR", "PPV", "NPV"):
        assert f"<th>{metric}</th>" in audit
    assert len(re.findall(r"bootstrap [\[(]", audit)) >= 4


# ---------------------------------------------------------------- selection


def test_neyman_uses_the_spread_of_z_from_a_pilot_or_prior(tmp_path: Path):
    from analysis.selection import select_tasks
    from tests.adversarial_tables import table_from_counts
    from tests.analysis_fixtures import selection_frame

    df = selection_frame()
    # A first phone batch: both-fail and both-pass tasks move on the device (drift, judge), the
    # gain tasks keep their gain: z = g_d − R·g_s spreads most where the clone showed no gain.
    pilot = table_from_counts(
        {
            "t00": (0, 4, 0, 4),
            "t01": (0, 4, 0, 3),
            "t02": (1, 4, 0, 4),
            "t26": (0, 0, 0, 4),
            "t27": (0, 0, 3, 0),
            "t28": (0, 0, 0, 0),
            "t29": (0, 0, 4, 1),
            "t16": (4, 4, 0, 4),
            "t17": (4, 4, 4, 0),
            "t18": (4, 4, 4, 4),
            "t12": (4, 0, 4, 1),
            "t13": (4, 0, 3, 0),
            "t41": (2, 3, 1, 3),
            "t42": (2, 2, 3, 1),
        },
        runs=4,
    )
    res = select_tasks(df, base=BASE, trained=TRAINED, budget_hours=3.0, runs_per_model=3, pilot=pilot)
    assert res.method == "neyman" and res.spread_source.startswith("pilot of 14 tasks")
    alloc = res.allocation.as_dict()
    # Proportional to N_h·S_z,h: the both-fail stratum (15 tasks, the widest z) gets more than the floor.
    assert alloc["both-fail"] > 2 and alloc["both-fail"] >= alloc["gain"]
    assert res.spread_z["both-fail"] > res.spread_z["gain"]
    prior = select_tasks(
        df,
        base=BASE,
        trained=TRAINED,
        budget_hours=3.0,
        prior_sz={"gain": 0.1, "loss": 0.1, "both-pass": 0.3, "both-fail": 0.3, "mixed": 0.2},
    )
    assert prior.method == "neyman" and prior.spread_source == "prior given by the user"
    out, text = run_cli(
        [
            "select",
            "--clone",
            str(_csv(tmp_path, df)),
            "--base",
            BASE,
            "--trained",
            TRAINED,
            "--budget-hours",
            "3",
        ]
    )
    assert out["allocation"]["method"] == "proportional" and "allocation is proportional" in text


def _csv(tmp_path: Path, df: pd.DataFrame) -> Path:
    path = tmp_path / "clone.csv"
    df.to_csv(path, index=False)
    return path


# ---------------------------------------------------------------- judge-corrected retention


def test_judge_corrected_retention_recovers_r_and_reports_the_bias():
    """Virtual-phone style: ground truth and the judge on every episode. The judge shrinks the
    device gain by Se + Sp − 1; correcting its rates with its Se/Sp recovers R."""
    rng = np.random.default_rng(3)
    se, sp, n_tasks, m, true_r = 0.8, 0.85, 600, 2, 0.8
    b = rng.beta(2, 5, n_tasks)
    gamma = rng.beta(2, 2, n_tasks) * (1 - b)
    p = {
        ("base", "clone"): b,
        ("trained", "clone"): b + gamma,
        ("base", "real"): b,
        ("trained", "real"): b + true_r * gamma,
    }
    table = judged_table(rng, p, se, sp, m, success_source="truth")
    res = retention_from_table(table, base="base", trained="trained", n_resamples=0)
    jc = res.judge_correction
    assert jc is not None
    assert jc.se["trained"] == pytest.approx(se, abs=0.04) and jc.sp["base"] == pytest.approx(sp, abs=0.04)
    assert jc.judged.estimate == pytest.approx((se + sp - 1) * true_r, abs=0.07)
    assert jc.corrected.estimate == pytest.approx(true_r, abs=0.08)
    assert jc.corrected.fieller_ci[0] <= true_r <= jc.corrected.fieller_ci[1]
    # The judge's bias in the gain: measured, and by the §3 formula; both negative here.
    assert jc.bias_in_gain < 0 and jc.bias_formula < 0
    assert jc.bias_in_gain == pytest.approx(jc.bias_formula, abs=0.03)
    assert res.to_dict()["judge_correction"]["corrected"]["estimate"] == pytest.approx(jc.corrected.estimate)


def _judged_retention_table(se: float, sp: float, real_scored_by_judge: bool) -> pd.DataFrame:
    rng = np.random.default_rng(8)
    n_tasks = 60
    b = rng.beta(2, 5, n_tasks)
    gamma = rng.beta(2, 2, n_tasks) * (1 - b)
    p = {
        ("base", "clone"): b,
        ("trained", "clone"): b + gamma,
        ("base", "real"): b,
        ("trained", "real"): b + 0.8 * gamma,
    }
    kw = {"success_source": "judge"} if real_scored_by_judge else {"success_source": "truth"}
    table = judged_table(rng, p, se, sp, 2, real_scored_by_judge=real_scored_by_judge, **kw)
    if real_scored_by_judge:
        # Clone rows keep their verifier truth; only the device's success is the judge's verdict.
        table.loc[table["env"] == "clone", "success_source"] = "verifier"
    return table


def test_judge_correction_never_borrows_the_clone_se_sp_unless_asked():
    table = _judged_retention_table(0.8, 0.85, real_scored_by_judge=True)
    res = retention_from_table(table, base="base", trained="trained", n_resamples=0)
    assert res.judge_correction is None
    assert any("not identified on real" in w and "--borrow-from" in w for w in res.warnings)
    asked = retention_from_table(table, base="base", trained="trained", n_resamples=0, borrow_from="clone")
    assert asked.judge_correction is not None
    assert "borrowed" in asked.judge_correction.source


def test_judge_correction_refuses_a_near_chance_judge():
    # Se + Sp − 1 = 0.04 on 240 episodes per model: the lower bound of the Youden index is below 0.
    table = _judged_retention_table(0.52, 0.52, real_scored_by_judge=False)
    res = retention_from_table(table, base="base", trained="trained", n_resamples=0)
    assert res.judge_correction is None
    assert any("not shown to beat chance" in w for w in res.warnings)
    out = res.to_dict()
    assert out["judge_correction"] is None and out["judge_correction_estimable"] is False
    assert "not shown to beat chance" in out["judge_correction_reason"]


def test_a_gain_with_no_spread_across_tasks_takes_the_binomial_floor():
    from scipy import stats as sps

    from tests.adversarial_tables import table_from_counts

    # Every task: base 0/3, trained 3/3, on both sides. Between-task variance 0; the runs' own
    # continuity-adjusted variance per task is 2 · (0.5/4)(3.5/4)/3, so the mean gain of 10 tasks
    # has variance 10 · that / 10².
    df = table_from_counts({f"t{i}": (0, 3, 0, 3) for i in range(10)}, runs=3)
    res = retention_from_table(df, base=BASE, trained=TRAINED, n_resamples=0)
    e = res.estimands[res.headline]
    per_task = 2 * (0.5 / 4) * (3.5 / 4) / 3
    se = (10 * per_task / 100) ** 0.5
    q = sps.t.ppf(0.975, 9)
    assert e.gain_real.se == pytest.approx(se)
    assert e.gain_real.ci == (pytest.approx(1 - q * se), pytest.approx(1 + q * se))
    assert e.ratio.floored == ("numerator", "denominator")
    assert any("does not vary across tasks" in w and "floored" in w for w in res.warnings)
    assert e.ratio.degenerate and any("binomial floor" in w for w in res.warnings)


def test_bootstrap_and_kappa_intervals_of_constants_are_not_shown():
    from analysis.audit import audit_table, clustered_rate

    r = clustered_rate(np.array(["a", "b", "c"]), np.array([True, True, True]), np.random.default_rng(0))
    assert r.value == 1.0 and r.bootstrap_ci is None
    df = clustered_audit_table()
    always = df.assign(judge="always-yes", verdict=True)
    (agree,) = audit_table(pd.concat([df, always]), seed=0).agreements
    assert agree.kappa_ci is None


def test_a_pilot_spread_of_zero_is_floored_and_the_controls_are_kept():
    from analysis.selection import select_tasks
    from tests.adversarial_tables import table_from_counts
    from tests.analysis_fixtures import selection_frame

    df = selection_frame()
    # Three pilot stable failures that never move (spread 0 in both-fail); the gain tasks move.
    pilot = table_from_counts(
        {
            "t00": (0, 4, 0, 4),
            "t01": (0, 4, 0, 1),
            "t02": (1, 4, 1, 2),
            "t26": (0, 0, 0, 0),
            "t27": (0, 0, 0, 0),
            "t28": (0, 0, 0, 0),
            "t16": (4, 4, 4, 2),
            "t17": (4, 4, 1, 4),
            "t12": (4, 0, 4, 1),
            "t13": (4, 0, 2, 0),
        },
        runs=4,
    )
    res = select_tasks(df, base=BASE, trained=TRAINED, budget_hours=3.0, runs_per_model=3, pilot=pilot)
    assert res.method == "neyman"
    # Fewer than 5 pilot tasks: the both-fail spread is not trusted under the pooled spread.
    assert res.spread_z["both-fail"] > 0
    assert "both-fail" in res.spread_source and "floored" in res.spread_source
    assert any(n.startswith("warning:") and "floored" in n for n in res.notes)
    # The controls keep at least the proportional design's size.
    assert res.allocation.as_dict()["both-fail"] >= res.proportional.as_dict()["both-fail"]
    assert res.controls_false_accept_bound is not None and res.controls_false_accept_bound < 1.0


def test_the_budget_search_spends_what_a_cheaper_stratum_still_fits():
    from analysis.selection import _budget_allocation

    population = {"a": 10, "b": 10}
    cost = {"a": 1.0, "b": 0.1}
    # Proportional: n = 2k gives k + k tasks; the search stops at 1.1·k > budget. Top-up adds b.
    got = _budget_allocation(population, {}, cost, 5.0, "proportional", 1)
    spent = sum(n * cost[h] for h, n in got.as_dict().items())
    assert spent <= 5.0
    # Nothing more fits: every stratum is full or one more task of it would exceed the budget.
    assert all(got.as_dict()[h] == population[h] or spent + cost[h] > 5.0 for h in population)
    assert got.as_dict()["b"] == 10


def test_a_stratum_taken_whole_is_not_collapsed():
    from analysis.retention import ratio_of_means

    rng = np.random.default_rng(2)
    a = np.concatenate([rng.normal(0.3, 0.1, 10), [0.9]])
    b = np.concatenate([rng.normal(0.5, 0.1, 10), [0.1]])
    strata = ["gain"] * 10 + ["solo"]
    r = ratio_of_means(a, b, strata=strata, population={"gain": 40, "solo": 1}, n_resamples=0)
    assert r.collapsed == {}
    # By hand: only the gain stratum varies, W = 40/41, f = 10/40.
    w = 40 / 41
    assert r.v_aa == pytest.approx(w**2 * (1 - 10 / 40) * np.var(a[:10], ddof=1) / 10)
    # A sampled singleton (N_h > n_h) still joins a neighbour.
    r2 = ratio_of_means(a, b, strata=strata, population={"gain": 40, "solo": 3}, n_resamples=0)
    assert "solo" in r2.collapsed


def test_interval_text_uses_one_minus_sign():
    from analysis.analysis_commands import _ci
    from analysis.stats import format_interval, format_set

    assert format_interval((-0.5, 0.25)) == "[\u22120.500, 0.250]"
    assert (
        format_set([(float("-inf"), -0.862), (0.916, float("inf"))]) == "(\u2212∞, \u22120.862] ∪ [0.916, ∞)"
    )
    assert _ci((-0.701, 0.784), pct=True) == "[\u221270.1%, 78.4%]"
    assert "-" not in format_interval((-0.5, -0.25), pct=True)
